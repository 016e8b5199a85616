"""The search index a store keeps in memory: every live entry's vector, brought up to date from the change feed.

:meth:`MemoryStore.search <memrefine_edge.store.MemoryStore.search>` reads the store's
change feed (migration 0012: a row per insert, delete or change of an entry, by any
connection) since the index's last position and applies just those changes; it reads the
whole store again only when it has no index yet, the query is of another model, or the feed
no longer reaches back to its position (it keeps the last :data:`FEED_ROWS` changes).

Vectors are kept as stored: int8 codes with a float32 scale (a quarter of a float32
matrix), each row re-offset to uint8 for onnxruntime's integer product; a vector stored
as float32 (an older store, ``set_embedding(exact=True)``, or one embedded in memory by a
read-only store) is kept as it is. The search is exact: the top ``k`` by the float32 score
``dequantised row . query`` (what a brute-force scan of :meth:`MemoryStore.embeddings`
gives, ties by insertion order), found in two steps:

1. A screen over every row with exact int32 products against the query written as two int8
   vectors (a coarse one and its remainder), which gives each row's score to within a
   bound that is computed, not guessed (:func:`memrefine_edge.index.screen_scores`).
2. The rows whose upper bound reaches the ``k``-th best lower bound (the top ``k`` is
   among them) are scored again exactly, as a scan would score them.

Small indexes (fewer than :data:`SCREEN_ROWS` rows) skip the screen.
"""

from __future__ import annotations

import numpy as np

from memrefine_edge.index import int8_products, row_norms, screen_scores

from ._embedding import EMBEDDING_TAG, HEADER_BYTES, decode_embedding

__all__ = ["SearchIndex", "FEED_ROWS", "SCREEN_ROWS"]

#: Changes the feed keeps (migration 0012): a reader further behind reads the whole store again.
FEED_ROWS = 1024
#: Below this many rows every row is scored exactly (the screen would not pay).
SCREEN_ROWS = 2048


class SearchIndex:
    """The live entries' vectors of one embedding model, keyed by insertion number (``seq``)."""

    def __init__(self, model_id: str, position: int) -> None:
        #: The embedding model of every vector here.
        self.model_id = model_id
        #: The last change of the feed applied (``change_feed.n``).
        self.position = position
        self._n = 0  # rows used (live and dead)
        self._dim = 0
        self._seqs = np.zeros(0, dtype=np.int64)
        self._live = np.zeros(0, dtype=bool)
        self._u8 = np.zeros((0, 0), dtype=np.uint8)   # int8 code + 128, row by row
        self._scales = np.zeros(0, dtype=np.float32)
        self._l1 = np.zeros(0, dtype=np.float32)      # scale * sum |code|
        self._l2 = np.zeros(0, dtype=np.float32)      # scale * |code|: the row's length
        self._ids: list[str] = []
        self._row: dict[int, int] = {}
        self._exact: dict[int, np.ndarray] = {}       # row -> float32 vector (not stored as int8)

    def __len__(self) -> int:
        return len(self._row)

    def __contains__(self, seq: object) -> bool:
        return seq in self._row

    def ids(self) -> list[str]:
        """The ids indexed, in insertion order."""
        return [self._ids[self._row[s]] for s in sorted(self._row)]

    # --- changes --------------------------------------------------------------

    def put_blob(self, seq: int, entry_id: str, blob: bytes) -> None:
        """Index (or re-index) entry ``seq`` with its stored embedding."""
        if bytes(blob[:4]) == EMBEDDING_TAG:
            codes = np.frombuffer(blob, dtype=np.int8, offset=HEADER_BYTES)
            scale = np.frombuffer(blob, dtype=np.float32, count=1, offset=len(EMBEDDING_TAG))[0]
            self._put(seq, entry_id, codes, scale, None)
        else:
            self.put_vector(seq, entry_id, decode_embedding(blob))

    def put_blobs(self, rows: list[tuple[int, str, bytes]]) -> None:
        """Index many entries ``(seq, id, stored embedding)`` at once (a whole store: one array each)."""
        packed = [r for r in rows if bytes(r[2][:4]) == EMBEDDING_TAG]
        if self._n or not packed or len({len(r[2]) for r in packed}) != 1:
            for seq, entry_id, blob in rows:
                self.put_blob(seq, entry_id, blob)
            return
        n, dim = len(packed), len(packed[0][2]) - HEADER_BYTES
        raw = np.frombuffer(b"".join(r[2] for r in packed), dtype=np.uint8).reshape(n, HEADER_BYTES + dim)
        codes = raw[:, HEADER_BYTES:].view(np.int8)
        self._dim, self._n = dim, n
        self._seqs = np.array([r[0] for r in packed], dtype=np.int64)
        self._live = np.ones(n, dtype=bool)
        self._u8 = np.bitwise_xor(raw[:, HEADER_BYTES:], np.uint8(0x80))
        self._scales = np.ascontiguousarray(raw[:, len(EMBEDDING_TAG):HEADER_BYTES]).view(np.float32).ravel().copy()
        self._l1 = np.empty(n, dtype=np.float32)
        self._l2 = np.empty(n, dtype=np.float32)
        for start in range(0, n, 4096):  # a few MB at a time, not a float copy of every code
            part = codes[start:start + 4096].astype(np.float32)  # sums of codes are exact in float32
            scales = self._scales[start:start + 4096]
            self._l1[start:start + 4096] = scales * np.abs(part).sum(axis=1)
            self._l2[start:start + 4096] = scales * np.sqrt(np.einsum("ij,ij->i", part, part))
        self._ids = [r[1] for r in packed]
        self._row = {int(seq): row for row, seq in enumerate(self._seqs)}
        for seq, entry_id, blob in rows:  # the rest, stored as float32
            if bytes(blob[:4]) != EMBEDDING_TAG:
                self.put_blob(seq, entry_id, blob)

    def put_vector(self, seq: int, entry_id: str, vector: np.ndarray) -> None:
        """Index (or re-index) entry ``seq`` with a float32 vector kept as it is."""
        vec = np.array(vector, dtype=np.float32).ravel()
        self._put(seq, entry_id, None, np.float32(0), vec)

    def drop(self, seq: int) -> None:
        """Forget entry ``seq`` (nothing if it is not indexed)."""
        row = self._row.pop(seq, None)
        if row is not None:
            self._live[row] = False
            self._exact.pop(row, None)
            if self._n - len(self._row) > max(1024, len(self._row)):
                self._compact()

    def _put(self, seq: int, entry_id: str, codes: np.ndarray | None, scale: np.float32,
             exact: np.ndarray | None) -> None:
        dim = codes.shape[0] if codes is not None else exact.shape[0]  # type: ignore[union-attr]
        if not self._n:
            self._dim = dim
        elif dim != self._dim:
            raise ValueError(f"an embedding of {dim} dimensions among embeddings of {self._dim} (model "
                             f"{self.model_id!r})")
        row = self._row.get(seq)
        if row is None:
            if self._n == len(self._seqs):
                self._grow()
            row = self._n
            self._n += 1
            self._row[seq] = row
            self._ids.append(entry_id)
        self._seqs[row], self._ids[row], self._live[row] = seq, entry_id, True
        if codes is None:
            self._u8[row] = 128  # code 0: the screen gives it no score; it is always scored exactly
            self._scales[row] = self._l1[row] = self._l2[row] = 0
            self._exact[row] = exact  # type: ignore[assignment]
        else:
            np.bitwise_xor(codes.view(np.uint8), np.uint8(0x80), out=self._u8[row])
            self._scales[row] = scale
            l1, l2 = row_norms(codes[None, :], np.array([scale], dtype=np.float32))
            self._l1[row], self._l2[row] = l1[0], l2[0]
            self._exact.pop(row, None)

    def _grow(self) -> None:
        cap = max(64, len(self._seqs) * 3 // 2 + 1)
        self._seqs = np.resize(self._seqs, cap)
        self._live = np.resize(self._live, cap)
        self._scales = np.resize(self._scales, cap)
        self._l1 = np.resize(self._l1, cap)
        self._l2 = np.resize(self._l2, cap)
        u8 = np.empty((cap, self._dim), dtype=np.uint8)
        if self._n:  # an empty index has no rows of its dimension yet
            u8[: self._n] = self._u8[: self._n]
        self._u8 = u8

    def _compact(self) -> None:
        """Drop the dead rows (when they outnumber the live ones): rows keep their order."""
        keep = np.flatnonzero(self._live[: self._n])
        exact = {new: self._exact[int(old)] for new, old in enumerate(keep) if int(old) in self._exact}
        self._seqs, self._live = self._seqs[keep], self._live[keep]
        self._u8, self._scales = self._u8[keep], self._scales[keep]
        self._l1, self._l2 = self._l1[keep], self._l2[keep]
        self._ids = [self._ids[int(old)] for old in keep]
        self._exact = exact
        self._n = len(keep)
        self._row = {int(seq): row for row, seq in enumerate(self._seqs[: self._n])}

    # --- search ---------------------------------------------------------------

    def search(self, query: np.ndarray, k: int) -> list[tuple[str, float]]:
        """The ``k`` best ``(id, score)`` for ``query``: score descending, ties by insertion order."""
        if not self._row:
            return []
        q = np.asarray(query, dtype=np.float32).ravel()
        if q.shape[0] != self._dim:
            raise ValueError(f"a query of {q.shape[0]} dimensions against embeddings of {self._dim}")
        k = min(k, len(self._row))
        rows = self._candidates(q, k)
        scores = self._scores(rows, q)
        top = np.lexsort((self._seqs[rows], -scores))[:k]
        return [(self._ids[int(rows[i])], float(scores[i])) for i in top]

    def _candidates(self, q: np.ndarray, k: int) -> np.ndarray:
        """Rows among which the top ``k`` is, by the screen's bounds (every live row for a small index)."""
        n = self._n
        live = self._live[:n]
        if len(self._row) < SCREEN_ROWS:
            return np.flatnonzero(live)
        # One thread: the product reads every row once and is bound by memory, not by arithmetic.
        approx, margin = screen_scores(self._u8[:n], self._scales[:n], self._l1[:n], self._l2[:n], q,
                                       products=lambda a, b: int8_products(a, b, threads=1))
        lower, upper = approx[0] - margin[0], approx[0] + margin[0]
        if len(self._row) < n:
            lower[~live] = upper[~live] = -np.inf
        if self._exact:  # rows the screen cannot score: always scored exactly, never a bound
            exact = np.fromiter(self._exact, dtype=np.int64, count=len(self._exact))
            lower[exact], upper[exact] = -np.inf, np.inf
        screened = len(self._row) - len(self._exact)
        if screened < k:
            return np.flatnonzero(live)
        kth = -np.partition(-lower, k - 1)[k - 1]
        return np.flatnonzero(upper >= kth)

    def _scores(self, rows: np.ndarray, q: np.ndarray) -> np.ndarray:
        """The float32 scores of ``rows``, each as a scan of the dequantised vectors computes it."""
        vecs = (self._u8[rows] ^ np.uint8(0x80)).view(np.int8).astype(np.float32) * self._scales[rows, None]
        if self._exact:
            for i, row in enumerate(rows):
                exact = self._exact.get(int(row))
                if exact is not None:
                    vecs[i] = exact
        # numpy's single-threaded loop: BLAS sgemv's threads stall on shared cores.
        return np.einsum("ij,j->i", vecs, q)

