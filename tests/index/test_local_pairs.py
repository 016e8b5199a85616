"""LocalPairs: each changed entry's k nearest live neighbours, most similar first, each pair once."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memrefine_edge.index import LocalPairs, pair_scores
from memrefine_edge.store import quantize_embedding
from tests.support.pairs import make_data


def reference(ids, x, changed, k, excluded=(), dead=()):
    """The naive answer: exact scores of every live pair, each changed entry's top k, best first."""
    pos = {e: i for i, e in enumerate(ids)}
    live = [i for i, e in enumerate(ids) if e not in dead]
    judged = {(min(pos[a], pos[b]), max(pos[a], pos[b])) for a, b in excluded}
    pairs = set()
    for e in changed:
        a = pos[e]
        if e in dead:
            continue
        others = [c for c in live if c != a]
        if not others:
            continue
        s = pair_scores(np.repeat(x[a:a + 1], len(others), axis=0), x[others])
        order = np.lexsort((np.array(others), -s))[:k]
        for j in order:
            lo, hi = sorted((a, others[j]))
            pairs.add((lo, hi))
    scored = []
    for lo, hi in pairs - judged:
        scored.append((-float(pair_scores(x[lo:lo + 1], x[hi:hi + 1])[0]), lo, hi))
    return [(ids[lo], ids[hi], -neg) for neg, lo, hi in sorted(scored)]


def drain(q):
    out = []
    while (p := q.pop()) is not None:
        out.append(p)
    return out


@pytest.mark.parametrize("kind", ["gauss", "dups", "lattice", "raw"])
@pytest.mark.parametrize("k", [1, 3, 8])
def test_the_pairs_are_the_naive_top_k_of_the_changed_entries(kind, k):
    x = make_data(kind, 60, 16, seed=k)
    ids = [f"e{i}" for i in range(60)]
    rng = np.random.default_rng(k)
    changed = [ids[i] for i in rng.choice(60, size=12, replace=False)]
    excluded = [(ids[0], ids[1]), (ids[5], ids[9])]
    got = drain(LocalPairs(ids, x, k=k, changed=changed, excluded=excluded))
    assert got == reference(ids, x.astype(np.float32), changed, k, excluded)
    # bounded: at most k pairs per changed entry, each pair once
    assert len(got) <= k * len(changed) and len({(a, b) for a, b, _ in got}) == len(got)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 40), k=st.integers(1, 6), seed=st.integers(0, 10_000), share=st.floats(0.0, 1.0))
def test_property_matches_naive_on_int8_codes(n, k, seed, share):
    rng = np.random.default_rng(seed)
    vecs = rng.normal(size=(n, 8)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    codes, scales = zip(*(quantize_embedding(v) for v in vecs), strict=True)
    codes, scales = np.stack(codes), np.array(scales, dtype=np.float32)
    ids = list(range(n))
    changed = [i for i in ids if rng.random() < share]
    got = drain(LocalPairs(ids, codes, scales=scales, k=k, changed=changed))
    rows = codes.astype(np.float32) * scales[:, None]  # as the store decodes: exact cast, one product
    assert got == reference(ids, rows, changed, k)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 50), k=st.integers(1, 6), seed=st.integers(0, 10_000), dups=st.integers(0, 20))
def test_property_matches_naive_on_int8_codes_with_ties(n, k, seed, dups):
    # Rows repeated exactly (equal scores) and nearly (scores within the screen's bound) at the store's width.
    rng = np.random.default_rng(seed)
    vecs = rng.normal(size=(n, 384)).astype(np.float32)
    for _ in range(dups):
        i, j = rng.integers(0, n, size=2)
        vecs[i] = vecs[j] + (rng.normal(size=384).astype(np.float32) * 1e-4 if rng.random() < 0.5 else 0)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    codes, scales = zip(*(quantize_embedding(v) for v in vecs), strict=True)
    codes, scales = np.stack(codes), np.array(scales, dtype=np.float32)
    ids = list(range(n))
    # few changed entries: their scans screen the int8 codes by integer products (many take BLAS)
    changed = sorted(int(i) for i in rng.choice(n, size=min(n, int(rng.integers(1, 9))), replace=False))
    rows = codes.astype(np.float32) * scales[:, None]
    q = LocalPairs(ids, codes, scales=scales, k=k, changed=changed)
    first = q.pop()
    assert first == reference(ids, rows, changed, k)[0]
    # a removal: the changed entries that listed it scan again, a few rows at a time
    gone = int(rng.integers(0, n))
    if first is not None and gone not in first[:2] and n > 2:
        q.remove(gone)
        left = [c for c in changed if c != gone]
        assert drain(q) == reference(ids, rows, left, k, [first[:2]], dead={gone})


def test_adds_are_changed_and_removals_bring_the_next_neighbour():
    x = make_data("gauss", 30, 12, seed=3)
    ids = [f"e{i}" for i in range(30)]
    q = LocalPairs(ids[:25], x[:25], k=3, changed=[])
    assert q.pop() is None  # nothing changed: no work, whatever the store's size
    for i in range(25, 30):
        q.add(ids[i], x[i])
    first = q.pop()
    q.remove("e27")
    got = [first, *drain(q)]
    x32 = x.astype(np.float32)
    # the first pop is the best pair of the full state; the rest is the naive answer for the state after it
    assert first == reference(ids, x32, ids[25:], 3)[0]
    judged = [first[:2]]
    assert got[1:] == reference(ids, x32, [e for e in ids[25:] if e != "e27"], 3, judged, dead={"e27"})


def test_pending_names_the_changed_entries_with_pairs_left_to_judge():
    x = make_data("gauss", 20, 12, seed=4)
    ids = [f"e{i}" for i in range(20)]
    q = LocalPairs(ids, x, k=2, changed=["e3", "e11"])
    assert q.pending() == ["e3", "e11"]  # not scanned yet
    q.exclude("e3", "e11")  # whichever lists the other, that pair is judged now
    left = 0
    while q.pending():
        got = q.pop()
        assert got is not None  # an entry stays pending only while a pair of it is left
        left += 1
    assert q.pop() is None and 2 <= left <= 4  # two neighbours each, shared pairs once
    q2 = LocalPairs(ids, x, k=2, changed=["e3", "e7"])
    q2.pop()
    q2.remove("e7")
    assert "e7" not in q2.pending()


def _state_rebuild(ids, x, alive, changed, judged, k):
    live = [i for i in range(len(ids)) if alive[i]]
    return LocalPairs([ids[i] for i in live], x[live], k=k, changed=[ids[i] for i in live if i in changed],
                      excluded=judged)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 100_000), k=st.integers(1, 4), ops=st.lists(st.sampled_from("prax"), max_size=25))
def test_a_queue_rebuilt_from_its_state_continues_identically(seed, k, ops):
    rng = np.random.default_rng(seed)
    n0, extra = 16, 10
    x = make_data("dups" if seed % 2 else "gauss", n0 + extra, 6, seed=seed % 1000).astype(np.float32)
    ids = [f"e{i}" for i in range(n0 + extra)]
    alive = [True] * n0 + [False] * extra
    changed = {int(i) for i in rng.choice(n0, size=5, replace=False)}
    q = LocalPairs(ids[:n0], x[:n0], k=k, changed=[ids[i] for i in changed])
    judged: list[tuple[str, str]] = []
    nxt = n0
    for op in ops:
        live = [i for i in range(nxt) if alive[i]]
        if op == "p":
            p = q.pop()
            if p is not None:
                judged.append(p[:2])
        elif op == "r" and len(live) > 2:
            i = int(rng.choice(live))
            q.remove(ids[i])
            alive[i] = False
        elif op == "a" and nxt < n0 + extra:
            q.add(ids[nxt], x[nxt])
            alive[nxt] = True
            changed.add(nxt)
            nxt += 1
        elif op == "x" and len(live) > 1:
            a, b = (int(v) for v in rng.choice(live, size=2, replace=False))
            q.exclude(ids[a], ids[b])
            judged.append((ids[a], ids[b]))
    rebuilt = _state_rebuild(ids[:nxt], x[:nxt], alive[:nxt], changed, judged, k)
    assert drain(q) == drain(rebuilt)


def test_bad_input_is_refused():
    x = make_data("gauss", 4, 4, seed=0)
    with pytest.raises(ValueError):
        LocalPairs(["a", "b", "c", "d"], x, k=0)
    with pytest.raises(ValueError):
        LocalPairs(["a", "a", "c", "d"], x)
    with pytest.raises(ValueError):
        LocalPairs(["a", "b"], x)
    q = LocalPairs(["a", "b", "c", "d"], x, changed=["a"])
    with pytest.raises(ValueError):
        q.add("a", x[0])
    with pytest.raises(KeyError):
        q.remove("zz")
    with pytest.raises(ValueError):
        q.add("e", x[0], scale=1.0)  # a float queue takes no scale


def test_a_pause_that_raises_leaves_the_rows_it_did_not_scan_for_the_next_pop():
    x = make_data("gauss", 300, 12, seed=8)
    ids = [f"e{i}" for i in range(300)]
    changed = ids[::2]
    expected = drain(LocalPairs(ids, x, k=3, changed=changed))
    state = {"n": 0}

    def pause() -> None:
        state["n"] += 1
        if state["n"] == 1:
            raise RuntimeError("stop here once")

    q = LocalPairs(ids, x, k=3, changed=changed, pause=pause)
    with pytest.raises(RuntimeError):
        q.pop()
    assert drain(q) == expected and state["n"] >= 2
