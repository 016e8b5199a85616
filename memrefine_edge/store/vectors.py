"""Embeddings and search of a store (a part of :class:`~memrefine_edge.store.MemoryStore`)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

import numpy as np

from ..entry import Entry, is_lookup_key
from ..errors import EntryNotFoundError

if TYPE_CHECKING:  # pragma: no cover
    from ..backends.encoder import Encoder

__all__ = ["VectorsMixin"]


class VectorsMixin:
    """The embedding and search methods of :class:`~memrefine_edge.store.MemoryStore`."""

    if TYPE_CHECKING:  # provided by MemoryStore
        _db: Any
        read_only: bool
        _version: int
        _search_cache: tuple[tuple[int, int], list[str], np.ndarray] | None

        def atomic(self) -> AbstractContextManager[None]: ...
        def _read_snapshot(self) -> AbstractContextManager[None]: ...
        def get(self, entry_id: str) -> Entry: ...

    def ensure_embeddings(self, encoder: "Encoder", *, batch_size: int = 64, progress=None) -> int:
        """Embed every entry whose embedding is missing, stale or from another model.

        Entries whose content hash and model id are unchanged are skipped.
        Each batch of ``batch_size`` texts is committed on its own, so an
        interrupted pass keeps what it embedded and the next call continues
        from there; ``progress(done, total)`` is called after each batch.
        Returns how many entries were embedded.
        """
        rows = self._db.conn.execute(
            "SELECT id, content, content_hash FROM entries WHERE embedding IS NULL OR embedding_model IS NOT ?"
            " OR embedded_hash IS NOT content_hash ORDER BY seq",
            (encoder.model_id,),
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
                for digest, vec in zip(chunk, vectors, strict=True):
                    blob = np.asarray(vec, dtype=np.float32).tobytes()
                    for entry_id in rows_of[digest]:
                        # Only if the content is still the one embedded: another
                        # connection may have changed or removed the entry meanwhile.
                        self._db.conn.execute(
                            "UPDATE entries SET embedding = ?, embedding_model = ?, embedded_hash = content_hash"
                            " WHERE id = ? AND content_hash = ?",
                            (blob, encoder.model_id, entry_id, digest),
                        )
            done += sum(len(rows_of[d]) for d in chunk)
            if progress:
                progress(done, len(rows))
        return len(rows)

    def set_embedding(self, entry_id: str, vector: np.ndarray, model_id: str) -> None:
        """Store one entry's embedding (float32)."""
        if not is_lookup_key(entry_id):
            raise EntryNotFoundError.for_id(entry_id)
        blob = np.asarray(vector, dtype=np.float32).tobytes()
        with self.atomic():
            cur = self._db.conn.execute(
                "UPDATE entries SET embedding = ?, embedding_model = ?, embedded_hash = content_hash WHERE id = ?",
                (blob, model_id, entry_id),
            )
            if cur.rowcount == 0:
                raise EntryNotFoundError.for_id(entry_id)

    def embeddings(self, *, model_id: str | None = None) -> tuple[list[str], np.ndarray]:
        """Ids (insertion order) and a float32 matrix of every embedded entry."""
        rows = self._db.conn.execute(
            "SELECT id, embedding FROM entries WHERE embedding IS NOT NULL"
            + (" AND embedding_model = ?" if model_id else "")
            + " ORDER BY seq",
            (model_id,) if model_id else (),
        ).fetchall()
        if not rows:
            return [], np.zeros((0, 0), dtype=np.float32)
        matrix = np.stack([np.frombuffer(blob, dtype=np.float32) for _, blob in rows])
        return [r[0] for r in rows], matrix

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
        if not self.read_only:
            self.ensure_embeddings(encoder)
        with self._read_snapshot():
            # Another connection (a compression in another process) may have
            # committed since the cache was built: data_version says so.
            version = (self._version, self._db.conn.execute("PRAGMA data_version").fetchone()[0])
            cache = self._search_cache
            if cache is None or cache[0] != version:
                ids, matrix = self.embeddings(model_id=encoder.model_id)
                if self.read_only:
                    ids, matrix = self._with_missing(encoder, ids, matrix)
                cache = self._search_cache = (version, ids, matrix)
            _, ids, matrix = cache
            if not ids:
                return []
            q = encoder.embed([query])[0]
            scores = matrix @ q
            k = min(k, len(ids))
            # A stable sort of all scores: ties resolve by insertion order even at
            # the k-th place (argpartition picks an arbitrary tied element there).
            top = np.argsort(-scores, kind="stable")[:k]
            return [(self.get(ids[i]), float(scores[i])) for i in top]
