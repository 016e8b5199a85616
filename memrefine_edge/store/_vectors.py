"""Embeddings and search of a store (a part of :class:`~memrefine_edge.store.MemoryStore`).

Stored format (:mod:`~memrefine_edge.store._embedding`, re-exported here): int8 codes with
one float32 scale per vector, read back as ``q * scale`` in float32. Everything that
reads vectors -- the pair queue, search, the rule methods -- works on those
dequantised vectors, and the pair order contract of :mod:`memrefine_edge.index._pairs`
is exact for them. Against float32, per component the error is about
``max|v| / 254``; ``bench/scale.py`` reports how far the candidate-pair order and
search results move (rank agreement against float32).
"""

from __future__ import annotations

from contextlib import AbstractContextManager, ExitStack
from typing import TYPE_CHECKING, Any

import numpy as np

from memrefine_edge.core import ConfigurationError, Entry, EntryNotFoundError, is_lookup_key

from ._embedding import (
    EMBEDDING_TAG,
    HEADER_BYTES,
    decode_embedding,
    encode_embedding,
    quantize_embedding,
    stored_embedding_bytes,
)
from ._search_index import SearchIndex

if TYPE_CHECKING:  # pragma: no cover
    from memrefine_edge.backends import Encoder

__all__ = ["VectorsMixin", "encode_embedding", "decode_embedding", "quantize_embedding", "stored_embedding_bytes",
           "EMBEDDING_TAG"]

class VectorsMixin:
    """The embedding and search methods of :class:`~memrefine_edge.store.MemoryStore`."""

    if TYPE_CHECKING:  # provided by MemoryStore
        _db: Any
        read_only: bool
        _lock: Any
        _in_tx: bool
        _search_index: SearchIndex | None
        search_guards: list[Any]

        def atomic(self) -> AbstractContextManager[None]: ...
        def _read_snapshot(self) -> AbstractContextManager[None]: ...
        def get(self, entry_id: str) -> Entry: ...
        def _note_uses(self, entry_ids: Any) -> None: ...
        def string_num(self, text: str, *, add: bool = False) -> int | None: ...

    def _model_tag(self, model_id: str, *, add: bool = False) -> str:
        """What ``entries.embedding_model`` holds for this model: ``#`` and its number in ``strings``
        (migration 0008), or, for a model no entry was embedded with yet (and ``add`` false), its name.
        A reader matches the name too (a row written in full by an older writer)."""
        if model_id.startswith("#"):  # the form of a model's number: a name may not take it
            raise ConfigurationError(f"an embedding model id may not start with '#', got {model_id!r}")
        num = self.string_num(model_id, add=add)
        return model_id if num is None else f"#{num}"

    def ensure_embeddings(self, encoder: "Encoder", *, batch_size: int = 64, progress=None,
                          page_rows: int = 8192) -> int:
        """Embed every entry whose embedding is missing, stale or from another model.

        Entries whose content hash and model id are unchanged are skipped.
        Each batch of ``batch_size`` texts is committed on its own, so an
        interrupted pass keeps what it embedded and the next call continues
        from there; ``progress(done, total)`` is called after each batch.
        Identical contents are embedded once. The entries are read
        ``page_rows`` at a time, so the pass holds one page of texts however
        large the store (plus the stored form of contents that occur more
        than once, until their last copy is written). Returns how many
        entries were embedded.
        """
        conn = self._db.conn
        # A row names its model by number (migration 0008) or, written by an older writer, in full.
        stale = ("(embedding IS NULL OR embedding_model IS NULL OR embedding_model NOT IN (?, ?)"
                 " OR embedded_hash IS NOT content_hash)")
        models = (self._model_tag(encoder.model_id), encoder.model_id)
        # Contents that occur more than once, with how many of their copies are left to write.
        total, left = 0, {}
        for digest, count in conn.execute(
                f"SELECT content_hash, COUNT(*) FROM entries WHERE {stale} GROUP BY content_hash", models):
            total += count
            if count > 1:
                left[digest] = count
        if not total:
            return 0  # nothing to do: no write transaction
        # Stored form of a repeated content once embedded: its later copies reuse it.
        done_blobs: dict[str, bytes] = {}
        done, after = 0, -1
        while True:
            page = conn.execute(
                f"SELECT seq, id, content, content_hash FROM entries WHERE seq > ? AND {stale} ORDER BY seq LIMIT ?",
                (after, *models, page_rows),
            ).fetchall()
            if not page:
                break
            after = page[-1][0]
            # This page's distinct contents still to embed, in order; the rows of each.
            unique: dict[str, str] = {}
            rows_of: dict[str, list[str]] = {}
            for _, entry_id, content, digest in page:
                if digest not in done_blobs:
                    unique.setdefault(digest, content)
                rows_of.setdefault(digest, []).append(entry_id)
            digests = list(unique)
            reused = [d for d in rows_of if d in done_blobs]
            for start in range(0, max(len(digests), 1), batch_size):
                chunk = digests[start : start + batch_size]
                blobs = [encode_embedding(v) for v in encoder.embed([unique[d] for d in chunk])] if chunk else []
                todo = list(zip(chunk, blobs, strict=True))
                if not start:  # the page's reused contents ride with its first batch
                    todo += [(d, done_blobs[d]) for d in reused]
                with self.atomic():
                    tag = self._model_tag(encoder.model_id, add=True)
                    for digest, blob in todo:
                        for entry_id in rows_of[digest]:
                            # Only if the content is still the one embedded: another
                            # connection may have changed or removed the entry meanwhile.
                            conn.execute(
                                "UPDATE entries SET embedding = ?, embedding_model = ?, embedded_hash = content_hash"
                                " WHERE id = ? AND content_hash = ?",
                                (blob, tag, entry_id, digest),
                            )
                for digest, blob in todo:
                    if digest in left:
                        left[digest] -= len(rows_of[digest])
                        if left[digest] > 0:
                            done_blobs[digest] = blob
                        else:
                            done_blobs.pop(digest, None)
                done += sum(len(rows_of[d]) for d, _ in todo)
                if progress and todo:
                    progress(done, total)
        return total

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

    def identical_groups(self, *, max_seq: int) -> list[list[tuple[int, str]]]:
        """``(seq, id)`` of live entries with identical content, one list per content (each in insertion
        order, the lists in the order of their first entry); only entries with ``seq <= max_seq``.

        Identical texts embed to the same vector: their cosine is 1, the highest there is. Found by
        the stored content hash (no vectors read), then compared as text, so a hash collision never
        groups two different texts.
        """
        groups: dict[str, list[tuple[int, str]]] = {}
        with self._read_snapshot():
            for seq, entry_id, content in self._db.conn.execute(
                "SELECT seq, id, content FROM entries WHERE seq <= ? AND content_hash IN "
                "(SELECT content_hash FROM entries WHERE seq <= ? GROUP BY content_hash HAVING COUNT(*) > 1) "
                "ORDER BY seq", (int(max_seq), int(max_seq))):
                groups.setdefault(content, []).append((int(seq), entry_id))
        return [group for group in groups.values() if len(group) > 1]

    def embedding_codes(self, *, model_id: str) -> tuple[list[str], np.ndarray, np.ndarray] | None:
        """Ids (insertion order), int8 codes ``(n, d)`` and float32 scales ``(n,)`` of every entry embedded by
        ``model_id``, as stored: row ``i`` reads back as ``codes[i] * scales[i]`` (what :meth:`embeddings` gives).

        A quarter of the float32 matrix's memory (38 MB at 100k entries of d = 384). ``None`` when an
        embedding is stored as float32 (an older store, or ``set_embedding(exact=True)``): use
        :meth:`embeddings` then.
        """
        with self._read_snapshot():
            conn = self._db.conn
            where = " WHERE embedding IS NOT NULL AND embedding_model IN (?, ?)"
            models = (self._model_tag(model_id), model_id)
            n = int(conn.execute("SELECT COUNT(*) FROM entries" + where, models).fetchone()[0])
            if not n:
                return [], np.zeros((0, 0), dtype=np.int8), np.zeros(0, dtype=np.float32)
            ids: list[str] = []
            codes: np.ndarray | None = None
            scales = np.empty(n, dtype=np.float32)
            for entry_id, blob in conn.execute(f"SELECT id, embedding FROM entries{where} ORDER BY seq", models):
                if blob[:4] != EMBEDDING_TAG:
                    return None
                if codes is None:
                    codes = np.empty((n, len(blob) - HEADER_BYTES), dtype=np.int8)
                i = len(ids)
                codes[i] = np.frombuffer(blob, dtype=np.int8, offset=HEADER_BYTES)
                scales[i] = np.frombuffer(blob, dtype=np.float32, count=1, offset=len(EMBEDDING_TAG))[0]
                ids.append(entry_id)
        assert codes is not None
        return ids, codes, scales

    def search(self, query: str, k: int = 10, *, encoder: "Encoder") -> list[tuple[Entry, float]]:
        """Cosine top-``k`` live entries for ``query`` (the default retriever); ties by insertion order.

        The vectors are kept in memory (:mod:`~memrefine_edge.store._search_index`) and brought up
        to date from the store's change feed: a search after a write -- an add, a delete, a merge,
        an eviction, on this connection or any other, in this process or another -- reads only
        the entries that changed, not the whole store (which it reads again only when the feed no
        longer reaches back to its last search). Entries without an embedding of ``encoder``'s
        model are embedded first, and their embeddings stored (a store opened read-only keeps
        them in memory only). The result is the one a scan of every live entry gives.
        """
        if k < 1:
            raise ValueError("k must be at least 1")
        with ExitStack() as guards:
            for guard in list(self.search_guards):
                guards.enter_context(guard(self))
            return self._search(query, k, encoder)

    def _search(self, query: str, k: int, encoder: "Encoder") -> list[tuple[Entry, float]]:
        """The work of :meth:`search`."""
        vector = np.asarray(encoder.embed([query])[0], dtype=np.float32)
        with self._lock:
            if not self.read_only and not self._in_tx and self._feed_lost(encoder.model_id):
                # The index is rebuilt from the whole store: embed what needs it first, in committed batches.
                self.ensure_embeddings(encoder)
            with self._read_snapshot():
                index, todo = self._follow_feed(encoder.model_id)
                stored = self._embed_into(index, todo, encoder)
                hits = [(self.get(entry_id), score) for entry_id, score in index.search(vector, k)]
            if self._in_tx:  # read inside a write transaction that may yet roll back: not kept
                self._search_index = None
            if stored:
                self._store_embeddings(stored, encoder.model_id)
            self._note_uses(entry.id for entry, _ in hits)
        return hits

    def _feed_lost(self, model_id: str) -> bool:
        """Whether the next search reads the whole store: no index of ``model_id`` yet, or the change
        feed no longer reaches back to its position."""
        index = self._search_index
        if index is None or index.model_id != model_id:
            return True
        conn = self._db.conn
        top = int(conn.execute("SELECT COALESCE(MAX(n), 0) FROM change_feed").fetchone()[0])
        if top <= index.position:
            return top < index.position  # behind the index: another file, or a feed started again
        # Its oldest row (MIN and MAX each read one end of the key; together they would scan it).
        low = conn.execute("SELECT MIN(n) FROM change_feed").fetchone()[0]
        return low is None or low > index.position + 1

    def _follow_feed(self, model_id: str) -> tuple[SearchIndex, list[tuple[int, str, str, str]]]:
        """The search index brought up to this snapshot, and the live entries it lacks a vector for
        (``seq, id, content, content_hash``). Inside a read snapshot."""
        conn = self._db.conn
        index = self._search_index
        if self._feed_lost(model_id) or index is None:
            top = int(conn.execute("SELECT COALESCE(MAX(n), 0) FROM change_feed").fetchone()[0])
            index = SearchIndex(model_id, top)
            todo = self._index_rows(index, None)
            self._search_index = index
            return index, todo
        top = int(conn.execute("SELECT COALESCE(MAX(n), 0) FROM change_feed").fetchone()[0])
        if top == index.position:
            return index, []
        changed = [int(r[0]) for r in conn.execute(
            "SELECT DISTINCT seq FROM change_feed WHERE n > ?", (index.position,))]
        todo = self._index_rows(index, changed)
        index.position = top
        return index, todo

    def _index_rows(self, index: SearchIndex, seqs: list[int] | None) -> list[tuple[int, str, str, str]]:
        """Put the stored vectors of entries ``seqs`` (all, for None) into ``index``, drop those gone;
        returns the live ones with no usable stored vector (``seq, id, content, content_hash``)."""
        conn = self._db.conn
        models = (self._model_tag(index.model_id), index.model_id)
        # Read-only, a stale embedding is used as stored (nothing can embed it again for good).
        current = "1" if self.read_only else "embedded_hash IS content_hash"
        sql = (f"SELECT seq, id, embedding, embedding IS NOT NULL AND embedding_model IN (?, ?) AND {current}"
               " FROM entries")
        missing: list[int] = []
        if seqs is None:
            usable_rows = []
            for seq, entry_id, blob, usable in conn.execute(sql + " ORDER BY seq", models):
                if usable:
                    usable_rows.append((seq, entry_id, blob))
                else:
                    missing.append(seq)
            index.put_blobs(usable_rows)
        else:
            found: set[int] = set()
            for start in range(0, len(seqs), 500):
                chunk = seqs[start:start + 500]
                marks = ",".join("?" * len(chunk))
                for seq, entry_id, blob, usable in conn.execute(f"{sql} WHERE seq IN ({marks})", (*models, *chunk)):
                    found.add(seq)
                    if usable:
                        index.put_blob(seq, entry_id, blob)
                    else:
                        missing.append(seq)
            for seq in seqs:
                if seq not in found:
                    index.drop(seq)
        todo: list[tuple[int, str, str, str]] = []
        for start in range(0, len(missing), 500):
            chunk = missing[start:start + 500]
            marks = ",".join("?" * len(chunk))
            todo += [(int(r[0]), r[1], r[2], r[3]) for r in conn.execute(
                f"SELECT seq, id, content, content_hash FROM entries WHERE seq IN ({marks}) ORDER BY seq", chunk)]
        return todo

    def _embed_into(self, index: SearchIndex, todo: list[tuple[int, str, str, str]],
                    encoder: "Encoder") -> list[tuple[int, str, bytes]]:
        """Embed the entries of ``todo`` into ``index``; returns what to store (``seq, content_hash,
        blob``): nothing for a store opened read-only, whose index keeps the vectors as computed."""
        stored: list[tuple[int, str, bytes]] = []
        for start in range(0, len(todo), 64):
            chunk = todo[start:start + 64]
            for (seq, entry_id, _, digest), vec in zip(chunk, encoder.embed([c for _, _, c, _ in chunk]),
                                                       strict=True):
                if self.read_only:
                    index.put_vector(seq, entry_id, vec)
                else:
                    blob = encode_embedding(vec)
                    index.put_blob(seq, entry_id, blob)  # as a later read of the store gives it
                    stored.append((seq, digest, blob))
        return stored

    def _store_embeddings(self, stored: list[tuple[int, str, bytes]], model_id: str) -> None:
        """Store embeddings a search computed (each only if its entry's content is still the one embedded)."""
        with self.atomic():
            tag = self._model_tag(model_id, add=True)
            self._db.conn.executemany(
                "UPDATE entries SET embedding = ?, embedding_model = ?, embedded_hash = content_hash"
                " WHERE seq = ? AND content_hash = ?", [(blob, tag, seq, digest) for seq, digest, blob in stored])
