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


def test_adds_are_changed_removals_drop_their_pairs_and_nothing_comes_twice():
    x = make_data("gauss", 30, 12, seed=3)
    ids = [f"e{i}" for i in range(30)]
    q = LocalPairs(ids[:25], x[:25], k=3, changed=[])
    assert q.pop() is None  # nothing changed: no work, whatever the store's size
    for i in range(25, 30):
        q.add(ids[i], x[i])
    q.remove("e27")
    first = q.pop()
    assert first is not None and "e27" not in first[:2]
    got = [first, *drain(q)]
    # Each newcomer's neighbours are the k nearest of the entries live when it came (later ones
    # scan their own); pairs with an entry removed since are skipped.
    x32 = x.astype(np.float32)
    want = set()
    for i in range(25, 30):
        seen = ids[: i + 1]
        want |= {(a, b) for a, b, _ in reference(seen, x32[: i + 1], [ids[i]], 3)}
    want = {p for p in want if "e27" not in p}
    assert {(a, b) for a, b, _ in got} == want
    assert [s for _, _, s in got] == sorted((s for _, _, s in got), reverse=True)
    assert q.pop() is None


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
