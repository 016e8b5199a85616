"""Bounded candidate pairs: each changed entry against its k nearest live neighbours.

The paper's order (:class:`~memrefine_edge.index.PairQueue`) proposes the most similar pair of the
whole store not yet judged, until the budget holds or none is left: on a store of distinct facts
that judges every pair, so the work of a pass grows with the square of the store. A live store
needs work proportional to what changed. :class:`LocalPairs` proposes only the pairs of a
*changed* entry (new since the store's last pass, or written by a merge in this one) with one of
its ``k`` nearest live neighbours, most similar first, each pair once; pairs judged before (the
store's preserved pairs) are never proposed again. A pass then judges about ``k`` pairs per changed
entry (one more each time a neighbour of it leaves the store), whatever the size of the store.

The candidates are a pure function of (the live entries in insertion order, their vectors, which
of them are changed, the judged pairs): a changed entry's neighbours are its ``k`` nearest among
the entries live *now* (when one leaves, the next comes in; when a closer one is added, it takes
its place), so a queue rebuilt from the same state proposes the same pairs in the same order, and
an interrupted run resumes exactly.

Scores follow :class:`PairQueue`'s contract: a pair's score is :func:`pair_scores` of the two
float32 rows (exact products, one fixed summation tree), so it does not depend on the block or
side that computed it; a screen only picks candidates, keeping every partner whose score may
reach the k-th, which are then re-scored exactly. Many rows at once (a pass's first scan) are
screened with BLAS on decoded rows (a bound of twice the float32 error); the few rows a removal
makes stale, against the store's int8 codes, without decoding them: exact int32 products against
the query written as two int8 vectors (the bound of :func:`~memrefine_edge.index.screen_scores`).
Neighbours are ranked by (score, earlier partner first); among equal scores the earlier pair (by
insertion order of its ends) pops first.

Cost: a scan of a row is one O(n·d) pass over the live rows (a block at a time), done for each
changed entry once and again when one of its neighbours leaves or a closer entry arrives;
``pop`` is O(log n) amortised.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Iterable, Sequence

import numpy as np

from ._int8mm import int8_products
from ._screen import row_norms, screen_scores
from ._similarity import pair_scores

__all__ = ["LocalPairs"]

_BLOCK_ROWS = 8192
_SCAN_ROWS = 64  # rows scanned together: a (64, n) float32 block of screening scores
# Up to this many rows, int8 codes are screened by integer products (2-3x faster than decoding every
# code for one to four rows); more rows pay for the decoding and take BLAS (2x faster at 64 rows).
_INT8_SCREEN_ROWS = 8
# A float32 dot product of d terms errs by at most d * 2**-24 * |a| * |b|, whatever the summation order.
_EPS32 = 2.0**-24


class LocalPairs:
    """The most similar unjudged pair of a changed entry with one of its ``k`` nearest live neighbours.

    ``ids`` are distinct, in insertion order; ``vectors`` ``(len(ids), d)`` float rows, or the store's
    int8 codes with ``scales`` (row ``i`` is ``codes[i] * scales[i]`` in float32, as the store decodes
    it). ``changed`` names the entries whose neighbours are to be judged (unknown ids are ignored);
    ``excluded`` holds pairs judged before (ignored when they name an unknown id). The same interface
    as :class:`PairQueue` where a compression run uses it: :meth:`pop`, :meth:`remove`, :meth:`add`
    (a new entry is changed), :meth:`exclude`, :attr:`quantized`, :meth:`candidates_left`.
    ``pause`` is called between blocks of rescanned rows (64 rows against every row each): it may
    block, to let another thread have the cores, or raise, to abandon the work.

    Errors: ``k < 1``, bad shapes or non-finite values -> ``ValueError``; an unknown or removed id ->
    ``KeyError``; an id used before -> ``ValueError``.
    """

    def __init__(self, ids: Sequence[Hashable], vectors: np.ndarray, *, scales: np.ndarray | None = None,
                 k: int = 8, changed: Iterable[Hashable] = (),
                 excluded: Iterable[tuple[Hashable, Hashable]] = (),
                 pause: Callable[[], None] | None = None) -> None:
        if not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        arr = np.asarray(vectors)
        if arr.ndim != 2 or arr.shape[0] != len(ids):
            raise ValueError(f"vectors must have shape ({len(ids)}, d), got {arr.shape}")
        if len(set(ids)) != len(ids):
            raise ValueError("ids must be distinct")
        self.k = k
        self._quantized = scales is not None
        if scales is not None:
            if arr.dtype != np.int8:
                raise ValueError(f"codes must be int8 (with scales), got dtype {arr.dtype}")
            sc = np.asarray(scales, dtype=np.float32)
            if sc.shape != (len(ids),) or not np.isfinite(sc).all():
                raise ValueError(f"scales must be {len(ids)} finite floats")
            self._x = np.array(arr, dtype=np.int8, copy=True)
            self._sc: np.ndarray | None = sc.copy()
            self._l1, self._l2 = row_norms(self._x, self._sc)
        else:
            self._x = np.array(arr, dtype=np.float32, copy=True)
            if not np.isfinite(self._x).all():
                raise ValueError("vectors must be finite")
            self._sc = None
            self._l1 = self._l2 = np.zeros(0, dtype=np.float32)
        self._n = len(ids)
        self._d = arr.shape[1]
        self._ids: list[Hashable] = list(ids)
        self._pos: dict[Hashable, int] = {e: i for i, e in enumerate(self._ids)}
        self._alive = np.ones(self._n, dtype=bool)
        self._judged: set[tuple[int, int]] = set()
        for a_id, b_id in excluded:
            ia, ib = self._pos.get(a_id), self._pos.get(b_id)
            if ia is not None and ib is not None and ia != ib:
                self._judged.add((min(ia, ib), max(ia, ib)))
        self._heap: list[tuple[float, int, int]] = []
        # A changed row's neighbours now: partner -> exact score, and the k-th (score, partner) key.
        self._lists: dict[int, dict[int, float]] = {}
        self._kth: dict[int, tuple[float, int]] = {}
        self._listed_by: dict[int, set[int]] = {}  # partner -> the changed rows listing it
        self._stale: set[int] = set()
        self._norm_max = 0.0
        self._stale.update(self._pos[e] for e in changed if e in self._pos)
        self._pause = pause

    # ------------------------------------------------------------------ the run's interface

    @property
    def quantized(self) -> bool:
        """Whether the rows are the store's int8 codes (then :meth:`add` takes codes and a scale)."""
        return self._quantized

    def __len__(self) -> int:
        return int(self._alive[: self._n].sum())

    def __contains__(self, entry_id: object) -> bool:
        idx = self._pos.get(entry_id)
        return idx is not None and bool(self._alive[idx])

    def pop(self) -> tuple[Hashable, Hashable, float] | None:
        """Return and mark judged the best candidate ``(a_id, b_id, score)``, ``a`` the earlier entry.

        None when no candidate is left.
        """
        top = self._top()
        if top is None:
            return None
        neg, a, b = heapq.heappop(self._heap)
        self._judged.add((a, b))
        return self._ids[a], self._ids[b], -neg

    def candidates_left(self) -> bool:
        """Whether :meth:`pop` would return a pair."""
        return self._top() is not None

    def pending(self) -> list[Hashable]:
        """The live changed entries not yet judged against all their neighbours, in insertion order: those
        still to be scanned, and those with a listed pair not yet judged. Scans nothing."""
        rows = {r for r in self._stale if self._alive[r]}
        for r, partners in self._lists.items():
            if r not in rows and self._alive[r] and any(
                    self._alive[p] and (min(r, p), max(r, p)) not in self._judged for p in partners):
                rows.add(r)
        return [self._ids[r] for r in sorted(rows)]

    def exclude(self, a_id: Hashable, b_id: Hashable) -> None:
        """Mark a pair judged without popping it."""
        ia, ib = self._live(a_id), self._live(b_id)
        if ia == ib:
            raise ValueError(f"a pair needs two different entries, got {a_id!r} twice")
        self._judged.add((min(ia, ib), max(ia, ib)))

    def remove(self, entry_id: Hashable) -> None:
        """Take a live entry, and all its pairs, out of the candidates; the changed entries that listed it
        take their next nearest neighbour instead."""
        idx = self._live(entry_id)
        self._alive[idx] = False
        self._stale.discard(idx)
        for p in self._lists.pop(idx, {}):
            self._listed_by.get(p, set()).discard(idx)
        self._kth.pop(idx, None)
        for row in self._listed_by.pop(idx, set()):
            self._stale.add(row)

    def add(self, entry_id: Hashable, vector: np.ndarray, scale: float | None = None) -> None:
        """A new live entry (a merged one), changed: its pairs with its ``k`` nearest live neighbours become
        candidates, and it takes the place of a farther neighbour of any changed entry it is nearer to."""
        if entry_id in self._pos:
            raise ValueError(f"duplicate id {entry_id!r} (ids are never reused, even after remove)")
        if (scale is None) == self._quantized:
            raise ValueError("a queue of int8 codes takes codes and a scale; a float queue takes the vector alone")
        v = np.asarray(vector).reshape(1, -1)
        if v.shape[1] != self._d:
            raise ValueError(f"vector must have shape ({self._d},), got {np.asarray(vector).shape}")
        if self._quantized:
            if v.dtype != np.int8:
                raise ValueError(f"codes must be int8, got dtype {v.dtype}")
            row = v
        else:
            row = v.astype(np.float32)
            if not np.isfinite(row).all():
                raise ValueError("vector must be finite")
        if self._n >= self._x.shape[0]:  # 1/8 headroom: amortised O(d) per add
            cap = self._n + self._n // 8 + 16
            grown = np.zeros((cap, self._d), dtype=self._x.dtype)
            grown[: self._n] = self._x[: self._n]
            self._x = grown
            if self._sc is not None:
                sc, l1, l2 = (np.zeros(cap, dtype=np.float32) for _ in range(3))
                sc[: self._n], l1[: self._n], l2[: self._n] = self._sc[: self._n], self._l1[: self._n], \
                    self._l2[: self._n]
                self._sc, self._l1, self._l2 = sc, l1, l2
            self._alive = np.concatenate([self._alive, np.zeros(cap - self._alive.shape[0], dtype=bool)])
        idx = self._n
        self._x[idx] = row[0]
        if self._sc is not None:
            self._sc[idx] = np.float32(scale)
            l1, l2 = row_norms(self._x[idx:idx + 1], self._sc[idx:idx + 1])
            self._l1[idx], self._l2[idx] = l1[0], l2[0]
        self._n += 1
        self._alive[idx] = True
        self._ids.append(entry_id)
        self._pos[entry_id] = idx
        new = self._rows([idx])
        if self._norm_max:
            self._norm_max = max(self._norm_max, float(np.linalg.norm(new[0].astype(np.float64))))
        # The changed rows it may be nearer to than their k-th neighbour take it in at their rescan.
        full = [r for r in self._lists if len(self._lists[r]) >= self.k]
        if full:
            rows = np.array(full, dtype=np.intp)
            blas = self._rows(rows) @ new[0]
            margin = 2.0 * self._d * _EPS32 * self._max_norm() ** 2
            kth = np.array([self._kth[r][0] for r in full])
            self._stale.update(int(r) for r in rows[blas >= kth - 2.0 * margin])
        self._stale.update(r for r in self._lists if len(self._lists[r]) < self.k)
        self._stale.add(idx)

    # ------------------------------------------------------------------ internals

    def _live(self, entry_id: Hashable) -> int:
        idx = self._pos.get(entry_id)
        if idx is None or not self._alive[idx]:
            raise KeyError(f"no live entry {entry_id!r} in the candidate pairs")
        return idx

    def _top(self) -> tuple[float, int, int] | None:
        """The best valid heap item (stale rows rescanned first), left on the heap; None if none."""
        if self._stale:
            rows = sorted(self._stale)
            for start in range(0, len(rows), _SCAN_ROWS):
                if start and self._pause is not None:
                    self._pause()  # may raise: the rows not yet scanned stay stale
                block = rows[start:start + _SCAN_ROWS]
                self._stale.difference_update(block)
                self._scan(block)
        while self._heap:
            _, a, b = self._heap[0]
            if self._valid(a, b):
                return self._heap[0]
            heapq.heappop(self._heap)
        return None

    def _valid(self, a: int, b: int) -> bool:
        if not (self._alive[a] and self._alive[b]) or (a, b) in self._judged:
            return False
        return b in self._lists.get(a, ()) or a in self._lists.get(b, ())

    def _decoded(self, lo: int, hi: int) -> np.ndarray:
        """float32 rows ``lo:hi``, decoded as the store decodes (int8 -> float32 exactly, then the scale)."""
        blk = self._x[lo:hi]
        if self._sc is None:
            return blk
        out = np.empty(blk.shape, dtype=np.float32)
        np.copyto(out, blk, casting="unsafe")
        out *= self._sc[lo:hi, None]
        return out

    def _rows(self, idxs: Sequence[int] | np.ndarray) -> np.ndarray:
        sel = np.asarray(idxs, dtype=np.intp)
        blk = self._x[sel]
        if self._sc is None:
            return blk
        out = np.empty(blk.shape, dtype=np.float32)
        np.copyto(out, blk, casting="unsafe")
        out *= self._sc[sel, None]
        return out

    def _max_norm(self) -> float:
        """The largest row norm so far (computed once, then kept up to date by :meth:`add`)."""
        if self._norm_max == 0.0 and self._n:
            for lo in range(0, self._n, _BLOCK_ROWS):
                blk = self._decoded(lo, min(self._n, lo + _BLOCK_ROWS)).astype(np.float64)
                self._norm_max = max(self._norm_max, float(np.sqrt(np.einsum("ij,ij->i", blk, blk).max())))
        return self._norm_max

    def _screen(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every row's approximate score against each of ``q``'s rows, ``(len(q), n)``, and the bound of its
        error: ``(len(q), 1)`` (the same for every row) or ``(len(q), n)``."""
        n = self._n
        if self._sc is None or q.shape[0] > _INT8_SCREEN_ROWS:  # BLAS on float rows, within twice its error
            sims = np.empty((q.shape[0], n), dtype=np.float32)
            for lo in range(0, n, _BLOCK_ROWS):
                hi = min(n, lo + _BLOCK_ROWS)
                sims[:, lo:hi] = q @ self._decoded(lo, hi).T
            qn = np.linalg.norm(q.astype(np.float64), axis=1)
            return sims, (2.0 * self._d * _EPS32 * qn * self._max_norm()).astype(np.float32)[:, None]
        # A few rows against int8 codes: exact integer products, the codes never decoded.
        approx = np.empty((q.shape[0], n), dtype=np.float32)
        margin = np.empty((q.shape[0], n), dtype=np.float32)
        for lo in range(0, n, _BLOCK_ROWS):
            hi = min(n, lo + _BLOCK_ROWS)
            approx[:, lo:hi], margin[:, lo:hi] = screen_scores(self._x[lo:hi], self._sc[lo:hi], self._l1[lo:hi],
                                                               self._l2[lo:hi], q, products=int8_products)
        return approx, margin

    def _scan(self, rows: Sequence[int]) -> None:
        """Set each row's neighbours to its ``k`` nearest live partners now (screened, then exact keys) and
        queue the pairs new to its list."""
        rows = [r for r in rows if self._alive[r]]
        if not rows:
            return
        q = self._rows(rows)
        n = self._n
        approx, margins = self._screen(q)
        approx[:, ~self._alive[:n]] = -np.inf
        approx[np.arange(len(rows)), rows] = -np.inf
        for j, a in enumerate(rows):
            for p in self._lists.pop(a, {}):
                self._listed_by.get(p, set()).discard(a)
            self._kth.pop(a, None)
            row, margin = approx[j], margins[j]
            live = int(np.isfinite(row).sum())
            if live == 0:
                continue
            kk = min(self.k, live)
            lower = row - margin
            kth = np.partition(lower, -kk)[-kk]  # the k-th best lower bound: the top k is at or above it
            cand = np.flatnonzero(row + margin >= kth)
            exact = pair_scores(np.repeat(q[j:j + 1], cand.size, axis=0), self._rows(cand))
            order = np.lexsort((cand, -exact))[:kk]  # best first; among equal scores the earlier partner
            chosen = {int(c): float(s) for c, s in zip(cand[order], exact[order], strict=True)}
            self._lists[a] = chosen
            last = int(cand[order[-1]])
            self._kth[a] = (chosen[last], last)
            for c, s in chosen.items():
                self._listed_by.setdefault(c, set()).add(a)
                lo, hi = (a, c) if a < c else (c, a)
                if (lo, hi) not in self._judged:
                    heapq.heappush(self._heap, (-s, lo, hi))
