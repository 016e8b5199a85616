"""Neighbour-list scans of the pair queue: the one-shot build and the row rescans.

A :class:`~memrefine_edge.index._pairs.PairQueue` keeps, for each live entry, an exact
top-k list of its partners; this module fills those lists, under the scoring
and tie contract stated in :mod:`memrefine_edge.index._pairs`.

* Screening. BLAS (float32), or onnxruntime's exact int8 products for the
  store's int8 codes (:mod:`memrefine_edge.index._int8mm`), scores rows against
  every live row, but only to *choose* candidates: every partner within twice
  the BLAS error bound of the row's k-th screening score is kept
  (:func:`~memrefine_edge.index._similarity.screen_rows`, ``screen_columns``).
* Exact re-scoring. The kept candidates are scored by
  :func:`~memrefine_edge.index._similarity.pair_scores`, once per (row, class of
  bitwise-equal vectors), and ranked by score, then partner position: the
  lists are exact whatever the screening's summation order.
* The build (:meth:`NeighbourScans.build_lists`): every list at once, the upper
  triangle of the score matrix in tiles, candidates pooled per bucket of rows
  against a running bound of each row's k-th score.
* Row scans (:meth:`NeighbourScans.scan_rows`): a few rows against all live rows
  (a refill of lists that ran dry, an add). One row, or several rows of int8
  codes, are split over plain threads (:func:`_split`) in blocks of
  ``SCAN_ROWS`` / ``INT_SCAN_ROWS`` rows; scratch arrays are kept for reuse.

The matrix is a float32 one, or the store's int8 codes with a float32 scale per
row, decoded bit for bit as the store decodes them (:func:`decode_rows`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from ._int8mm import BAND_BYTES, int8_products, scale_in_place
from ._similarity import NEG_INF, pair_scores, screen_columns, screen_rows, threshold

# The pair queue's side of this module (:mod:`memrefine_edge.index._pairs`): the scans' base class, and the
# checks and conversions of the vectors it is given, shared so both score rows alike.
__all__ = ["NeighbourScans", "GATHER_ELEMS", "INT_SCAN_ROWS", "LOW_MASK", "SCAN_ROWS", "as_codes", "as_matrix",
           "decode_rows", "row_norms", "vector_classes"]


_U32 = 2.0**-24  # float32 unit roundoff
#: Rows gathered at once for exact re-scoring are kept under this many float32 elements (32 MiB).
GATHER_ELEMS = 1 << 23
#: Rows cast from int8 codes to float32 at once by a row scan (1.5 MiB of float32 at d = 384).
SCAN_ROWS = 1024
#: Rows multiplied at once by an integer scan of several rows (1.5 MiB of codes at d = 384).
INT_SCAN_ROWS = 4096

#: Mask of a pair key's low half (keys are ``lo << 32 | hi``, see ``memrefine_edge.index._pairs._pair_key``).
LOW_MASK = (1 << 32) - 1


_blas_controller: Any = None


def _one_blas_thread() -> Any:
    """A context that holds BLAS to one thread (threadpoolctl, found once; cheap to enter)."""
    global _blas_controller
    if _blas_controller is None:
        from threadpoolctl import ThreadpoolController

        _blas_controller = ThreadpoolController()
    return _blas_controller.limit(limits=1, user_api="blas")


_pool: Any = None
_pool_size = 0
_pool_lock = threading.Lock()


def _split(n: int, step: int, parts: int, fn: Callable[[int, int], None]) -> None:
    """``fn(lo, hi)`` over ``[0, n)`` cut into up to ``parts`` ranges of whole ``step`` blocks, in parallel.

    numpy's casts and products and onnxruntime release the GIL, so plain threads run the parts
    on other cores; unlike BLAS's own threads they do not spin while waiting, which is what
    made two BLAS threads slower than one when the cores are shared.
    """
    blocks = -(-n // step)
    parts = max(1, min(parts, blocks))
    if parts == 1:
        fn(0, n)
        return
    global _pool, _pool_size
    with _pool_lock:
        if _pool_size < parts - 1:
            from concurrent.futures import ThreadPoolExecutor

            if _pool is not None:
                _pool.shutdown(wait=False)  # a larger pool replaces it: its idle threads end
            _pool = ThreadPoolExecutor(max_workers=parts - 1, thread_name_prefix="memrefine-scan")
            _pool_size = parts - 1
    cuts = [min(n, (blocks * i // parts) * step) for i in range(parts + 1)]
    futures = [_pool.submit(fn, lo, hi) for lo, hi in zip(cuts[1:-1], cuts[2:], strict=True)]
    try:
        fn(cuts[0], cuts[1])
    finally:
        for f in futures:
            f.result()


def as_matrix(vectors: object, *, rows: int) -> np.ndarray:
    arr = np.asarray(vectors)
    if arr.ndim != 2 or arr.shape[0] != rows or (arr.shape[1] < 1 and rows > 0):
        raise ValueError(f"vectors must have shape ({rows}, d) with d >= 1, got {arr.shape}")
    if not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
        raise ValueError(f"vectors must be numeric, got dtype {arr.dtype}")
    out = np.ascontiguousarray(arr, dtype=np.float32)
    for s in range(0, out.shape[0], 4096):  # in blocks: no n x d temporary
        if not np.isfinite(out[s : s + 4096]).all():
            raise ValueError("vectors must be finite (after conversion to float32)")
    return out


def as_codes(codes: object, scales: object, *, rows: int) -> tuple[np.ndarray, np.ndarray]:
    arr, sc = np.asarray(codes), np.asarray(scales)
    if arr.ndim != 2 or arr.shape[0] != rows or (arr.shape[1] < 1 and rows > 0):
        raise ValueError(f"codes must have shape ({rows}, d) with d >= 1, got {arr.shape}")
    if arr.dtype != np.int8:
        raise ValueError(f"codes must be int8 (with scales), got dtype {arr.dtype}")
    if sc.shape != (rows,) or not np.issubdtype(sc.dtype, np.floating):
        raise ValueError(f"scales must be {rows} floats, got shape {sc.shape} dtype {sc.dtype}")
    sc = sc.astype(np.float32)  # always a copy: the queue compacts it with the codes
    if not np.isfinite(sc).all():
        raise ValueError("scales must be finite")
    return np.ascontiguousarray(arr), sc


def decode_rows(codes: np.ndarray, scales: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """float32 rows ``codes * scale``: bit for bit what the store reads back for a stored embedding
    (the int8 -> float32 cast is exact, then one float32 product per element)."""
    if out is None:
        out = np.empty(codes.shape, dtype=np.float32)
    np.copyto(out, codes, casting="unsafe")
    out *= scales[:, None]
    return out


def row_norms(x: np.ndarray, scales: np.ndarray | None = None) -> np.ndarray:
    """float64 L2 norms of the (decoded) rows, in blocks (a row's norm does not depend on the block's size)."""
    out = np.empty(x.shape[0], dtype=np.float64)
    for s in range(0, x.shape[0], 512):  # 512 rows: larger blocks make large float64 temporaries
        blk = x[s : s + 512] if scales is None else decode_rows(x[s : s + 512], scales[s : s + 512])
        out[s : s + 512] = np.linalg.norm(blk.astype(np.float64), axis=1)
    return out


def vector_classes(x: np.ndarray, scales: np.ndarray | None = None) -> np.ndarray:
    """A class per row, equal for bitwise-equal rows (numbered in first-seen order).

    Rows are grouped by a 128-bit digest and checked byte for byte against
    the class's first row, so a digest collision only costs a class, never
    puts two different vectors in one. Quantised rows compare codes and
    scale (equal ones decode equally; the rare equal decodings of unequal
    codes merely get two classes, which costs an exact score, nothing else).
    """
    import hashlib

    def raw(i: int) -> bytes:
        return x[i].tobytes() if scales is None else x[i].tobytes() + scales[i].tobytes()

    out = np.empty(x.shape[0], dtype=np.int64)
    first: dict[bytes, int] = {}
    rep: list[int] = []
    for i in range(x.shape[0]):
        row = raw(i)
        key = hashlib.blake2b(row, digest_size=16).digest()
        c = first.get(key)
        if c is None or raw(rep[c]) != row:
            c = len(rep)
            rep.append(i)
            first.setdefault(key, c)
        out[i] = c
    return out


class _Pool:
    """Build candidates ``(row, partner, BLAS score)`` of the rows ``lo..hi``, as appended array chunks."""

    def __init__(self, lo: int, hi: int) -> None:
        self.lo, self.hi = lo, hi
        self.r: list[np.ndarray] = []
        self.c: list[np.ndarray] = []
        self.s: list[np.ndarray] = []
        self.pooled = 0

    def add(self, r: np.ndarray, c: np.ndarray, s: np.ndarray) -> None:
        self.r.append(r.astype(np.int32))
        self.c.append(c.astype(np.int32))
        self.s.append(s)
        self.pooled += r.size


class NeighbourScans:
    """The scans that fill a :class:`~memrefine_edge.index._pairs.PairQueue`'s neighbour lists.

    The queue's base class: the build (:meth:`build_lists`, every row at once, at
    construction) and the row scans (:meth:`scan_rows`: refills, adds), with the
    exact top-k selection both end in; the queue calls those two. They read and
    write the queue's state declared below, which the queue sets up.
    """

    # The queue's state the scans use (set by PairQueue.__init__; see there).
    _pause: Callable[[], None] | None
    _x: np.ndarray
    _scale: np.ndarray | None
    _d: int
    _nrows: int
    _row_of: np.ndarray
    _idx_of_row: np.ndarray
    _row_alive: np.ndarray
    _dead_rows: int
    _alive: np.ndarray
    _norm: np.ndarray
    _norm_max: float
    _cls: np.ndarray
    _ncls: int
    _nb: np.ndarray
    _ns: np.ndarray
    _len: np.ndarray
    _cur: np.ndarray
    _complete: np.ndarray
    _dry: np.ndarray
    _long: dict[int, tuple[np.ndarray, np.ndarray]]
    _slots: int
    _block: int
    _tile_cols: int
    _threads: int
    _jkeys: set[int]
    _jhead: np.ndarray
    _jnext: np.ndarray
    _jpart: np.ndarray
    _bufs: dict[Hashable, np.ndarray]
    scans: int

    def _judged_with(self, a: int) -> list[int]:
        """Live entries judged with ``a`` (a walk of its chain: row scans only)."""
        out, e, nxt, part, alive = [], int(self._jhead[a]), self._jnext, self._jpart, self._alive
        while e >= 0:
            b = int(part[e])
            if alive[b]:
                out.append(b)
            e = int(nxt[e])
        return out

    def scan_rows(self, idxs: Sequence[int], k: int) -> None:
        """Recompute the neighbour lists (``k`` long) of ``idxs`` against all live entries (refills, an add).

        The build scans every row at once (:meth:`build_lists`); this is the path for a few rows.
        """
        n = self._nrows
        self.scans += len(idxs)
        blk = np.asarray(idxs, dtype=np.int64)
        rows = self._row_of[blk]
        q = self._take(rows)
        sims = self._buf("sims", blk.size * n, np.float32)[: blk.size * n].reshape(blk.size, n)
        if self._scale is None and blk.size == 1:
            # BLAS sgemv on one thread per part: BLAS's own two threads wait on each other when
            # the cores are shared, and one thread is still faster than numpy's einsum loop.
            def dot(lo: int, hi: int) -> None:
                np.dot(self._x[lo:hi], q[0], out=sims[0, lo:hi])

            with _one_blas_thread():
                _split(n, SCAN_ROWS, self._threads, dot)
        elif self._scale is None:
            for s in range(0, n, 4096):
                sims[:, s : s + 4096] = q @ self._x[s : min(n, s + 4096)].T
        elif blk.size == 1:
            # One quantised row: the codes of SCAN_ROWS rows cast to float32 (exact) into a
            # buffer, their products with the row, then each scaled. Not bit for bit the
            # decoded rows' products, but within the same screening margin: the float32 sum errs
            # by at most d·u32·|q||v| and the scaling and the decoding by u32 each, while the
            # margin allows 2·(d + 2)·u32·|a||v|; final scores are exact on decoded rows. For one
            # row this is faster than onnxruntime's integer product (below), which repacks the
            # whole matrix.
            def cast_dot(lo: int, hi: int) -> None:
                flat = self._buf(("cast", threading.get_ident()), SCAN_ROWS * self._d, np.float32)
                for s in range(lo, hi, SCAN_ROWS):
                    e = min(hi, s + SCAN_ROWS)
                    buf = flat[: (e - s) * self._d].reshape(e - s, self._d)
                    np.copyto(buf, self._x[s:e], casting="unsafe")
                    np.dot(buf, q[0], out=sims[0, s:e])

            with _one_blas_thread():
                _split(n, SCAN_ROWS, self._threads, cast_dot)
            sims *= self._scale[:n]
        else:
            # Several quantised rows: exact int32 products of the codes (onnxruntime's integer
            # kernels; |sum| <= d·127² < 2**24, so exact in float32 too), then both scales: within
            # two float32 roundings of the decoded rows' product, and faster for several rows
            # than the float32 cast and sgemm.
            codes, qs = self._x[rows], self._scale[rows]

            def products(lo: int, hi: int) -> None:
                me = threading.get_ident()
                out = self._buf(("int", me), INT_SCAN_ROWS * codes.shape[0], np.int32)
                scratch = self._buf(("xor", me), INT_SCAN_ROWS * self._d, np.uint8)
                for s in range(lo, hi, INT_SCAN_ROWS):
                    e = min(hi, s + INT_SCAN_ROWS)
                    o = out[: (e - s) * codes.shape[0]].reshape(e - s, codes.shape[0])
                    sims[:, s:e] = int8_products(self._x[s:e], codes, out=o, scratch=scratch).T

            _split(n, INT_SCAN_ROWS, self._threads, products)
            sims *= self._scale[:n]
            sims *= qs[:, None]
        if self._dead_rows:
            sims[:, ~self._row_alive[:n]] = NEG_INF
        sims[np.arange(blk.size), rows] = NEG_INF
        for i, a in enumerate(idxs):
            jud = self._judged_with(a)
            if jud:
                sims[i, self._row_of[jud]] = NEG_INF
        self._select(blk, rows, sims, k)

    def _rows(self, lo: int, hi: int, out: np.ndarray | None = None) -> np.ndarray:
        """Matrix rows ``lo..hi`` as float32 (decoded when quantised; a view otherwise)."""
        x = self._x[lo:hi]
        return x if self._scale is None else decode_rows(x, self._scale[lo:hi], out)

    def _buf(self, key: Hashable, size: int, dtype: Any) -> np.ndarray:
        """A flat scratch array of at least ``size`` elements, kept for reuse under ``key``.

        Scans run in blocks and are many: fresh multi-MB temporaries would each be mapped and
        faulted in anew (a run pins glibc's mmap threshold at 1 MiB, see ``_memory``), which
        doubled a row scan's time in a run against a benchmark loop.
        """
        arr = self._bufs.get(key)
        if arr is None or arr.size < size or arr.dtype != dtype:
            arr = self._bufs[key] = np.empty(size, dtype=dtype)
        return arr

    def _take(self, rows: np.ndarray) -> np.ndarray:
        """Matrix rows ``rows`` as float32 (decoded when quantised)."""
        return self._x[rows] if self._scale is None else decode_rows(self._x[rows], self._scale[rows])

    def _margin(self, idxs: np.ndarray) -> np.ndarray:
        """Per row, the BLAS error allowance: |BLAS - exact| <= d*u32*|a||b| in any summation order.

        Doubled for safety. A candidate and the k-th item may err in opposite
        directions, so everything within twice this of the k-th BLAS score is
        re-scored exactly (see :func:`~memrefine_edge.index._similarity.threshold`).
        """
        return (2.0 * (self._d + 2) * _U32 * self._norm_max) * self._norm[idxs] + 1e-30

    def _select(self, blk: np.ndarray, rows: np.ndarray, sims: np.ndarray, k: int) -> None:
        """Exact top-k per row from BLAS scores ``sims`` (invalid partners at -inf)."""
        low = np.full(blk.size, NEG_INF, dtype=np.float32)
        r, c = screen_rows(sims, low, self._margin(blk), k)
        self._keep(blk, rows, r, c, low, k)

    def build_lists(self) -> None:
        """Every neighbour list at once (construction: all rows live, row == position).

        The score matrix is symmetric, so only its upper triangle is computed,
        in tiles of ``block_rows`` x ``tile_cols``: a tile gives its rows their
        candidates among its columns and, transposed, its columns their
        candidates among its rows (half the flops of a row-by-row scan, and
        each column band is reused from cache by a whole row band). A row's
        candidates are pooled over the tiles against a running lower bound of
        its k-th score, so what is pooled is a superset of what one scan of the
        full row would re-score; the same exact top-k results.
        """
        n = self._nrows
        self.scans += n
        low = np.full(n, NEG_INF, dtype=np.float32)
        margin = self._margin(np.arange(n))
        # Judged pairs (a resumed run's preserves), both ways, sorted by row: masked tile by tile.
        keys = np.fromiter(self._jkeys, dtype=np.int64, count=len(self._jkeys))
        lo_, hi_ = keys >> 32, keys & LOW_MASK
        ja, jb = np.concatenate([lo_, hi_]), np.concatenate([hi_, lo_])
        del keys, lo_, hi_
        order = np.argsort(ja, kind="stable")
        ja, jb = ja[order], jb[order]
        h = max(1, min(self._block, n))
        w = max(h, self._tile_cols)
        # The pool is kept per bucket of rows (a whole number of row bands), each pruned
        # on its own when it grows: the pool and the pruning's temporaries stay O(n·k)
        # and O(bucket·k) instead of growing with the number of tiles.
        size = h * max(1, min(8192 // h, -(-n // (4 * h))))  # at most 8192 rows; about 4 buckets for small n
        pools = [_Pool(b, min(n, b + size)) for b in range(0, n, size)]
        for i0 in range(0, n, h):
            i1 = min(n, i0 + h)
            lo, hi = np.searchsorted(ja, (i0, i1))
            band_a, band_b = ja[lo:hi], jb[lo:hi]
            band = self._rows(i0, i1) if self._scale is None else None
            for j0 in range(i0, n, w):
                j1 = min(n, j0 + w)
                if band is not None:
                    sims = band @ self._rows(j0, j1).T
                else:  # int8 codes: exact integer products, then the scales (see _scan), in kept buffers
                    cells = (i1 - i0) * (j1 - j0)
                    ints = self._buf("tile", h * w, np.int32)[:cells].reshape(i1 - i0, j1 - j0)
                    int8_products(self._x[i0:i1], self._x[j0:j1], threads=self._threads, out=ints)
                    # float32 in place of the int32 products (same size, elementwise: one buffer)
                    sims = scale_in_place(ints, self._scale[i0:i1], self._scale[j0:j1],  # type: ignore[index]
                                          scratch=self._buf("band", max(BAND_BYTES // 4, w), np.float32))
                d = np.arange(max(i0, j0), min(i1, j1))
                sims[d - i0, d - j0] = NEG_INF  # an entry is not its own partner
                inside = (band_b >= j0) & (band_b < j1)
                sims[band_a[inside] - i0, band_b[inside] - j0] = NEG_INF
                r, c = screen_rows(sims, low[i0:i1], margin[i0:i1], self._slots)
                pools[i0 // size].add(r + i0, c + j0, sims[r, c])
                # Transposed: the tile's columns past this row band get their partners among its rows
                # (columns inside the band are rows of this band: covered above).
                off = max(0, i1 - j0)
                if off < j1 - j0:
                    part = sims[:, off:]
                    r, c = screen_columns(part, low[j0 + off : j1], margin[j0 + off : j1], self._slots)
                    owner = c + (j0 + off)
                    for b in range((j0 + off) // size, (j1 - 1) // size + 1):
                        m = (owner >= pools[b].lo) & (owner < pools[b].hi)
                        pools[b].add(owner[m], r[m] + i0, part[r[m], c[m]])
                del sims
                for pool in pools:
                    if pool.pooled > 2 * self._slots * (pool.hi - pool.lo) + 4096:
                        self._prune(pool, low, margin)
                if self._pause is not None:
                    self._pause()
        self._bufs.clear()  # the tiles' buffers: the build's alone
        for pool in pools:
            self._prune(pool, low, margin)
            r, c = pool.r[0], pool.c[0]  # sorted by row
            pool.r = pool.c = pool.s = []
            # In row bands, so the exact scoring's temporaries stay O(band).
            bounds = np.searchsorted(r, np.arange(pool.lo, pool.hi + h, h))
            for b, i0 in enumerate(range(pool.lo, pool.hi, h)):
                blk = np.arange(i0, min(pool.hi, i0 + h), dtype=np.int64)
                lo, hi = bounds[b], bounds[b + 1]
                self._keep(blk, blk, r[lo:hi].astype(np.int64) - i0, c[lo:hi].astype(np.int64),
                           low[i0 : i0 + h], self._slots)

    def _prune(self, pool: "_Pool", low: np.ndarray, margin: np.ndarray) -> None:
        """Raise the pool's rows' k-th score bounds to their k-th pooled score; drop what that rules out.

        Leaves the pool as one sorted-by-row array triple.
        """
        k = self._slots
        r = np.concatenate(pool.r) if pool.r else np.zeros(0, dtype=np.int32)
        c = np.concatenate(pool.c) if pool.c else np.zeros(0, dtype=np.int32)
        s = np.concatenate(pool.s) if pool.s else np.zeros(0, dtype=np.float32)
        order = np.lexsort((-s, r))
        r, c, s = r[order], c[order], s[order]
        del order
        rows = slice(pool.lo, pool.hi)
        counts = np.bincount(r - pool.lo, minlength=pool.hi - pool.lo)
        starts = np.cumsum(counts) - counts
        # The k-th largest pooled score of a row is a lower bound of its k-th score.
        if s.size:
            kth = np.where(counts >= k, s[np.minimum(starts + k - 1, s.size - 1)], NEG_INF)
            np.maximum(low[rows], kth, out=low[rows])
        keep = s >= threshold(low[rows], margin[rows])[r - pool.lo]
        pool.r, pool.c, pool.s = [r[keep]], [c[keep]], [s[keep]]
        pool.pooled = int(keep.sum())

    def _keep(self, blk: np.ndarray, rows: np.ndarray, r: np.ndarray, c: np.ndarray, kth: np.ndarray,
              k: int) -> None:
        """Exact top-k lists of ``blk`` from candidates ``(r, c)`` (``r`` indexes ``blk``, ``c`` is a matrix row).

        The candidates must hold every valid partner within the selection margin of
        the row's k-th BLAS score ``kth`` (-inf: the row has fewer than k partners).
        """
        nb = blk.size
        partner = self._idx_of_row[c]
        # One exact score per (row, vector class); equal vectors score equally.
        first, inverse = np.unique(r * self._ncls + self._cls[partner], return_index=True, return_inverse=True)[1:]
        ra, cb = rows[r[first]], c[first]
        exact = np.empty(first.size, dtype=np.float64)
        step = max(1, GATHER_ELEMS // (8 * max(self._d, 1)))  # the build passes whole row bands
        for s in range(0, first.size, step):
            exact[s : s + step] = pair_scores(self._take(ra[s : s + step]), self._take(cb[s : s + step]))
        score = exact[inverse.ravel()]
        # Within one row, equal scores rank by partner position: for a fixed a,
        # (min(a,b), max(a,b)) is increasing in b.
        order = np.lexsort((partner, -score, r))
        r, partner, score = r[order], partner[order], score[order]
        counts = np.bincount(r, minlength=nb)
        starts = np.cumsum(counts) - counts
        rank = np.arange(r.size) - starts[r]
        keep = rank < k
        if k == self._slots:
            owners = blk[r[keep]]
            self._nb[owners, rank[keep]] = partner[keep]
            self._ns[owners, rank[keep]] = score[keep]
            for a in blk.tolist() if self._long else ():
                self._long.pop(a, None)
        else:  # longer lists than the fixed slots hold (refills)
            for i, a in enumerate(blk.tolist()):
                s0 = int(starts[i])
                s1 = s0 + min(int(counts[i]), k)
                self._long[a] = (partner[s0:s1].astype(np.int32), score[s0:s1].copy())
        self._len[blk] = np.minimum(counts, k)
        self._cur[blk] = 0
        self._dry[blk] = False
        # With a finite bound the row may have had more than k partners; calling
        # it incomplete is merely conservative (a rescan once it runs dry).
        self._complete[blk] = np.isneginf(kth) & (counts <= k)
