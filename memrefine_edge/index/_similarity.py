"""Exact, reproducible pair scores: the values the candidate order is decided on.

A pair's score is the dot product of its two float32 rows (= cosine for the
L2-normalised rows the encoder gives): each product is formed in float64, where
the product of two float32 numbers is *exact*, and the d products are summed in
one fixed pairwise tree. Every operation is an elementwise IEEE operation, so a
pair's value does not depend on which block, row, side or code path computed
it (see :mod:`memrefine_edge.index._pairs` for why that matters).

BLAS scores are only used to *screen*: :func:`screen_rows` and
:func:`screen_columns` keep every score within twice the BLAS error bound of a
row's k-th score (:func:`threshold`), and those candidates are scored exactly.
"""

from __future__ import annotations

import numpy as np

__all__ = ["CHUNK_ELEMS", "NEG_INF", "pair_scores", "screen_columns", "screen_rows", "similarity_matrix", "threshold"]

CHUNK_ELEMS = 1 << 16  # float64 elements per temporary in the exact scorer: stays in L2
NEG_INF = np.float32(-np.inf)  # an invalid partner's BLAS score


def _tree_sum(p: np.ndarray) -> np.ndarray:
    """Sum the last axis in one fixed pairwise order: halves are added elementwise.

    Elementwise IEEE additions give the same bits for the same operands no
    matter how many pairs are evaluated together; that is the whole point.
    """
    while p.shape[-1] > 1:
        w = p.shape[-1]
        h = w // 2
        s = p[..., :h] + p[..., h : 2 * h]
        if w % 2:
            s = np.concatenate((s, p[..., 2 * h :]), axis=-1)
        p = s
    return p[..., 0]


def pair_scores(a: np.ndarray, b: np.ndarray, *, chunk_elems: int = CHUNK_ELEMS) -> np.ndarray:
    """Exact-product, fixed-order dot products of row-aligned pairs.

    ``a`` and ``b`` are ``(m, d)``; row ``i`` of the result is the score of
    ``(a[i], b[i])`` as float64. Inputs are rounded to float32 first, so the
    value is a function of the float32 vectors only (and symmetric).
    """
    a32 = np.asarray(a, dtype=np.float32)
    b32 = np.asarray(b, dtype=np.float32)
    if a32.shape != b32.shape or a32.ndim != 2:
        raise ValueError(f"pair_scores needs two (m, d) arrays of one shape, got {a32.shape} and {b32.shape}")
    m, d = a32.shape
    out = np.empty(m, dtype=np.float64)
    step = max(1, chunk_elems // max(d, 1))
    for s in range(0, m, step):
        out[s : s + step] = _tree_sum(np.multiply(a32[s : s + step], b32[s : s + step], dtype=np.float64))
    return out


def similarity_matrix(x: np.ndarray, y: np.ndarray | None = None, *, chunk_elems: int = CHUNK_ELEMS) -> np.ndarray:
    """All-pairs scores ``(len(x), len(y))``, bit-identical to :func:`pair_scores` (for any ``chunk_elems``).

    Meant for references and tests (it is O(n·m·d) memory-bounded but slow);
    the queue itself never builds the full matrix.
    """
    x32 = np.asarray(x, dtype=np.float32)
    y32 = x32 if y is None else np.asarray(y, dtype=np.float32)
    if x32.ndim != 2 or y32.ndim != 2 or x32.shape[1] != y32.shape[1]:
        raise ValueError(f"similarity_matrix needs (n, d) and (m, d) arrays, got {x32.shape} and {y32.shape}")
    n, d = x32.shape
    m = y32.shape[0]
    out = np.empty((n, m), dtype=np.float64)
    y64 = y32.astype(np.float64)
    step = max(1, chunk_elems // max(m * d, 1))
    for s in range(0, n, step):
        out[s : s + step] = _tree_sum(x32[s : s + step].astype(np.float64)[:, None, :] * y64[None, :, :])
    return out


# --- screening: which BLAS scores may hold a row's exact top k ---------------------------


def threshold(kth: np.ndarray, margin: np.ndarray) -> np.ndarray:
    """``kth - 2*margin`` as float32, rounded down so no candidate is lost."""
    thr = kth.astype(np.float64) - 2.0 * margin
    thr32 = thr.astype(np.float32)
    return np.where(thr32.astype(np.float64) > thr, np.nextafter(thr32, NEG_INF), thr32)


def screen_rows(sims: np.ndarray, low: np.ndarray, margin: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Valid entries of ``sims`` that may be in their row's top k, given what the row has seen so far.

    ``low`` (float32, one per row) is a lower bound of the row's k-th BLAS
    score over the columns seen before; it is raised in place to cover these
    columns too (still a lower bound: the k-th largest of a subset). Returns
    ``(r, c)`` of every valid entry at or above ``low - 2 margin``.
    """
    nb, ncols = sims.shape
    if ncols < 32 * k:
        if ncols >= k:
            np.maximum(low, np.partition(sims, ncols - k, axis=1)[:, ncols - k], out=low)
        thr = threshold(low, margin)
        r, c = np.nonzero(sims >= thr[:, None])
    else:
        # Strided groups (column j in group j mod G): if k group maxima are
        # >= v, k scores are >= v, so the k-th largest group maximum bounds
        # the k-th score from below. The maxima take one vectorised pass and
        # only the few groups reaching the threshold are searched, instead of
        # partitioning or comparing the whole block.
        g = min(64, ncols // (4 * k))
        groups = ncols // g
        body = sims[:, : g * groups].reshape(nb, g, groups)
        gmax = body.max(axis=1)
        np.maximum(low, np.partition(gmax, groups - k, axis=1)[:, groups - k], out=low)
        thr = threshold(low, margin)
        rr, cc = np.nonzero(gmax >= thr[:, None])
        pos, t = np.nonzero(body[rr, :, cc] >= thr[rr][:, None])
        r, c = rr[pos], t * groups + cc[pos]
        if g * groups < ncols:
            r2, c2 = np.nonzero(sims[:, g * groups :] >= thr[:, None])
            r, c = np.concatenate((r, r2)), np.concatenate((c, c2 + g * groups))
    ok = sims[r, c] != NEG_INF
    return r[ok], c[ok]


def screen_columns(sims: np.ndarray, low: np.ndarray, margin: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`screen_rows` for the columns of ``sims`` (each column's partners are its rows), without a transpose.

    Returns ``(r, c)``: column ``c`` may have row ``r`` in its top k.
    """
    nrows, ncols = sims.shape
    if nrows < 32 * k:
        if nrows >= k:
            np.maximum(low, np.partition(sims, nrows - k, axis=0)[nrows - k], out=low)
        thr = threshold(low, margin)
        r, c = np.nonzero(sims >= thr[None, :])
    else:
        # The strided groups of :func:`screen_rows`, over rows: row i is in group i mod G.
        g = min(64, nrows // (4 * k))
        groups = nrows // g
        body = sims[: g * groups].reshape(g, groups, ncols)
        gmax = body.max(axis=0)
        np.maximum(low, np.partition(gmax, groups - k, axis=0)[groups - k], out=low)
        thr = threshold(low, margin)
        gg, cc = np.nonzero(gmax >= thr[None, :])
        t, pos = np.nonzero(body[:, gg, cc] >= thr[cc][None, :])
        r, c = t * groups + gg[pos], cc[pos]
        if g * groups < nrows:
            r2, c2 = np.nonzero(sims[g * groups :] >= thr[None, :])
            r, c = np.concatenate((r, r2 + g * groups)), np.concatenate((c, c2))
    ok = sims[r, c] != NEG_INF
    return r[ok], c[ok]
