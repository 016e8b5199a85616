"""Incremental candidate-pair order for MemRefine (paper §3.2, "Candidate Pair Selection").

The paper proposes, at every iteration, ``argmax_{(u,v) not judged} cos(e_u, e_v)``
over the live entries. Recomputing that on every step costs a full n×n matmul;
:class:`PairQueue` returns exactly the same sequence of pairs with per-step cost
of a few heap operations plus, now and then, one O(n·d) row rescan.
(A compression run takes the pairs of entries with identical text before it
builds its queue, :mod:`memrefine_edge.engine._identical`: their cosine is exactly 1.)

Scores and ties (the contract that makes the order reproducible)
----------------------------------------------------------------
* Vectors are converted to float32 once (or held as the store's int8 codes with
  a float32 scale per row, and decoded to the same float32 rows, bit for bit,
  wherever they are scored). A pair's score is the dot product of
  its two float32 rows (= cosine for the L2-normalised rows the encoder gives),
  evaluated by :func:`pair_scores`: each product is formed in float64, where the
  product of two float32 numbers is *exact*, and the d products are summed in
  one fixed pairwise tree. Every operation is an elementwise IEEE operation, so
  the value of a pair does not depend on which block, row, side (``(a, b)`` vs
  ``(b, a)``) or code path computed it. BLAS is not used for final scores
  because its summation order changes with blocking, shape and thread count,
  and an argmax over values that differ in the last bit would not be
  reproducible between the incremental path, a naive reference and a rebuilt
  queue.
* BLAS (float32 sgemm; one row: numpy's float32 einsum loop) is still what
  scans rows, but only to *choose* candidates: its error is at most
  ``d·u32·|a|·|b|`` for any summation order,
  so every row keeps every candidate within twice that margin of its k-th
  BLAS score and re-scores those exactly. The top-k by exact score is therefore
  always found.
* Order: ``order`` is the insertion position (the ``ids`` given at
  construction, then each :meth:`PairQueue.add`). Among equal scores the pair
  with the smaller ``(order(lo), order(hi))`` wins, ``lo`` being the earlier
  entry. Every pair thus has a distinct key and the argmax is unique.

Why pop always returns the global argmax
----------------------------------------
Each live entry ``a`` holds a list of its top-(k+1) partners (by pair key) as of
its last scan, and ``f_a``, the key of the last one. Invariant: every live,
unjudged pair is *covered* by one of its ends ``a``: the other end is in
``a``'s list, or the pair's key is below ``f_a``. A scan of ``a`` covers all of
``a``'s pairs; a new entry is scanned on :meth:`PairQueue.add`, so it covers its
pairs with every older entry and older lists need no update. The heap holds for
each entry an upper bound of its best remaining list item; that bound is
``>= f_a``, hence ``>=`` every pair ``a`` covers, so the heap top bounds every
valid pair. Popping verifies the top entry's real head; if it is stale, the
real (lower) key is pushed back. A list whose items are all dead or judged
needs a rescan, unless its last scan already held *all* of ``a``'s partners
("complete"): then each still-valid pair of ``a`` is with a later entry, which
covers it. The rescan waits: the list hands out only its first k items (the
last one is there for ``f_a``), so a dry entry's heap item drops to ``f_a`` and
the rescan happens only when that reaches the top (with other dry lists in one
pass; a rescan is valid at any time, as it covers all of ``a``'s pairs).

The scans that fill the lists (the build, and the rescans of rows) are in
:mod:`memrefine_edge.index._scan`, the queue's base class.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Iterable, Sequence

import numpy as np

from ._int8mm import default_threads
from ._scan import LOW_MASK, NeighbourScans, as_codes, as_matrix, decode_rows, row_norms, vector_classes

__all__ = ["PairQueue"]


def _pair_key(a: int, b: int) -> int:
    """One int per unordered pair of positions (positions stay below 2**32)."""
    return b << 32 | a if b < a else a << 32 | b


def _grown(arr: np.ndarray, cap: int, fill: object) -> np.ndarray:
    new = np.full((cap,) + arr.shape[1:], fill, dtype=arr.dtype)
    new[: arr.shape[0]] = arr
    return new


class PairQueue(NeighbourScans):
    """The most similar live, not-yet-judged pair first, incrementally.

    ``ids`` are distinct and in insertion order; ``vectors`` is ``(len(ids), d)``
    (rows should be L2-normalised: scores are dot products; an empty queue may
    be ``(0, 0)``, the first :meth:`add` then fixes d). With ``scales``,
    ``vectors`` are the store's int8 codes and row ``i`` is ``vectors[i] *
    scales[i]`` in float32 (the store's stored form, a quarter of the float32
    matrix's memory): rows are decoded a block at a time where they are
    scored, bit for bit as the store decodes them, so the pairs and their
    order are those of the decoded float32 matrix. ``excluded`` holds
    pairs already judged (e.g. preserved pairs on resume); pairs naming an id
    not in ``ids`` are ignored, so a store's whole preserve cache can be passed.
    ``k`` is the neighbour-list length; the build computes the upper triangle
    of the score matrix in tiles of ``block_rows`` x ``tile_cols`` (peak build
    memory about ``2 · block_rows · tile_cols · 4`` bytes plus the candidate
    pool, O(n·k)); ``refill_k`` (default ``4 k``) is the length of a list
    rescanned after it ran dry (such an entry has many close partners still to
    be judged, and each rescan is an O(n·d) pass); ``refill_batch`` the most
    lists rescanned in one pass when one is due (the due one and the dry lists
    whose bounds come next: one matrix pass for all); ``compact_min`` the number
    of removed rows tolerated before the vector matrix is compacted; ``threads``
    (default ``min(2, cores)``) the threads a build or a row scan is split over (the order
    of pairs never depends on ``refill_k``, ``refill_batch``, ``compact_min`` or ``threads``).
    ``pause`` is called between the build's tiles (tens of milliseconds each): it may block,
    to let another thread have the cores, or raise, to abandon the build.

    The pop sequence is a pure function of (live ids in order, their vectors,
    judged pairs among them): a queue rebuilt from those continues identically.

    Errors: unknown or removed id -> ``KeyError``; an id used before (even if
    removed since: positions are never reused) -> ``ValueError``; bad shapes,
    non-finite values, ``k < 1`` -> ``ValueError``.

    Cost: build is half an n×n sgemm (the upper triangle) plus ~k exact scores per row; ``pop``
    is a few heap operations plus, when a list runs dry, one O(n·d) row scan;
    ``add`` is one O(n·d) row scan; ``remove`` is O(1) amortised; ``nearest`` is O(1) or,
    when a list runs dry, one row scan. Near-equal
    but not bitwise-equal vectors closer than the BLAS margin (~1e-4 cosine at
    d=384 for unit rows) are all re-scored exactly: a cluster of c of them
    costs O(c²·d) at build. Memory: the vectors (one copy; a C-contiguous
    float32 ``vectors``, or int8 codes with ``scales``, is used as given, not
    copied, so the caller must not change it afterwards) with 1/8 headroom for
    adds, plus O(n·k). Removed rows are compacted in place; the caller's array only
    with ``writable=True`` (pass it when nothing else reads the array:
    otherwise the first add after removals copies the matrix, and for a
    moment two are alive). Not thread-safe.
    """

    def __init__(
        self,
        ids: Sequence[Hashable],
        vectors: np.ndarray,
        *,
        scales: np.ndarray | None = None,
        k: int = 16,
        excluded: Iterable[tuple[Hashable, Hashable]] = (),
        block_rows: int = 1024,
        tile_cols: int = 4096,
        refill_k: int | None = None,
        compact_min: int = 256,
        writable: bool = False,
        refill_batch: int = 16,
        threads: int | None = None,
        pause: Callable[[], None] | None = None,
    ) -> None:
        if int(k) < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        if int(block_rows) < 1:
            raise ValueError(f"block_rows must be >= 1, got {block_rows}")
        if int(tile_cols) < 1:
            raise ValueError(f"tile_cols must be >= 1, got {tile_cols}")
        if refill_k is not None and int(refill_k) < int(k):
            raise ValueError(f"refill_k must be >= k ({k}), got {refill_k}")
        ids = list(ids)
        if scales is None:
            x, self._scale = as_matrix(vectors, rows=len(ids)), None
        else:
            x, self._scale = as_codes(vectors, scales, rows=len(ids))
        n, d = x.shape
        self._k = int(k)
        self._d = d
        self._block = int(block_rows)
        self._tile_cols = int(tile_cols)
        self._refill_k = 4 * self._k if refill_k is None else int(refill_k)
        # Every list holds one item more than it hands out: the extra, last item's key bounds
        # every pair the list does not hold, so a list that runs dry can wait in the heap at that
        # key and be rescanned only if it surfaces (see _settle), not at once.
        self._slots, self._long_slots = self._k + 1, self._refill_k + 1
        # Lists of entries refilled after running dry, longer than the k slots of _nb/_ns.
        self._long: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        if int(refill_batch) < 1:
            raise ValueError(f"refill_batch must be >= 1, got {refill_batch}")
        self._refill_batch = int(refill_batch)
        if threads is not None and int(threads) < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        self._threads = default_threads() if threads is None else int(threads)
        self._pause = pause
        self._compact_min = int(compact_min)  # dead matrix rows tolerated before compacting
        self._ids: list[Hashable] = []  # position -> id, dead ones kept (positions are never reused)
        self._pos: dict[Hashable, int] = {}
        for i in ids:
            if i in self._pos:
                raise ValueError(f"duplicate id {i!r}")
            self._pos[i] = len(self._ids)
            self._ids.append(i)
        # Per position ("idx"): liveness, norm, neighbour list. Per matrix row:
        # the vector. Rows of removed entries are compacted away, positions not.
        cap = max(n, 16)
        # The matrix is the caller's array (no copy); the first add moves it into an own array
        # with headroom, unless it is writable and removals have left room (see add).
        self._x = x
        self._nrows = n
        # Whether self._x may be written to (compacted in place): the caller's array only if
        # it said so (then no second matrix is ever allocated while the first is alive).
        self._owned = bool(writable) or x is not vectors
        self._row_of = _grown(np.arange(n, dtype=np.int64), cap, -1)
        self._idx_of_row = np.arange(n, dtype=np.int64)
        self._row_alive = np.ones(n, dtype=bool)
        self._dead_rows = 0
        self._alive = _grown(np.ones(n, dtype=bool), cap, False)
        self._norm = _grown(row_norms(x, self._scale), cap, 0.0)
        self._norm_max = float(self._norm[:n].max()) if n else 0.0
        # Bitwise-equal vectors get one class, so a cluster of exact duplicates
        # costs one exact score per (row, distinct vector), not per partner.
        self._cls = _grown(vector_classes(x, self._scale), cap, -1)
        self._ncls = int(self._cls[:n].max()) + 1 if n else 0
        self._nb = np.zeros((cap, self._slots), dtype=np.int32)  # positions: int32 halves the lists
        self._ns = np.zeros((cap, self._slots), dtype=np.float64)
        self._len = np.zeros(cap, dtype=np.int64)
        self._cur = np.zeros(cap, dtype=np.int64)
        self._complete = np.zeros(cap, dtype=bool)
        # Entries whose list ran dry and whose heap item is the list's bound: rescanned when it surfaces.
        self._dry = np.zeros(cap, dtype=bool)
        self._bound = np.zeros(cap, dtype=np.float64)  # a dry list's bound score
        # Judged pairs, compactly (per-entry Python sets cost far more at 100k entries): one set
        # of pair keys for membership, and per entry a chain of its judged
        # partners in int32 arrays (head, then next/partner per half-edge), walked only by row
        # scans. Pairs with a removed end are dropped when the matrix is compacted.
        self._jkeys: set[int] = set()
        self._jhead = np.full(cap, -1, dtype=np.int32)
        self._jnext = np.empty(0, dtype=np.int32)
        self._jpart = np.empty(0, dtype=np.int32)
        self._jn = 0
        self._live = n
        self._grew = False  # whether add() was called (nearest() is then unavailable)
        self.scans = 0  #: rows scanned so far (build + refills + adds); for benchmarks
        self._bufs: dict[Hashable, np.ndarray] = {}  # reused scratch arrays (see _buf)
        for a_id, b_id in excluded:
            ia, ib = self._pos.get(a_id), self._pos.get(b_id)
            if ia is not None and ib is not None and ia != ib:
                self._mark(ia, ib)
        # Heap items are (-score, code), code = (lo << 33) | (hi << 1) | (owner is hi): the
        # order of (-score, lo, hi, owner) in two objects instead of four (less memory per item).
        self._heap: list[tuple[float, int]] = []
        if n:
            self.build_lists()
            self._heap = [self._key(a, 0) for a in range(n) if self._len[a]]
            heapq.heapify(self._heap)

    # ------------------------------------------------------------------ public

    def __len__(self) -> int:
        """Number of live entries."""
        return self._live

    def __contains__(self, entry_id: object) -> bool:
        """Whether ``entry_id`` is a live entry."""
        idx = self._pos.get(entry_id)
        return idx is not None and bool(self._alive[idx])

    @property
    def k(self) -> int:
        """Neighbour-list length."""
        return self._k

    @property
    def quantized(self) -> bool:
        """Whether the queue holds int8 codes with scales (then :meth:`add` takes codes and a scale)."""
        return self._scale is not None

    def live_ids(self) -> list[Hashable]:
        """Live ids in insertion order (what a rebuilt queue must be given)."""
        return [self._ids[i] for i in np.flatnonzero(self._alive[: len(self._ids)]).tolist()]

    def peek(self) -> tuple[Hashable, Hashable, float] | None:
        """The pair :meth:`pop` would return, without marking it judged."""
        top = self._settle()
        if top is None:
            return None
        lo, hi = top[1] >> 33, (top[1] >> 1) & LOW_MASK
        return self._ids[lo], self._ids[hi], -top[0]

    def pop(self) -> tuple[Hashable, Hashable, float] | None:
        """Return and mark judged the best candidate ``(a_id, b_id, score)``; ``a`` is the earlier entry.

        ``None`` when no live, unjudged pair is left.
        """
        top = self._settle()
        if top is None:
            return None
        # The heap entry stays: its key is still an upper bound for that row.
        lo, hi = top[1] >> 33, (top[1] >> 1) & LOW_MASK
        self._mark(lo, hi)
        return self._ids[lo], self._ids[hi], -top[0]

    def nearest(self, entry_id: Hashable) -> tuple[Hashable, float] | None:
        """``(partner_id, score)``: the live entry's best live partner not judged with it; None if it has none.

        The score is exact and ties go to the earlier partner, so the answer is a
        pure function of (live ids in order, their vectors, judged pairs), like
        :meth:`pop`; it costs O(1), or one O(n·d) rescan when every partner on
        the entry's list has gone. Only on a queue nothing was :meth:`add`-ed to:
        a newcomer's pairs are held by the newcomer's list alone, so older lists
        do not see it (``RuntimeError``).
        """
        if self._grew:
            raise RuntimeError("nearest() needs a queue without adds: older lists do not see newer entries")
        a = self._live_idx(entry_id)
        c = self._head(a)
        if c is None:
            return None
        long = self._long.get(a)
        b, score = (int(self._nb[a, c]), float(self._ns[a, c])) if long is None else (int(long[0][c]),
                                                                                      float(long[1][c]))
        return self._ids[b], score

    def candidates_left(self) -> bool:
        """Whether :meth:`pop` would return a pair."""
        return self._settle() is not None

    def exclude(self, a_id: Hashable, b_id: Hashable) -> None:
        """Mark the pair judged without popping it. Both must be live and distinct."""
        ia, ib = self._live_idx(a_id), self._live_idx(b_id)
        if ia == ib:
            raise ValueError(f"a pair needs two different entries, got {a_id!r} twice")
        self._mark(ia, ib)

    def remove(self, entry_id: Hashable) -> None:
        """Take a live entry, and all its pairs, out of the candidate set."""
        idx = self._live_idx(entry_id)
        self._alive[idx] = False
        self._live -= 1
        self._len[idx] = 0
        self._dry[idx] = False
        self._long.pop(idx, None)
        # Its judged pairs stay until the next compaction: positions are never reused and
        # every reader checks liveness first.
        row = int(self._row_of[idx])
        self._row_of[idx] = -1
        self._row_alive[row] = False
        self._dead_rows += 1
        # Scans cost O(rows): compacting once a quarter of the rows are dead keeps them within
        # 4/3 of the live rows, at an amortised three row copies per removal. (At half, a 100k
        # run's scans read about a quarter dead rows on average, and scans are most of its
        # queue time.)
        if self._dead_rows > max(self._nrows // 4, self._compact_min):
            self._compact()
        # Its heap entry is skipped lazily when it surfaces.

    def add(self, entry_id: Hashable, vector: np.ndarray, scale: float | None = None) -> None:
        """Add a new live entry after all existing ones; its pairs with every live entry become candidates.

        A queue built with ``scales`` takes the new entry's int8 codes and its ``scale``.
        """
        if entry_id in self._pos:
            raise ValueError(f"duplicate id {entry_id!r} (ids are never reused, even after remove)")
        if (scale is None) != (self._scale is None):
            raise ValueError("a queue of int8 codes takes codes and a scale; a float queue takes the vector alone")
        v = np.asarray(vector)
        if v.ndim == 2 and v.shape[0] == 1:
            v = v[0]
        if self._d == 0 and v.ndim == 1 and v.shape[0] > 0:  # built empty as (0, 0): the first add fixes d
            self._d = v.shape[0]
            self._x = np.zeros((self._x.shape[0], self._d), dtype=self._x.dtype)
            self._owned = True
        if v.ndim != 1 or v.shape[0] != self._d:
            raise ValueError(f"vector must have shape ({self._d},), got {np.asarray(vector).shape}")
        if scale is None:
            v32 = stored = as_matrix(v[None, :], rows=1)[0]
        else:
            stored, sc = as_codes(v[None, :], np.array([scale]), rows=1)
            stored = stored[0]
            v32 = decode_rows(stored[None, :], sc)[0]
        self._grew = True
        idx = len(self._ids)
        if idx >= self._alive.shape[0]:
            cap = idx + idx // 8 + 16  # not double: the (cap, k) lists take 19 MB at 100k
            self._alive = _grown(self._alive, cap, False)
            self._norm = _grown(self._norm, cap, 0.0)
            self._cls = _grown(self._cls, cap, -1)
            self._row_of = _grown(self._row_of, cap, -1)
            self._nb = _grown(self._nb, cap, 0)
            self._ns = _grown(self._ns, cap, 0.0)
            self._len = _grown(self._len, cap, 0)
            self._cur = _grown(self._cur, cap, 0)
            self._complete = _grown(self._complete, cap, False)
            self._dry = _grown(self._dry, cap, False)
            self._bound = _grown(self._bound, cap, 0.0)
            self._jhead = _grown(self._jhead, cap, -1)
        if self._nrows >= self._x.shape[0] or not self._owned:
            # Full (or still the caller's array): compact in place when enough rows are
            # dead, else move to an own array with 1/8 more room (amortised O(d) per add).
            self._compact(extra=0 if self._dead_rows >= max(16, self._nrows // 16) and self._owned else 1)
        row = self._nrows
        self._x[row] = stored
        if self._scale is not None:
            self._scale[row] = scale
        self._nrows += 1
        self._row_of[idx] = row
        self._idx_of_row[row] = idx
        self._row_alive[row] = True
        self._alive[idx] = True
        self._norm[idx] = float(np.linalg.norm(v32.astype(np.float64)))
        self._norm_max = max(self._norm_max, float(self._norm[idx]))
        self._cls[idx] = self._ncls  # a fresh class: merged vectors are rarely exact copies
        self._ncls += 1
        self._pos[entry_id] = idx
        self._ids.append(entry_id)
        self._live += 1
        # The new row covers all its pairs (see module docstring), so older
        # lists are left alone even if the newcomer beats their k-th item.
        self.scan_rows([idx], self._slots)
        if self._len[idx]:
            heapq.heappush(self._heap, self._key(idx, 0))

    # ---------------------------------------------------------------- internals

    def _live_idx(self, entry_id: Hashable) -> int:
        idx = self._pos.get(entry_id)
        if idx is None or not self._alive[idx]:
            raise KeyError(f"no live entry {entry_id!r} in the pair queue")
        return idx

    def _mark(self, a: int, b: int) -> None:
        key = _pair_key(a, b)
        if key in self._jkeys:
            return
        self._jkeys.add(key)
        n = self._jn
        if n + 2 > self._jnext.shape[0]:
            cap = max(64, 2 * (n + 2))
            self._jnext = _grown(self._jnext[:n], cap, -1)
            self._jpart = _grown(self._jpart[:n], cap, -1)
        for x, y, e in ((a, b, n), (b, a, n + 1)):
            self._jnext[e] = self._jhead[x]
            self._jpart[e] = y
            self._jhead[x] = e
        self._jn = n + 2

    def _prune_judged(self) -> None:
        """Drop judged pairs with a removed end (keys and chains): O(pairs), at compaction."""
        keys = np.fromiter(self._jkeys, dtype=np.int64, count=len(self._jkeys))
        lo, hi = keys >> 32, keys & LOW_MASK
        live = self._alive[lo] & self._alive[hi]
        if live.all():
            return
        keys, lo, hi = keys[live], lo[live], hi[live]
        self._jkeys = set(keys.tolist())
        owner, partner = np.concatenate([lo, hi]), np.concatenate([hi, lo])
        order = np.argsort(owner, kind="stable")
        owner, partner = owner[order], partner[order]
        m = owner.size
        self._jhead[:] = -1
        if not m:
            self._jnext, self._jpart, self._jn = np.empty(0, dtype=np.int32), np.empty(0, dtype=np.int32), 0
            return
        first = np.ones(m, dtype=bool)
        first[1:] = owner[1:] != owner[:-1]
        nxt = np.arange(1, m + 1, dtype=np.int32)
        nxt[np.flatnonzero(np.append(first[1:], True))] = -1  # the last half-edge of each owner
        self._jhead[owner[first]] = np.flatnonzero(first)
        self._jnext, self._jpart, self._jn = nxt, partner.astype(np.int32), m

    def _key(self, a: int, c: int) -> tuple[float, int]:
        """The heap item of ``a``'s list position ``c`` (see ``_heap``)."""
        long = self._long.get(a)
        if long is None:
            b, score = int(self._nb[a, c]), float(self._ns[a, c])
        else:
            b, score = int(long[0][c]), float(long[1][c])
        return (-score, (b << 33 | a << 1 | 1) if b < a else (a << 33 | b << 1))

    def _bounded(self, a: int) -> bool:
        """Whether ``a``'s list is full and not complete: its last item then only bounds the pairs it lacks."""
        if self._complete[a]:
            return False
        return int(self._len[a]) == (self._slots if a not in self._long else self._long_slots)

    def _head(self, a: int, *, defer: bool = False) -> int | None:
        """List position of ``a``'s best valid partner, rescanning a dry list; None if it has none.

        With ``defer``, a dry list with a bound is not rescanned: -1 says so (see :meth:`_settle`).
        """
        jkeys = self._jkeys
        c, n = int(self._cur[a]), int(self._len[a])
        long = self._long.get(a)
        partners = self._nb[a] if long is None else long[0]
        bounded = self._bounded(a)
        end = n - 1 if bounded else n  # a bounded list's last item is its bound, not a candidate
        while c < end:
            b = int(partners[c])
            if self._alive[b] and (b << 32 | a if b < a else a << 32 | b) not in jkeys:
                self._cur[a] = c
                return c
            c += 1
        self._cur[a] = c
        if self._complete[a]:
            return None
        if defer and bounded:
            return -1
        return self._refill(a)

    def _refill(self, a: int) -> int | None:
        """Rescan ``a``'s list (with other dry ones); its head position, None if it has no partner left."""
        # A list that ran dry belongs to an entry with many close partners (a cluster
        # being judged pair by pair): its refill keeps more, so it runs dry less often.
        # Other lists waiting dry (hundreds, at 50k entries) are rescanned with it, those
        # whose bound comes up first: a batch shares the pass over the matrix (one row alone
        # is memory-bound), and a rescan may happen any time before it is due.
        batch = [a]
        if self._refill_batch > 1:
            dry = np.flatnonzero(self._dry[: len(self._ids)])
            dry = dry[dry != a]
            if dry.size > self._refill_batch - 1:
                dry = dry[np.argpartition(-self._bound[dry], self._refill_batch - 2)[: self._refill_batch - 1]]
            batch += dry.tolist()
        self.scan_rows(batch, self._long_slots)
        return 0 if self._len[a] else None  # a fresh scan holds only valid partners

    def _settle(self) -> tuple[float, int] | None:
        """Make the heap top an exact, valid entry (the global argmax) and return it.

        A list that runs dry is not rescanned at once: its heap item drops to its bound (the
        key of its last, extra item, which every pair the list lacks is below), and the rescan
        happens only if that bound reaches the top. A run that stops first, or removes the
        entry first, never pays for it. The pop order is the same either way.
        """
        heap = self._heap
        while heap:
            top = heap[0]
            code = top[1]
            a = (code >> 1) & LOW_MASK if code & 1 else code >> 33
            if not self._alive[a]:
                heapq.heappop(heap)
                continue
            if self._dry[a]:  # its bound is the top: now the rescan is due
                c: int | None = self._refill(a)
            else:
                c = self._head(a, defer=True)
                if c == -1:
                    bound = self._key(a, int(self._len[a]) - 1)
                    if bound != top:
                        self._dry[a] = True
                        self._bound[a] = -bound[0]
                        heapq.heapreplace(heap, bound)
                        continue
                    c = self._refill(a)  # the bound is already the top: no other pair can come first
            if c is None:
                heapq.heappop(heap)
                continue
            key = self._key(a, c)
            if key == top:
                return top
            heapq.heapreplace(heap, key)  # the real head is worse than the stored bound
        return None

    def _compact(self, extra: int = 0) -> None:
        """Drop removed rows; make room for ``extra`` more (in place when the own array has it)."""
        live_rows = np.flatnonzero(self._row_alive[: self._nrows])
        idxs = self._idx_of_row[live_rows]
        m = live_rows.size
        need = m + extra
        scale = self._scale
        if self._owned and self._x.shape[0] >= need:
            x = self._x
        else:
            cap = max(need + need // 8, 16)
            x = np.zeros((cap, self._d), dtype=self._x.dtype)
            scale = None if scale is None else np.zeros(cap, dtype=np.float32)
        # Block by block, front to back: live_rows[j] >= j, so in place no row is
        # overwritten before it is read; the temporaries stay small.
        for s in range(0, m, 4096):
            src = live_rows[s : s + 4096]
            x[s : s + src.size] = self._x[src]
            if scale is not None:
                scale[s : s + src.size] = self._scale[src]  # type: ignore[index]
        self._x, self._scale, self._owned = x, scale, True
        cap = x.shape[0]
        self._idx_of_row = _grown(idxs, cap, -1)
        self._row_alive = _grown(np.ones(m, dtype=bool), cap, False)
        self._row_of[idxs] = np.arange(m, dtype=np.int64)
        self._nrows = m
        self._dead_rows = 0
        self._prune_judged()
