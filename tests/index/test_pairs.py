"""PairQueue against the paper's naive argmax (§3.2), step for step.

The reference recomputes the full similarity matrix of the live entries at
every step, masks judged pairs and takes the argmax with the documented
tie-break. Both sides score pairs with the same exact routine, so the proposed
sequences must be identical, bit for bit, including the scores.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memrefine_edge.index import PairQueue, pair_scores, similarity_matrix
from tests.support.pairs import (
    DecodedNaive,
    NaiveOrder,
    QuantizedTarget,
    ScriptedJudge,
    decoded,
    drive,
    make_data,
    run_case,
    unit,
)


def test_scores_are_bit_identical_across_routes_and_blocks():
    x = make_data("gauss", 37, 384, 1)
    full = similarity_matrix(x)
    i, j = np.triu_indices(37, 1)
    assert np.array_equal(pair_scores(x[i], x[j]), full[i, j])
    assert np.array_equal(pair_scores(x[j], x[i]), full[i, j])  # symmetric
    assert np.array_equal(full, full.T)
    # other chunking, same bits
    assert np.array_equal(similarity_matrix(x, chunk_elems=1000), full)
    assert np.array_equal(pair_scores(x[i], x[j], chunk_elems=1000), full[i, j])
    exact = np.array([[float(sum(map(float, a.astype(np.float64) * b))) for b in x[:5]] for a in x[:5]])
    assert np.allclose(full[:5, :5], exact, rtol=0, atol=1e-14)


def test_blas_error_is_within_the_selection_margin():
    for kind in ("gauss", "raw"):
        x = make_data(kind, 300, 384, 2)
        norms = np.linalg.norm(x.astype(np.float64), axis=1)
        err = np.abs((x @ x.T).astype(np.float64) - similarity_matrix(x))
        bound = (384 + 2) * 2.0**-24 * np.outer(norms, norms)
        assert (err <= bound).all()


# ------------------------------------------------------------ the acceptance test


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("kind", ["gauss", "dups", "lattice", "raw"])
def test_sequence_matches_naive_argmax(kind, seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 120))
    k = int(rng.integers(1, 5))
    d = int(rng.choice([3, 8, 24]))
    seq = run_case(kind, n, d, k, seed, block_rows=int(rng.integers(1, 64)), tile_cols=int(rng.integers(1, 80)))
    assert len(seq) >= 1


@pytest.mark.parametrize("k", [2, 4])
def test_sequence_matches_naive_argmax_n200(k):
    # n >= 32k takes the group-maximum threshold path of the scan
    seq = run_case("gauss", 200, 16, k, 77 + k)
    assert len(seq) > 100
    run_case("dups", 200, 16, k, 88 + k, block_rows=33)
    # Build tiles: wide enough for the group-maximum path, several per row band, a ragged last one.
    run_case("gauss", 200, 16, k, 99 + k, block_rows=24, tile_cols=136)
    run_case("dups", 200, 16, k, 111 + k, block_rows=7, tile_cols=41)


def test_sequence_matches_naive_argmax_d384():
    run_case("gauss", 60, 384, 3, 5)


def test_sequence_with_compaction():
    for seed in range(3):
        run_case("gauss", 90, 8, 2, 300 + seed, compact_min=2)
        run_case("dups", 90, 8, 3, 400 + seed, compact_min=2)


def test_exact_duplicates_tie_break_by_insertion_order():
    v = unit(np.ones((1, 4)))[0]
    w = unit(np.array([[1.0, 0, 0, 0]]))[0]
    q = PairQueue(["a", "x", "b", "c"], np.stack([v, w, v, v]), k=1)
    assert [q.pop()[:2] for _ in range(3)] == [("a", "b"), ("a", "c"), ("b", "c")]
    q.add("d", v)  # new entry: its pairs come after equal-score older pairs
    assert q.pop()[:2] == ("a", "d")


@settings(max_examples=30, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(0, 40),
    d=st.integers(1, 6),
    k=st.integers(1, 4),
    kind=st.sampled_from(["gauss", "dups", "lattice"]),
    n_excl=st.integers(0, 10),
    tile=st.tuples(st.integers(1, 16), st.integers(1, 24)),
)
def test_property_matches_naive(seed, n, d, k, kind, n_excl, tile):
    x = make_data(kind, n, d, seed) if n else np.zeros((0, d), np.float32)
    ids = [f"e{i}" for i in range(n)]
    rng = np.random.default_rng(seed)
    excl = [(f"e{rng.integers(n + 2)}", f"e{rng.integers(n + 2)}") for _ in range(n_excl)] if n else []
    excl = [p for p in excl if p[0] != p[1]]
    q = PairQueue(ids, x, k=k, excluded=excl, block_rows=tile[0], tile_cols=tile[1])
    known = set(ids)
    ref = NaiveOrder(ids, x, [p for p in excl if set(p) <= known])
    drive(q, ref, ScriptedJudge(seed % 1000, d), dict(zip(ids, x)))


# ------------------------------------------------------------ rebuild (resume)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("kind", ["gauss", "dups"])
def test_rebuilt_queue_continues_identically(kind, seed):
    rng = np.random.default_rng(seed)
    n, d, k = int(rng.integers(20, 90)), 8, int(rng.integers(1, 4))
    x = make_data(kind, n, d, seed)
    ids = [f"e{i}" for i in range(n)]
    vecs = dict(zip(ids, x))
    judge = ScriptedJudge(seed, d)
    q = PairQueue(ids, x, k=k)
    head = drive(q, NaiveOrder(ids, x), judge, vecs, steps=int(rng.integers(1, n)))
    live = q.live_ids()
    excluded = [(a, b) for a, b, _ in head if a in q and b in q]
    # A different k must not matter either: the order is a function of the state only.
    q2 = PairQueue(live, np.stack([vecs[i] for i in live]), k=k + 1, excluded=excluded, block_rows=5, tile_cols=9)
    assert len(q2) == len(q) and all(i in q2 for i in live)
    judge2, vecs2 = copy.deepcopy(judge), dict(vecs)
    rest1 = drive(q, _Null(), judge, vecs)
    rest2 = drive(q2, _Null(), judge2, vecs2)
    assert rest1 == rest2
    assert len(head) + len(rest1) > 0


class _Null:
    """A reference that accepts anything: used when two queues are compared directly."""

    def pop(self):
        return _ANY

    def remove(self, _id):
        pass

    def add(self, _id, _v):
        pass


class _Any:
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False


_ANY = _Any()


# ------------------------------------------------------------ API and edge cases


def test_empty_and_single():
    q = PairQueue([], np.zeros((0, 4), np.float32))
    assert q.pop() is None and q.peek() is None and len(q) == 0
    q.add("a", np.array([1, 0, 0, 0], np.float32))
    assert q.pop() is None and len(q) == 1 and "a" in q
    q.add("b", np.array([0, 1, 0, 0], np.float32))
    assert q.peek() == ("a", "b", 0.0) and q.pop() == ("a", "b", 0.0)
    assert q.pop() is None
    q1 = PairQueue(["only"], np.ones((1, 3), np.float32))
    assert q1.pop() is None
    q0 = PairQueue([], np.zeros((0, 0), np.float32))  # what an empty store's embeddings() gives
    q0.add("a", np.array([0.6, 0.8], np.float32))
    q0.add("b", np.array([0.8, 0.6], np.float32))
    assert q0.pop()[:2] == ("a", "b")
    with pytest.raises(ValueError):
        q0.add("c", np.ones(3, np.float32))


def test_peek_exclude_remove_contains():
    x = make_data("gauss", 10, 5, 3)
    ids = [str(i) for i in range(10)]
    q = PairQueue(ids, x, k=2)
    first = q.peek()
    assert q.peek() == first and q.pop() == first and q.peek() != first
    nxt = q.peek()
    q.exclude(nxt[1], nxt[0])  # either order
    assert q.pop() != nxt
    q.remove("3")
    assert "3" not in q and len(q) == 9 and q.live_ids() == [i for i in ids if i != "3"]
    with pytest.raises(KeyError):
        q.remove("3")
    with pytest.raises(KeyError):
        q.remove("nope")
    with pytest.raises(KeyError):
        q.exclude("nope", "1")
    with pytest.raises(ValueError):
        q.exclude("1", "1")
    with pytest.raises(ValueError):
        q.add("1", x[0])  # live duplicate
    with pytest.raises(ValueError):
        q.add("3", x[0])  # removed ids are never reused
    with pytest.raises(ValueError):
        q.add("new", x[0][:4])
    with pytest.raises(ValueError):
        q.add("new", np.full(5, np.nan, np.float32))
    q.add("new", x[0][None, :])  # (1, d) is accepted
    assert "new" in q


@pytest.mark.parametrize(
    "ids, vectors",
    [
        (["a", "b"], np.zeros((3, 4))),
        (["a", "b"], np.zeros(8)),
        (["a", "b"], np.zeros((2, 2, 2))),
        (["a", "b"], np.zeros((2, 0))),
        (["a", "b"], np.array([[1.0, np.inf], [0.0, 1.0]])),
        (["a", "b"], np.array([["x", "y"], ["z", "w"]])),
    ],
)
def test_bad_vectors(ids, vectors):
    with pytest.raises(ValueError):
        PairQueue(ids, vectors)


def test_bad_construction():
    with pytest.raises(ValueError):
        PairQueue(["a", "a"], np.eye(2, dtype=np.float32))
    with pytest.raises(ValueError):
        PairQueue(["a", "b"], np.eye(2, dtype=np.float32), k=0)
    with pytest.raises(ValueError):
        PairQueue(["a", "b"], np.eye(2, dtype=np.float32), k=3, refill_k=2)
    with pytest.raises(ValueError):
        PairQueue(["a", "b"], np.eye(2, dtype=np.float32), tile_cols=0)


def test_writable_matrix_is_compacted_in_place():
    # With writable=True the queue reuses the caller's array: removals then adds
    # compact it in place instead of allocating a second matrix; same order.
    x = make_data("gauss", 80, 6, 600)
    ids = [f"e{i}" for i in range(80)]
    given = x.copy()
    q = PairQueue(ids, given, k=2, writable=True, compact_min=4)
    judge = ScriptedJudge(601, 6)
    drive(q, NaiveOrder(ids, x), judge, dict(zip(ids, x, strict=True)))
    assert judge.merges > 0 and q._x is given  # merged rows went into the same memory
    # Not writable (the default): the caller's array is never written to.
    given = x.copy()
    q = PairQueue(ids, given, k=2, compact_min=4)
    drive(q, NaiveOrder(ids, x), ScriptedJudge(601, 6), dict(zip(ids, x, strict=True)))
    assert np.array_equal(given, x) and q._x is not given


def test_judged_pairs_of_removed_entries_are_dropped_when_the_matrix_is_compacted():
    # Judged pairs are what grows with a run (every preserve is one); those with a removed end
    # go at compaction, so the queue's memory follows the live entries, and the order does not move.
    x = make_data("gauss", 60, 5, 610)
    ids = [f"e{i}" for i in range(60)]
    q = PairQueue(ids, x, k=2, compact_min=4)
    ref = NaiveOrder(ids, x)
    for _ in range(40):  # judge 40 pairs (preserve), then remove entries until a compaction happens
        got, want = q.pop(), ref.pop()
        assert got == want
    assert len(q._jkeys) == 40
    removed = []
    while q._dead_rows or not removed:
        victim = q.live_ids()[0]
        q.remove(victim)
        ref.remove(victim)
        removed.append(victim)
    assert all(q._alive[a] and q._alive[b] for a, b in ((k >> 32, k & 0xFFFFFFFF) for k in q._jkeys))
    pos = {i: n for n, i in enumerate(ids)}
    kept = {p for p in ref.judged if all(i not in removed for i in p)}
    assert {tuple(sorted((pos[a], pos[b]))) for a, b in kept} == {(k >> 32, k & 0xFFFFFFFF) for k in q._jkeys}
    while (got := q.pop()) is not None:  # the rest of the sequence is still the naive argmax's
        assert got == ref.pop()
    assert ref.pop() is None


@pytest.mark.parametrize("refill_k", [None, 1, 2, 7])
def test_refill_length_does_not_change_the_order(refill_k):
    # Lists that run dry are rescanned to refill_k partners (default 4 k): the
    # sequence is the naive argmax's whatever that length.
    k = 1 if refill_k == 1 else 2
    for kind, seed in (("gauss", 500), ("dups", 501), ("lattice", 502)):
        run_case(kind, 70, 6, k, seed, refill_k=refill_k)


@pytest.mark.parametrize("refill_batch", [1, 2, 5, 64])
def test_refill_batch_does_not_change_the_order(refill_batch):
    # Dry lists are rescanned together, some before they are due: the sequence is
    # still the naive argmax's, on float vectors and on int8 codes alike.
    for kind, seed in (("gauss", 510), ("dups", 511), ("lattice", 512)):
        run_case(kind, 80, 6, 1, seed, refill_k=2, refill_batch=refill_batch)
        x = make_data(kind, 80, 6, seed)
        ids = [f"e{i}" for i in range(80)]
        target = QuantizedTarget(ids, x, k=1, refill_k=2, refill_batch=refill_batch, compact_min=4)
        drive(target, DecodedNaive(ids, x), ScriptedJudge(seed + 1, 6), dict(zip(ids, x, strict=True)))


def test_refill_batch_must_be_positive():
    with pytest.raises(ValueError, match="refill_batch"):
        PairQueue(["a", "b"], np.eye(2, dtype=np.float32), refill_batch=0)


def test_a_dry_list_is_rescanned_only_when_its_bound_comes_up():
    # Three well-separated pairs at 0.99, 0.8 and 0.6, every other score near 0.
    # With k = 1 each list runs dry as soon as its pair is taken; its rescan waits
    # until nothing above its bound is left, so the three pairs cost no rescan.
    d = 12
    basis = np.eye(d, dtype=np.float32)

    def pair(i: int, c: float) -> list[np.ndarray]:
        s = float(np.sqrt(1 - c * c))
        return [basis[2 * i], c * basis[2 * i] + s * basis[2 * i + 1]]

    vecs = np.array(pair(0, 0.99) + pair(1, 0.8) + pair(2, 0.6), dtype=np.float32)
    ids = ["a", "b", "c", "d", "e", "f"]
    q = PairQueue(ids, vecs, k=1)
    built = q.scans
    assert [p[:2] for p in (q.pop(), q.pop(), q.pop())] == [("a", "b"), ("c", "d"), ("e", "f")]
    assert q.scans == built
    q.remove("a")  # a removed entry's deferred rescan never happens
    rest = []
    while (p := q.pop()) is not None:
        rest.append(p[:2])
    assert q.scans > built
    assert len(rest) == 15 - 3 - 4  # every pair once; the four pairs of "a" left with it


def test_excluded_with_unknown_ids_is_ignored():
    x = unit(np.array([[1.0, 0, 0], [1.0, 1.0, 0], [0, 1.0, 1.0]]))
    q = PairQueue(["a", "b", "c"], x, excluded=[("a", "b"), ("a", "gone"), ("gone", "other")])
    assert q.pop()[:2] == ("b", "c")


# ------------------------------------------------------------ int8 codes (the store's stored form)


@pytest.mark.parametrize("kind,seed", [("gauss", 700), ("dups", 701), ("lattice", 702), ("raw", 703)])
def test_int8_codes_give_the_order_of_the_decoded_vectors(kind, seed):
    # Tiny tiles, buckets and compaction thresholds exercise every path that decodes rows.
    x = make_data(kind, 90, 12, seed)
    ids = [f"e{i}" for i in range(90)]
    target = QuantizedTarget(ids, x, k=2, block_rows=7, tile_cols=11, compact_min=4, writable=True)
    assert target.q.quantized
    judge = ScriptedJudge(seed + 1, 12)
    seq = drive(target, DecodedNaive(ids, x), judge, dict(zip(ids, x, strict=True)))
    assert len(seq) > 50 and judge.merges > 0
    assert target.q._x is target.codes  # writable: compacted in place, no second matrix


def test_int8_queue_rebuilt_mid_run_continues_identically():
    x = make_data("dups", 60, 8, 710)
    ids = [f"e{i}" for i in range(60)]
    first = QuantizedTarget(ids, x, k=3)
    reference = DecodedNaive(ids, x)
    vecs = dict(zip(ids, x, strict=True))
    judge = ScriptedJudge(711, 8)
    done = drive(first, reference, judge, vecs, steps=40)
    # Rebuilt from what a store holds now: the live entries' codes, and the judged pairs.
    live = first.q.live_ids()
    judged = [(a, b) for a, b, _ in done if a in live and b in live]
    again = QuantizedTarget(live, np.stack([vecs[i] for i in live]), k=3, excluded=judged)
    drive(again, reference, judge, vecs)


def test_bad_codes_and_scales():
    codes = np.array([[1, 2], [3, 4]], dtype=np.int8)
    for bad_codes, bad_scales in [
        (codes.astype(np.float32), np.ones(2)),  # codes must be int8
        (codes, np.ones(3)),  # one scale per row
        (codes, np.array([1.0, np.nan])),
        (codes, np.array(["a", "b"])),
        (codes[:, :0], np.ones(2)),
    ]:
        with pytest.raises(ValueError):
            PairQueue(["a", "b"], bad_codes, scales=bad_scales)
    q = PairQueue(["a", "b"], codes, scales=np.ones(2, dtype=np.float32))
    with pytest.raises(ValueError, match="codes and a scale"):
        q.add("c", np.array([1, 1], dtype=np.int8))  # no scale for a queue of codes
    with pytest.raises(ValueError):
        q.add("c", np.array([1.5, 1.0]), 1.0)  # not int8
    with pytest.raises(ValueError, match="codes and a scale"):
        PairQueue(["a", "b"], np.eye(2, dtype=np.float32)).add("c", np.ones(2), 1.0)
    assert "c" not in q and len(q) == 2


@pytest.mark.parametrize("kind,seed", [("gauss", 700), ("dups", 701), ("lattice", 702), ("raw", 703)])
def test_nearest_is_the_naive_nearest_live_partner_as_entries_go(kind, seed):
    # Strict-budget eviction asks each entry's nearest live neighbour while entries
    # are removed one by one: exact score, ties to the earlier partner, lists refilled.
    n, d = 60, 5
    x = make_data(kind, n, d, seed)
    ids = [f"e{i}" for i in range(n)]
    q = PairQueue(ids, x, k=2, refill_k=3, compact_min=4)
    full = similarity_matrix(x)
    alive = list(range(n))
    rng = np.random.default_rng(seed)
    while alive:
        for a in alive:
            others = [b for b in alive if b != a]
            want = None
            if others:
                best = max(full[a, b] for b in others)
                want = (ids[min(b for b in others if full[a, b] == best)], float(best))
            assert q.nearest(ids[a]) == want
        gone = alive.pop(int(rng.integers(len(alive))))
        q.remove(ids[gone])


def test_nearest_is_refused_after_an_add():
    x = unit(np.array([[1.0, 0, 0], [1.0, 1.0, 0], [0, 1.0, 1.0]]))
    q = PairQueue(["a", "b", "c"], x)
    assert q.nearest("a")[0] == "b"
    q.add("d", x[0])
    with pytest.raises(RuntimeError):
        q.nearest("a")
    with pytest.raises(KeyError):
        PairQueue(["a"], x[:1]).nearest("zz")


def test_nearest_on_int8_codes_is_the_nearest_of_the_decoded_vectors():
    n, d = 50, 6
    x = make_data("dups", n, d, 720)
    ids = [f"e{i}" for i in range(n)]
    q = QuantizedTarget(ids, x, k=2, refill_k=3, compact_min=4).q
    full = similarity_matrix(np.stack([decoded(v) for v in x]))
    alive = list(range(n))
    rng = np.random.default_rng(721)
    while len(alive) > 1:
        for a in alive:
            others = [b for b in alive if b != a]
            best = max(full[a, b] for b in others)
            assert q.nearest(ids[a]) == (ids[min(b for b in others if full[a, b] == best)], float(best))
        q.remove(ids[alive.pop(int(rng.integers(len(alive))))])


def test_threads_must_be_positive():
    with pytest.raises(ValueError, match="threads"):
        PairQueue(["a", "b"], np.eye(2, dtype=np.float32), threads=0)


def test_the_build_pauses_between_tiles_and_gives_the_same_pairs():
    x = make_data("gauss", 200, 16, seed=2)
    ids = list(range(200))
    plain = PairQueue(ids, x, k=4, block_rows=32, tile_cols=64)
    calls = []
    paused = PairQueue(ids, x, k=4, block_rows=32, tile_cols=64, pause=lambda: calls.append(1))
    assert len(calls) >= 10  # one per tile of the upper triangle
    for _ in range(300):
        assert plain.pop() == paused.pop()


def test_a_pause_that_raises_abandons_the_build():
    x = make_data("gauss", 100, 8, seed=3)

    def halt() -> None:
        raise RuntimeError("stop")

    with pytest.raises(RuntimeError):
        PairQueue(list(range(100)), x, k=4, block_rows=16, tile_cols=32, pause=halt)
