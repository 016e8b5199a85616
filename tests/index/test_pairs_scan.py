"""The pair queue's scans: exact top-k lists from BLAS and integer screening, rows decoded as the
store reads them, scans split over threads in blocks.

The order these scans give, step for step against the naive argmax, is checked in
``tests/index/test_pairs.py``; its helpers drive the queues here too.
"""

from __future__ import annotations

import numpy as np
import pytest

import memrefine_edge.index._scan as pairs_scan
from memrefine_edge.index import PairQueue, pair_scores
from memrefine_edge.store import quantize_embedding
from memrefine_edge.store._vectors import decode_embedding, encode_embedding
from tests.support.pairs import DecodedNaive, NaiveOrder, QuantizedTarget, ScriptedJudge, drive, make_data, unit


def test_top_k_lists_are_exact_where_blas_rounding_reorders():
    # Near-identical candidates around one direction: their exact scores against
    # ``a`` differ by ~1e-9, below float32 BLAS error, so BLAS ranks them
    # differently from the exact scores (checked). The lists must be exact,
    # both from the block scan (build) and from the one-row scan (add). A list
    # holds k candidates and one more item, its bound: all k + 1 exact.
    rng = np.random.default_rng(7)
    m, d, k = 300, 384, 4
    a = unit(rng.standard_normal((1, d)))
    cands = unit(unit(rng.standard_normal((1, d))) + 1e-7 * rng.standard_normal((m, d)))
    exact = pair_scores(np.repeat(a, m, axis=0), cands)
    top = np.lexsort((np.arange(m), -exact))[: k + 1]
    for blas in ((np.vstack([a, cands])[:8] @ np.vstack([a, cands]).T)[0, 1:], cands @ a[0]):
        assert (np.lexsort((np.arange(m), -blas))[: k + 1] != top).any()  # the premise
    ids = [f"c{i}" for i in range(m)]
    q = PairQueue(["a"] + ids, np.vstack([a, cands]), k=k)
    assert q._nb[0, : q._len[0]].tolist() == (top + 1).tolist()
    assert q._ns[0, : q._len[0]].tolist() == exact[top].tolist()
    q = PairQueue(ids, cands, k=k)
    q.add("a", a[0])
    assert q._nb[m, : q._len[m]].tolist() == top.tolist()


def test_rows_decode_bit_for_bit_as_the_store_reads_them():
    from memrefine_edge.index._scan import decode_rows

    x = make_data("raw", 300, 24, 730)
    blobs = [encode_embedding(v) for v in x]
    codes, scales = zip(*(quantize_embedding(v) for v in x), strict=True)
    got = decode_rows(np.stack(codes), np.array(scales, dtype=np.float32))
    assert got.tobytes() == np.stack([decode_embedding(b) for b in blobs]).tobytes()


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("quantized", [False, True])
def test_scans_split_over_threads_give_the_same_order(monkeypatch, threads, quantized):
    # Small scan blocks, so that even this store's row scans are split between threads.
    monkeypatch.setattr(pairs_scan, "SCAN_ROWS", 8)
    monkeypatch.setattr(pairs_scan, "INT_SCAN_ROWS", 16)
    x = make_data("gauss", 120, 10, 41)
    ids = [f"e{i}" for i in range(120)]
    if quantized:
        target = QuantizedTarget(ids, x, k=2, threads=threads)
        ref = DecodedNaive(ids, x)
    else:
        target, ref = PairQueue(ids, x, k=2, threads=threads), NaiveOrder(ids, x)
    judge = ScriptedJudge(42, 10)
    seq = drive(target, ref, judge, dict(zip(ids, x, strict=True)))
    assert len(seq) > 60 and judge.merges > 0


def test_split_covers_every_row_once():
    seen: list[tuple[int, int]] = []
    pairs_scan._split(100, 8, 3, lambda lo, hi: seen.append((lo, hi)))
    covered = sorted(r for lo, hi in seen for r in range(lo, hi))
    assert covered == list(range(100)) and all(lo % 8 == 0 for lo, _ in seen) and len(seen) == 3
    seen.clear()
    pairs_scan._split(5, 8, 2, lambda lo, hi: seen.append((lo, hi)))
    assert seen == [(0, 5)]
