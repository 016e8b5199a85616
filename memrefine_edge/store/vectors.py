"""Embeddings and search of a store (a part of :class:`~memrefine_edge.store.MemoryStore`).

Stored format (compact): an embedding is written as int8 with one float32
scale per vector, ``TAG + scale + d int8`` (``d + 8`` bytes: 392 at d = 384,
against 1,536 as float32). ``TAG`` reads as a float32 NaN, which no stored
float32 embedding can start with (embeddings are finite), so a store written
by an older version -- raw float32 blobs -- is read as it is, without a
migration, and an entry embedded again is written compactly.

Quantisation: ``q = round(127 v / max|v|)``, ``scale = |v| / |q|``; the vector
read back is ``q * scale`` in float32: the direction of ``q`` at the length of
``v`` (a unit vector stays a unit vector, so dot products stay cosines). Everything that
reads vectors -- the pair queue, search, the rule methods -- works on those
dequantised vectors, and the pair order contract of :mod:`memrefine_edge.pairs`
is exact for them. Against float32, per component the error is about
``max|v| / 254``; ``bench/scale.py`` reports how far the candidate-pair order and
search results move (rank agreement against float32).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

import numpy as np

from ..entry import Entry, is_lookup_key
from ..errors import EntryNotFoundError

if TYPE_CHECKING:  # pragma: no cover
    from ..backends.encoder import Encoder

__all__ = ["VectorsMixin", "encode_embedding", "decode_embedding", "stored_embedding_bytes", "EMBEDDING_TAG"]

#: The first 4 bytes of a compact (int8) embedding: a float32 NaN when read as float32.
EMBEDDING_TAG = b"Q8\xff\x7f"
_HEADER = len(EMBEDDING_TAG) + 4  # the tag, then the float32 scale


def encode_embedding(vector: np.ndarray) -> bytes:
    """The stored (int8, per-vector scale) bytes of one embedding."""
    v = np.asarray(vector, dtype=np.float32).ravel()
    top = float(np.max(np.abs(v))) if v.size else 0.0
    if not np.isfinite(top):
        raise ValueError("an embedding must be finite")
    if top == 0:
        return EMBEDDING_TAG + np.float32(0).tobytes() + np.zeros(v.shape, dtype=np.int8).tobytes()
    q = np.clip(np.rint(v / np.float32(top / 127.0)), -127, 127).astype(np.int8)
    # The scale keeps the vector's length (a unit vector reads back as one): dot products stay cosines.
    scale = np.float32(np.linalg.norm(v.astype(np.float64)) / np.linalg.norm(q.astype(np.float64)))
    return EMBEDDING_TAG + scale.tobytes() + q.tobytes()


def decode_embedding(blob: bytes) -> np.ndarray:
    """The float32 vector of a stored embedding (compact int8, or the float32 of older stores)."""
    if blob[:4] == EMBEDDING_TAG:
        scale = np.frombuffer(blob, dtype=np.float32, count=1, offset=len(EMBEDDING_TAG))[0]
        return np.frombuffer(blob, dtype=np.int8, offset=_HEADER).astype(np.float32) * scale
    return np.frombuffer(blob, dtype=np.float32)


def stored_embedding_bytes(dim: int) -> int:
    """Bytes one embedding of ``dim`` dimensions takes as stored: the tag, the float32 scale, ``dim`` int8."""
    return _HEADER + dim


class VectorsMixin:
    """The embedding and search methods of :class:`~memrefine_edge.store.MemoryStore`."""

    if TYPE_CHECKING:  # provided by MemoryStore
        _db: Any
        read_only: bool
        _version: int
        _search_cache: tuple[tuple[Any, ...], list[str], np.ndarray] | None

        def atomic(self) -> AbstractContextManager[None]: ...
        def _read_snapshot(self) -> AbstractContextManager[None]: ...
        def get(self, entry_id: str) -> Entry: ...
        def string_num(self, text: str, *, add: bool = False) -> int | None: ...

    def _model_tag(self, model_id: str, *, add: bool = False) -> str:
        """What ``entries.embedding_model`` holds for this model: ``#`` and its number in ``strings``
        (migration 0008), or, for a model no entry was embedded with yet (and ``add`` false), its name.
        A reader matches the name too (a row written in full by an older writer)."""
        num = self.string_num(model_id, add=add)
        return model_id if num is None else f"#{num}"

    def ensure_embeddings(self, encoder: "Encoder", *, batch_size: int = 64, progress=None) -> int:
        """Embed every entry whose embedding is missing, stale or from another model.

        Entries whose content hash and model id are unchanged are skipped.
        Each batch of ``batch_size`` texts is committed on its own, so an
        interrupted pass keeps what it embedded and the next call continues
        from there; ``progress(done, total)`` is called after each batch.
        Returns how many entries were embedded.
        """
        rows = self._db.conn.execute(
            "SELECT id, content, content_hash FROM entries WHERE embedding IS NULL"
            " OR embedding_model NOT IN (?, ?) OR embedded_hash IS NOT content_hash ORDER BY seq",
            (self._model_tag(encoder.model_id), encoder.model_id),
        ).fetchall()
        if not rows:
            # Nothing to do: no write transaction, so the search cache (keyed on
            # the write version) stays valid.
            return 0
        # Identical contents are embedded once.
        unique: dict[str, str] = {}
        rows_of: dict[str, list[str]] = {}
        for entry_id, content, digest in rows:
            unique.setdefault(digest, content)
            rows_of.setdefault(digest, []).append(entry_id)
        digests = list(unique)
        done = 0
        for start in range(0, len(digests), batch_size):
            chunk = digests[start : start + batch_size]
            vectors = encoder.embed([unique[d] for d in chunk])
            with self.atomic():
                tag = self._model_tag(encoder.model_id, add=True)
                for digest, vec in zip(chunk, vectors, strict=True):
                    blob = encode_embedding(vec)
                    for entry_id in rows_of[digest]:
                        # Only if the content is still the one embedded: another
                        # connection may have changed or removed the entry meanwhile.
                        self._db.conn.execute(
                            "UPDATE entries SET embedding = ?, embedding_model = ?, embedded_hash = content_hash"
                            " WHERE id = ? AND content_hash = ?",
                            (blob, tag, entry_id, digest),
                        )
            done += sum(len(rows_of[d]) for d in chunk)
            if progress:
                progress(done, len(rows))
        return len(rows)

    @staticmethod
    def as_stored(vector: np.ndarray) -> np.ndarray:
        """``vector`` as the store reads it back once stored (dequantised float32).

        What an in-memory structure built alongside the store must use, so
        it matches one rebuilt from the store (a resumed run's pair queue).
        """
        return decode_embedding(encode_embedding(vector))

    def set_embedding(self, entry_id: str, vector: np.ndarray, model_id: str, *, exact: bool = False) -> None:
        """Store one entry's embedding (compact: int8 with a scale, see the module docstring).

        ``exact=True`` stores the float32 vector as given (4 bytes a dimension), for
        vectors whose every bit matters (hand-made ones at a threshold, say).
        """
        if not is_lookup_key(entry_id):
            raise EntryNotFoundError.for_id(entry_id)
        blob = np.asarray(vector, dtype=np.float32).tobytes() if exact else encode_embedding(vector)
        with self.atomic():
            cur = self._db.conn.execute(
                "UPDATE entries SET embedding = ?, embedding_model = ?, embedded_hash = content_hash WHERE id = ?",
                (blob, self._model_tag(model_id, add=True), entry_id),
            )
            if cur.rowcount == 0:
                raise EntryNotFoundError.for_id(entry_id)

    def embeddings(self, *, model_id: str | None = None) -> tuple[list[str], np.ndarray]:
        """Ids (insertion order) and a float32 matrix of every embedded entry (dequantised).

        The matrix is filled row by row from the cursor: the only full-size
        array is the result (at 100k entries of d = 384, 154 MB; the blobs
        are never all in memory at once).
        """
        where = " WHERE embedding IS NOT NULL" + (" AND embedding_model IN (?, ?)" if model_id else "")
        args = (self._model_tag(model_id), model_id) if model_id else ()
        with self._read_snapshot():
            n = int(self._db.conn.execute("SELECT COUNT(*) FROM entries" + where, args).fetchone()[0])
            if not n:
                return [], np.zeros((0, 0), dtype=np.float32)
            ids: list[str] = []
            matrix: np.ndarray | None = None
            for entry_id, blob in self._db.conn.execute(f"SELECT id, embedding FROM entries{where} ORDER BY seq", args):
                vec = decode_embedding(blob)
                if matrix is None:
                    matrix = np.empty((n, vec.shape[0]), dtype=np.float32)
                matrix[len(ids)] = vec
                ids.append(entry_id)
        assert matrix is not None
        return ids, matrix

    def _with_missing(self, encoder: "Encoder", ids: list[str], matrix: np.ndarray) -> tuple[list[str], np.ndarray]:
        """``ids, matrix`` completed with in-memory vectors of the entries not embedded by ``encoder`` (in order)."""
        have = set(ids)
        rows = [(r[0], r[1]) for r in self._db.conn.execute("SELECT id, content FROM entries ORDER BY seq")]
        missing = [(i, c) for i, c in rows if i not in have]
        if not missing:
            return ids, matrix
        vectors = dict(zip(ids, matrix, strict=True))
        vectors.update(zip((i for i, _ in missing), encoder.embed([c for _, c in missing]), strict=True))
        order = [i for i, _ in rows]
        return order, np.stack([np.asarray(vectors[i], dtype=np.float32) for i in order])

    def search(self, query: str, k: int = 10, *, encoder: "Encoder") -> list[tuple[Entry, float]]:
        """Cosine top-``k`` live entries for ``query`` (the default retriever).

        The embedding matrix is cached in memory and rebuilt after any write.
        Entries without an embedding are embedded first (and stored; a store
        opened read-only embeds them in memory only).
        """
        if k < 1:
            raise ValueError("k must be at least 1")
        def version() -> tuple[Any, ...]:
            # Another connection (a compression in another process) may have
            # committed since the cache was built: data_version says so.
            return (self._version, self._db.conn.execute("PRAGMA data_version").fetchone()[0], encoder.model_id)

        cache = self._search_cache
        if not self.read_only and (cache is None or cache[0] != version()):
            # Only when something changed: the check reads every entry row (O(n)).
            self.ensure_embeddings(encoder)
        with self._read_snapshot():
            now = version()
            cache = self._search_cache
            if cache is None or cache[0] != now:
                ids, matrix = self.embeddings(model_id=encoder.model_id)
                if self.read_only:
                    ids, matrix = self._with_missing(encoder, ids, matrix)
                cache = self._search_cache = (now, ids, matrix)
            _, ids, matrix = cache
            if not ids:
                return []
            q = encoder.embed([query])[0]
            # numpy's single-threaded loop: BLAS sgemv's threads stall on shared cores.
            scores = np.einsum("ij,j->i", matrix, np.asarray(q, dtype=np.float32))
            k = min(k, len(ids))
            # Every score at or above the k-th (ties at the k-th place included), then a
            # stable sort of those: the same top-k as a stable sort of all, ties by
            # insertion order, without sorting n scores.
            neg = -scores
            kth = np.partition(neg, k - 1)[k - 1]
            cand = np.flatnonzero(neg <= kth)
            top = cand[np.argsort(neg[cand], kind="stable")][:k]
            return [(self.get(ids[i]), float(scores[i])) for i in top]
