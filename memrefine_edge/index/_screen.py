"""Bounds on the scores of int8 rows against a float query, from exact integer products.

A store keeps its vectors as int8 codes with a float32 scale; the exact score of a row against a
query is the float32 product of the dequantised row (``code * scale``) with the query. Decoding
every row to float32 for each query costs two passes over the whole matrix; instead the query is
written as two int8 vectors (a coarse one and its remainder), whose exact int32 products with the
codes give each row's score to within a bound that is computed, not guessed: the query's remainder
after the two int8 vectors against the row's L1 and L2 norms (Hoelder and Cauchy-Schwarz, the
smaller), plus the float32 rounding of a dot product of ``d`` terms (``(d + 8) * 2**-22`` of
``|row| |query|``, twice the worst case) and of this screen's own float32 arithmetic (``2**-16`` of
it). The rows whose upper bound reaches the k-th best lower bound hold the top k; only they need
an exact score. The store's search (:mod:`memrefine_edge.store._search_index`) and live mode's
candidate pairs (:mod:`memrefine_edge.index._local`) screen this way.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["quantize_query", "row_norms", "screen_scores"]


def quantize_query(v: np.ndarray) -> tuple[np.ndarray, float]:
    """``v`` as int8 codes and one scale (``codes * scale`` is within ``scale / 2`` of ``v``)."""
    top = float(np.abs(v).max()) if v.size else 0.0
    if top == 0:
        return np.zeros(v.shape, dtype=np.int8), 0.0
    scale = top / 127
    return np.clip(np.rint(v / scale), -127, 127).astype(np.int8), scale


def row_norms(codes: np.ndarray, scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each int8 row's L1 and L2 norm once dequantised (``scale * sum |code|``, ``scale * |code|``), float32."""
    wide = codes.astype(np.float64)
    sc = scales.astype(np.float64)
    l1 = sc * np.abs(wide).sum(axis=1)
    l2 = sc * np.sqrt(np.einsum("ij,ij->i", wide, wide))
    return l1.astype(np.float32), l2.astype(np.float32)


def screen_scores(codes: np.ndarray, scales: np.ndarray, l1: np.ndarray, l2: np.ndarray, queries: np.ndarray, *,
                  products: Callable[..., np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The approximate score of each int8 row (``codes`` with ``scales``, norms ``l1``/``l2`` from
    :func:`row_norms`) against each float query row, and the bound of its error: two float32 arrays
    ``(len(queries), len(codes))``; the exact float32 score is within ``approx +- margin``.

    ``products(a, b)`` is ``a @ b.T`` as exact int32 for int8 ``a`` and ``b``
    (:func:`~memrefine_edge.index.int8_products`)."""
    q64 = np.atleast_2d(np.asarray(queries, dtype=np.float64))
    m, d = q64.shape
    parts = np.empty((2 * m, d), dtype=np.int8)
    steps = np.empty((2, m), dtype=np.float32)
    rest_max = np.empty(m, dtype=np.float32)
    rest_l2 = np.empty(m, dtype=np.float32)
    for j in range(m):
        coarse, c_scale = quantize_query(q64[j])
        fine, f_scale = quantize_query(q64[j] - coarse.astype(np.float64) * c_scale)
        rest = q64[j] - coarse.astype(np.float64) * c_scale - fine.astype(np.float64) * f_scale
        parts[2 * j], parts[2 * j + 1] = coarse, fine
        steps[0, j], steps[1, j] = c_scale, f_scale
        rest_max[j] = np.abs(rest).max() if d else 0.0
        rest_l2[j] = np.sqrt(rest @ rest)
    ints = products(codes, parts)  # (n, 2m), exact
    # In float32: the sums are exact in float32 (|sum| <= 127 * 127 * d < 2**24), and each of the few
    # roundings after is far inside the slack.
    approx = ints[:, 0::2].astype(np.float32) * steps[0] + ints[:, 1::2].astype(np.float32) * steps[1]
    approx *= scales[:, None]
    qn = np.sqrt(np.einsum("ij,ij->i", q64, q64)).astype(np.float32)
    margin = np.minimum(l1[:, None] * rest_max, l2[:, None] * rest_l2)
    margin += l2[:, None] * (qn * np.float32((d + 8) * 2.0 ** -22 + 2.0 ** -16))
    return approx.T, margin.T
