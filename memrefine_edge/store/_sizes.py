"""Size accounting of a store, both metrics (a part of :class:`~memrefine_edge.store.MemoryStore`).

Every size a compression reads per decision is O(1) (:meth:`SizesMixin.running_size`):

* ``json``: the running total kept by triggers (migration 0004), exact.
* ``disk``: read exactly, the metric visits every page (``dbstat``, O(file)),
  so the loop reads a running estimate instead (migration 0005): the bytes
  of every entry and link row, kept by triggers in the same transaction as
  each change, plus an offset (exact - estimate) set by
  :meth:`SizesMixin.refresh_disk`. A compression refreshes it when it starts
  and whenever the estimate says the budget is met, and goes on if the exact
  size is still above it: the run ends at or under its byte budget measured
  exactly. Between refreshes the error is the per-row overhead mis-estimate on
  the rows changed since (about 1% of their bytes, measured in the tests).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from memrefine_edge.core import Entry, Metric, json_size

from ._schema import MIGRATIONS, entry_row_bytes, link_row_bytes, split_sql

__all__ = ["METRICS", "StoreStats", "SizesMixin"]

#: The size metrics, by name (:class:`~memrefine_edge.core.Metric`).
METRICS: tuple[str, ...] = tuple(m.value for m in Metric)
_MEMORY_TABLES = ("entries", "links", "links_dst", "sqlite_autoindex_entries_1", "entries_json_bytes")
_HISTORY_TABLES = ("removals",)  # the undo history (migration 0007): one table, no index of its own
#: The running disk estimate of one entry row and one link row (the definition migration 0005's triggers use).
_ROW_ESTIMATE = entry_row_bytes()
_LINK_ESTIMATE = link_row_bytes()


@dataclass(frozen=True)
class StoreStats:
    """What ``memrefine stats`` reports."""

    entries: int
    json_bytes: int
    disk_bytes: int
    embedding_bytes: int
    embedded: int
    links: int
    file_bytes: int
    overhead_bytes: int
    history_entries: int
    #: Bytes the undo history takes in the file (its tables and index, dbstat).
    history_bytes: int = 0
    #: ``history_bytes / history_entries`` (0 without history): what undo costs per removed entry.
    history_bytes_per_entry: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


class SizesMixin:
    """The size methods of :class:`~memrefine_edge.store.MemoryStore` (its connection, its entries)."""

    if TYPE_CHECKING:  # provided by MemoryStore
        _db: Any

        def get(self, entry_id: str) -> Entry: ...

    def json_bytes(self) -> int:
        """Total size under the ``json`` metric (a running total: O(1))."""
        return int(self._db.conn.execute("SELECT value FROM totals WHERE name = 'json_bytes'").fetchone()[0])

    def recount(self) -> dict[str, dict[str, int]]:
        """The running totals against a full recount: ``{name: {"total": t, "recount": r}}``.

        Every size a decision reads comes from the totals; this is their check
        (``memrefine stats --recount``). ``json_bytes`` is recounted from the
        entries themselves (each entry serialised again), not from stored sizes.
        """
        conn = self._db.conn
        totals = dict(conn.execute("SELECT name, value FROM totals").fetchall())
        entries = list(self.entries())  # type: ignore[attr-defined]
        counted = {"json_bytes": sum(json_size(e) for e in entries), "entries": len(entries),
                   "links": int(conn.execute("SELECT COUNT(*) FROM links").fetchone()[0]),
                   "disk_estimate": int(conn.execute(f"SELECT COALESCE(SUM({_ROW_ESTIMATE}), 0) FROM entries")
                                        .fetchone()[0])
                   + int(conn.execute(f"SELECT COALESCE(SUM({_LINK_ESTIMATE}), 0) FROM links").fetchone()[0])}
        return {k: {"total": int(totals.get(k, -1)), "recount": v} for k, v in counted.items()}

    def running_size(self, metric: str = "json") -> int:
        """Store size under ``metric`` in O(1): exact for ``json``; the running estimate for ``disk``
        (exact at the last :meth:`refresh_disk`, see the module docstring)."""
        if metric == Metric.JSON:
            return self.json_bytes()
        if metric == Metric.DISK:
            row = self._db.conn.execute(
                "SELECT COALESCE(SUM(value), 0) FROM totals WHERE name IN ('disk_estimate', 'disk_offset')"
            ).fetchone()
            return int(row[0])
        raise ValueError(f"unknown metric {metric!r}; use one of {', '.join(METRICS)}")

    def refresh_disk(self) -> int:
        """Measure the disk metric exactly (O(file)), re-anchor the running estimate to it, return it.

        On a store opened read-only nothing is written (the measurement is returned).
        """
        exact = self.disk_bytes()
        if not getattr(self, "read_only", False):
            with self.atomic():  # type: ignore[attr-defined]
                self._db.conn.execute(
                    "UPDATE totals SET value = ? - (SELECT value FROM totals WHERE name = 'disk_estimate')"
                    " WHERE name = 'disk_offset'", (exact,))
        return exact

    def file_bytes(self) -> int:
        """Bytes of the file's pages in use (the file size less its free pages; O(1))."""
        conn = self._db.conn
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
        return int((pages - free) * page_size)

    def disk_bytes(self) -> int:
        """Total size under the ``disk`` metric (used bytes of the memory's pages)."""
        marks = ",".join("?" * len(_MEMORY_TABLES))
        return int(
            self._db.conn.execute(
                f"SELECT COALESCE(SUM(pgsize - unused), 0) FROM dbstat WHERE name IN ({marks})", _MEMORY_TABLES
            ).fetchone()[0]
        )

    def size(self, metric: str = "json") -> int:
        """Store size under ``metric`` (``json`` or ``disk``)."""
        if metric == Metric.JSON:
            return self.json_bytes()
        if metric == Metric.DISK:
            return self.disk_bytes()
        raise ValueError(f"unknown metric {metric!r}; use one of {', '.join(METRICS)}")

    def stats(self) -> StoreStats:
        """Entries, both sizes, embedding bytes, links and bookkeeping overhead."""
        conn = self._db.conn
        n, emb_bytes, embedded = conn.execute(
            "SELECT COUNT(*), COALESCE(SUM(LENGTH(embedding)), 0), COUNT(embedding) FROM entries"
        ).fetchone()
        used_total = self.file_bytes()
        disk = self.disk_bytes()
        marks = ",".join("?" * len(_HISTORY_TABLES))
        history_bytes = int(conn.execute(
            f"SELECT COALESCE(SUM(pgsize - unused), 0) FROM dbstat WHERE name IN ({marks})", _HISTORY_TABLES
        ).fetchone()[0])
        history_entries = int(conn.execute("SELECT COUNT(*) FROM removals").fetchone()[0])
        return StoreStats(
            entries=n,
            json_bytes=self.json_bytes(),
            disk_bytes=disk,
            embedding_bytes=int(emb_bytes),
            embedded=int(embedded),
            links=conn.execute("SELECT COUNT(*) FROM links").fetchone()[0],
            file_bytes=used_total,
            overhead_bytes=max(0, used_total - disk),
            history_entries=history_entries,
            history_bytes=history_bytes,
            history_bytes_per_entry=history_bytes // history_entries if history_entries else 0,
        )

    def min_entry_json_bytes(self) -> int:
        """Smallest store of one entry under the ``json`` metric (0 for an empty store)."""
        ids = [r[0] for r in self._db.conn.execute("SELECT id FROM entries ORDER BY json_bytes, seq LIMIT 3")]
        return min((self.solo_size(i, "json") for i in ids), default=0)

    def min_disk_bytes(self, *, embedding_bytes: int = 0) -> int:
        """``disk`` size of this store reduced to its smallest entry, measured.

        The few smallest entries (by json size plus embedding) are each
        measured alone with :meth:`solo_size`.
        """
        ids = [r[0] for r in self._db.conn.execute(
            "SELECT id FROM entries ORDER BY json_bytes + COALESCE(LENGTH(embedding), ?), seq LIMIT 3",
            (embedding_bytes,),
        )]
        return min((self.solo_size(i, "disk", embedding_bytes=embedding_bytes) for i in ids), default=0)

    def solo_size(self, entry_id: str, metric: str, *, embedding_bytes: int = 0) -> int:
        """Size of a store that holds only this entry (its links to others gone).

        ``json``: the entry's json size without links. ``disk``: the entry is
        written alone into an in-memory database with this schema and page size and
        measured with ``dbstat`` exactly as :meth:`disk_bytes` measures; an
        entry not embedded yet gets a zero blob of ``embedding_bytes``.
        """
        entry = self.get(entry_id)
        if metric == Metric.JSON:
            return json_size(replace(entry, links=()))

        # Every column the row has on disk (the embedding's model and source hash too: ~20 bytes
        # that decided whether a strict disk budget could hold the entry).
        # Its seq as well: index cells hold it, and SQLite stores 0 and 1 in no bytes at all.
        cols = ("id, content, keywords, timestamps, metadata, provenance, content_hash, json_bytes, embedding,"
                " embedding_model, embedded_hash, seq")
        row = list(self._db.conn.execute(f"SELECT {cols} FROM entries WHERE id = ?", (entry_id,)).fetchone())
        if row[8] is None and embedding_bytes:  # as it will be once embedded, by the model the others have
            model = self._db.conn.execute(
                "SELECT embedding_model FROM entries WHERE embedding_model IS NOT NULL LIMIT 1").fetchone()
            row[8:11] = [bytes(embedding_bytes), model[0] if model else "", row[6]]
        mem = sqlite3.connect(":memory:")
        try:
            mem.execute(f"PRAGMA page_size = {int(self._db.conn.execute('PRAGMA page_size').fetchone()[0])}")
            for migration in MIGRATIONS:
                for statement in split_sql(migration.sql):
                    mem.execute(statement)
            mem.execute(f"INSERT INTO entries ({cols}) VALUES ({', '.join('?' * len(row))})", row)
            marks = ",".join("?" * len(_MEMORY_TABLES))
            return int(mem.execute(
                f"SELECT SUM(pgsize - unused) FROM dbstat WHERE name IN ({marks})", _MEMORY_TABLES
            ).fetchone()[0])
        finally:
            mem.close()

    def sizes_after(self, seq: int, metric: str = "json") -> dict[str, int]:
        """``{id: size}`` of the entries inserted after ``seq`` (an index range scan).

        ``json`` sizes are exact; ``disk`` sizes are an estimate per entry (its
        json bytes plus its embedding), since pages are shared between entries.
        """
        if metric not in METRICS:
            raise ValueError(f"unknown metric {metric!r}; use one of {', '.join(METRICS)}")
        extra = " + COALESCE(LENGTH(embedding), 0)" if metric == Metric.DISK else ""
        return {r[0]: int(r[1]) for r in self._db.conn.execute(
            f"SELECT id, json_bytes{extra} FROM entries WHERE seq > ? ORDER BY seq", (int(seq),))}
