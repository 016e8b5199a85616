"""What searches returned: a store's record of use (a part of :class:`~memrefine_edge.store.MemoryStore`).

Each entry a search returns counts one use, with the time (unix seconds). A search does not
write: it notes the uses in memory, and the connection's next write transaction carries them
(an add, a compression step, any :meth:`MemoryStore.atomic` block), as does :meth:`close`; so
a search costs no commit of its own, and uses noted just before a crash are lost (they are a
signal, not a memory). A store opened read-only, or with ``record_uses=False``, notes none.

Stored in ``uses`` (migration 0014) by the entry's insertion number: a count and the time of
the last use. A merged entry starts with the sum of its two entries' counts and the later of
their times; an entry removed keeps its row while the undo history keeps it (undo brings it back
with its use), and ``purge-history`` drops the rows of entries neither live nor kept.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from memrefine_edge.core import EntryNotFoundError, InvalidEntryError, StoreReadOnlyError

__all__ = ["UsesMixin", "FLUSH_AT"]

#: Entries with uses noted in memory at which a search writes them at once (in a transaction of its own).
FLUSH_AT = 256


class UsesMixin:
    """The use record of :class:`~memrefine_edge.store.MemoryStore` (see the module docstring)."""

    if TYPE_CHECKING:  # provided by MemoryStore
        _db: Any
        _lock: threading.RLock
        _in_tx: bool
        read_only: bool

        def atomic(self) -> Any: ...

        def __contains__(self, entry_id: object) -> bool: ...

    #: Whether searches on this connection count as uses (False on a read-only store).
    record_uses: bool = False
    _uses_pending: dict[str, list[int]]

    def _note_uses(self, entry_ids: Iterable[str]) -> None:
        """Count one use of each entry (a search returned them); written with the next write."""
        if not self.record_uses:
            return
        now = int(time.time())
        pending = self._uses_pending
        for entry_id in entry_ids:
            use = pending.get(entry_id)
            if use is None:
                pending[entry_id] = [1, now]
            else:
                use[0] += 1
                use[1] = now
        if len(pending) >= FLUSH_AT and not self._in_tx:
            with self.atomic():  # its commit writes them (_write_uses)
                pass

    def _write_uses(self) -> None:
        """Inside a write transaction, before its commit: write the uses noted so far (the entries still
        live; one gone since its search is skipped)."""
        pending = self._uses_pending
        if not pending:
            return
        self._add_use_rows([(hits, last, entry_id) for entry_id, (hits, last) in pending.items()])
        pending.clear()

    def _add_use_rows(self, rows: list[tuple[int, int, str]]) -> None:
        """Inside a write transaction: add ``(uses, last, id)`` to each entry's row (an id no longer in
        the store writes nothing)."""
        self._db.conn.executemany(
            "INSERT INTO uses (seq, hits, last) SELECT seq, ?, ? FROM entries WHERE id = ? "
            "ON CONFLICT(seq) DO UPDATE SET hits = hits + excluded.hits, last = MAX(last, excluded.last)", rows)

    def _flush_uses(self) -> None:
        """Write the uses noted so far in a transaction of their own (at close)."""
        if self._uses_pending and not self.read_only and not self._in_tx:
            with self.atomic():
                pass

    def add_uses(self, uses: Mapping[str, tuple[int, int]]) -> int:
        """Count uses made elsewhere: ``{id: (uses, last use in unix seconds)}`` of live entries (what an
        import carries, such as A-MEM's ``retrieval_count`` and ``last_accessed``), added to what the
        store counted; in the current transaction, or one of their own. Returns the entries counted.

        A count below 0, or an id not in the store, is an error, and nothing is written."""
        if self.read_only:
            raise StoreReadOnlyError("the store is open read-only; it records no uses")
        rows = []
        for entry_id, use in uses.items():
            hits, last = use
            if isinstance(hits, bool) or not isinstance(hits, int) or hits < 0 or isinstance(last, bool) \
                    or not isinstance(last, int) or last < 0:
                raise InvalidEntryError(f"uses of {entry_id!r} must be whole numbers >= 0, got {use!r}")
            if hits:
                rows.append((hits, last, entry_id))
        with self._lock, self.atomic():
            missing = [entry_id for _h, _l, entry_id in rows if entry_id not in self]
            if missing:
                raise EntryNotFoundError(f"no entry {missing[0]!r} to count uses of")
            self._add_use_rows(rows)
        return len(rows)

    def uses(self, entry_ids: Iterable[str] | None = None) -> dict[str, tuple[int, int]]:
        """``{id: (uses, last use in unix seconds)}`` of live entries a search returned (of ``entry_ids``,
        or of all), with the uses noted on this connection and not yet written."""
        wanted = None if entry_ids is None else set(entry_ids)
        out: dict[str, tuple[int, int]] = {}
        with self._lock:
            for entry_id, hits, last in self._db.conn.execute(
                    "SELECT e.id, u.hits, u.last FROM uses u JOIN entries e ON e.seq = u.seq ORDER BY u.seq"):
                if wanted is None or entry_id in wanted:
                    out[entry_id] = (int(hits), int(last))
            for entry_id, (hits, last) in self._uses_pending.items():
                if wanted is not None and entry_id not in wanted:
                    continue
                before = out.get(entry_id)
                if before is None and entry_id not in self:
                    continue  # removed since its search
                out[entry_id] = (hits, last) if before is None else (before[0] + hits, max(before[1], last))
        return out
