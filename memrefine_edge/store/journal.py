"""The run journal: decisions, their effects, and the history that undoes them.

A :class:`RunJournal` belongs to its :class:`~memrefine_edge.store.MemoryStore`
(``store.journal``) and works on the store's connection through it; nothing
else touches those tables.

:meth:`RunJournal.apply` (and ``apply_evict``) makes one decision durable in ONE transaction: the
change to the memory (entries removed, entry created, links pruned), the
copies of what was removed (``history`` / ``history_links``), the decision row
(the audit log) and the run's cursor. A crash at any moment therefore leaves
either the state before the decision or the state after it, never a half, and
resuming continues from the cursor.

What the history keeps until ``purge_history``: the full text, keywords,
timestamps, metadata, provenance and insertion number of every entry a
decision removed, and every link that went with it; not its embedding, which
is recomputed for an entry undo brings back. The decisions table (the audit
log) keeps ids, sizes, actions, reasons and merge instructions; a purge
blanks the reasons and merge instructions (free text that can quote what was
removed) and keeps the rest, since it is how a user reviews what was done.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from ..decision import Decision
from ..entry import Entry
from ..errors import (
    HistoryPurgedError,
    JournalConflictError,
    LaterRunError,
    RunAlreadyUndoneError,
    RunNotFoundError,
    StoreFullError,
    UndoConflictError,
)
from .schema import ENTRY_COLUMNS

if TYPE_CHECKING:  # pragma: no cover
    import sqlite_utils

    from .core import MemoryStore

__all__ = ["RunJournal", "RunInfo", "DecisionRecord", "Effect"]



def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Effect:
    """What one applied decision changed: entries removed and created, and the size before it."""

    removed: tuple[str, ...]
    created: tuple[str, ...]
    size_before: int


@dataclass(frozen=True)
class RunInfo:
    """One compression run as recorded."""

    run_id: str
    started_at: str
    finished_at: str | None
    status: str
    method: str
    params: dict[str, Any]
    cursor: int
    report: dict[str, Any] | None


@dataclass(frozen=True)
class DecisionRecord:
    """One audited decision."""

    run_id: str
    step: int
    a_id: str | None
    b_id: str | None
    similarity: float | None
    action: str
    target: str | None
    source: str
    reason: str
    merge_instruction: str
    created_ids: list[str]
    removed_ids: list[str]
    size_before: int
    size_after: int
    latency_ms: float
    at: str


class RunJournal:
    """Runs, decisions, preserved pairs and undo history of one store."""

    def __init__(self, store: "MemoryStore", db: "sqlite_utils.Database") -> None:
        self._store = store
        self._db = db

    # --- runs ----------------------------------------------------------------

    def start_run(self, method: str, params: dict[str, Any]) -> str:
        """Record a new run (status ``running``) and return its id."""
        run_id = time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)
        with self._store.atomic():
            self._db.conn.execute(
                "INSERT INTO runs (run_id, started_at, status, method, params) VALUES (?, ?, 'running', ?, ?)",
                (run_id, _now(), method, json.dumps(params, sort_keys=True)),
            )
        return run_id

    def finish_run(self, run_id: str, report: dict[str, Any]) -> None:
        """Mark a run done and store its end report."""
        with self._store.atomic():
            self._db.conn.execute(
                "UPDATE runs SET status = 'done', finished_at = ?, report = ? WHERE run_id = ?",
                (_now(), json.dumps(report), run_id),
            )

    def run(self, run_id: str) -> RunInfo:
        """One run; :class:`RunNotFoundError` if unknown."""
        row = self._db.conn.execute(
            "SELECT run_id, started_at, finished_at, status, method, params, cursor, report FROM runs WHERE run_id = ?",
            (run_id,),
        ).fetchone()
        if row is None:
            raise RunNotFoundError(f"no run {run_id!r} in this store (see `memrefine log`)")
        return _run_info(row)

    def runs(self) -> list[RunInfo]:
        """All runs, oldest first."""
        rows = self._db.conn.execute(
            "SELECT run_id, started_at, finished_at, status, method, params, cursor, report FROM runs"
            " ORDER BY started_at, rowid"
        ).fetchall()
        return [_run_info(r) for r in rows]

    def unfinished_run(self) -> RunInfo | None:
        """The run that was interrupted, if any (there is at most one: runs are locked)."""
        unfinished = [r for r in self.runs() if r.status == "running"]
        return unfinished[-1] if unfinished else None

    def decisions(self, run_id: str | None = None) -> list[DecisionRecord]:
        """Audited decisions, of one run or of all, in order."""
        sql = (
            "SELECT run_id, step, a_id, b_id, similarity, action, target, source, reason, merge_instruction,"
            " created_ids, removed_ids, size_before, size_after, latency_ms, at FROM decisions"
        )
        args: tuple[Any, ...] = ()
        if run_id is not None:
            self.run(run_id)
            sql += " WHERE run_id = ?"
            args = (run_id,)
        rows = self._db.conn.execute(sql + " ORDER BY rowid", args).fetchall()
        return [
            DecisionRecord(run_id=r[0], step=r[1], a_id=r[2], b_id=r[3], similarity=r[4], action=r[5], target=r[6],
                           source=r[7], reason=r[8], merge_instruction=r[9], created_ids=json.loads(r[10]),
                           removed_ids=json.loads(r[11]), size_before=r[12], size_after=r[13], latency_ms=r[14],
                           at=r[15])
            for r in rows
        ]

    def evicted_links(self, run_id: str) -> list[tuple[str, str]]:
        """Links (``src, dst``) that the evictions of ``run_id`` removed, from the undo history."""
        return [(r[0], r[1]) for r in self._db.conn.execute(
            "SELECT h.src, h.dst FROM history_links h JOIN decisions d ON d.run_id = h.run_id AND d.step = h.step"
            " WHERE h.run_id = ? AND d.action = 'evict' ORDER BY h.rowid",
            (run_id,),
        )]

    def preserved_pairs(self) -> list[tuple[str, str]]:
        """Pairs judged preserve (either order is the same pair)."""
        return [(r[0], r[1]) for r in self._db.conn.execute("SELECT a_id, b_id FROM preserved")]

    # --- applying decisions --------------------------------------------------

    def _snapshot(self, run_id: str, step: int, entry_id: str) -> None:
        """Copy an entry into history before it is removed: every field undo restores, not its embedding.

        The embedding (1,536 bytes at 384 float32 dimensions, often more than the entry) is recomputable:
        an entry undo brings back is embedded again by the next compression or search.
        """
        conn = self._db.conn
        kept = ENTRY_COLUMNS.replace("embedding, embedding_model, embedded_hash", "NULL, NULL, NULL")
        conn.execute(
            f"INSERT INTO history (run_id, step, {ENTRY_COLUMNS}) SELECT ?, ?, {kept} FROM entries WHERE id = ?",
            (run_id, step, entry_id),
        )

    def _remove(self, run_id: str, step: int, entry_id: str) -> None:
        self._snapshot(run_id, step, entry_id)
        for src, dst, ord_ in self._store.remove(entry_id):
            self._db.conn.execute(
                "INSERT INTO history_links (run_id, step, src, dst, ord) VALUES (?, ?, ?, ?, ?)",
                (run_id, step, src, dst, ord_),
            )

    def _record(
        self,
        run_id: str,
        step: int,
        *,
        pair: tuple[str | None, str | None, float | None],
        action: str,
        target: str | None,
        source: str,
        reason: str,
        merge_instruction: str,
        effect: "Effect",
        metric: str,
        latency_ms: float,
    ) -> None:
        conn = self._db.conn
        conn.execute(
            "INSERT INTO decisions (run_id, step, a_id, b_id, similarity, action, target, source, reason,"
            " merge_instruction, created_ids, removed_ids, size_before, size_after, latency_ms, at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                run_id, step, pair[0], pair[1], pair[2], action, target, source, reason, merge_instruction,
                json.dumps(list(effect.created)), json.dumps(list(effect.removed)), effect.size_before,
                self._store.running_size(metric), float(latency_ms), _now(),
            ),
        )
        cur = conn.execute("UPDATE runs SET cursor = ? WHERE run_id = ? AND cursor = ?", (step + 1, run_id, step))
        if cur.rowcount != 1:  # a second writer or a replayed step: refuse rather than double-apply
            raise JournalConflictError(f"run {run_id}: step {step} is out of order (journal cursor moved)")

    def _require(self, *entry_ids: str) -> None:
        # Removed by another connection since the pair was proposed: nothing to apply.
        for entry_id in entry_ids:
            if entry_id not in self._store:
                self._store.get(entry_id)  # raises EntryNotFoundError

    def apply(
        self, run_id: str, step: int, pair: tuple[str, str, float], decision: Decision, *, metric: str,
        merged: Entry | None = None, embedding: np.ndarray | None = None, model_id: str = "",
        latency_ms: float = 0.0,
    ) -> "Effect":
        """Make one decision durable: its change to the memory, the undo history, the audit row and the cursor.

        All in one transaction. ``delete`` removes the pair's ``decision.target``
        entry; ``merge`` replaces both by ``merged`` (with its fresh
        ``embedding`` of ``model_id``), redirecting the links other entries had
        to either side; ``preserve`` records the pair so it is never proposed
        again. Returns what changed. :class:`EntryNotFoundError` (nothing
        written) if an entry of the pair is gone.
        """
        a_id, b_id, _ = pair
        with self._store.atomic():
            self._require(a_id, b_id)
            before = self._store.running_size(metric)
            if decision.action == "delete":
                target_id = a_id if decision.target == "a" else b_id
                self._remove(run_id, step, target_id)
                effect = Effect(removed=(target_id,), created=(), size_before=before)
            elif decision.action == "merge":
                if merged is None or embedding is None:
                    raise ValueError("a merge needs the merged entry and its embedding")
                self._merge(run_id, step, a_id, b_id, merged, embedding, model_id)
                effect = Effect(removed=(a_id, b_id), created=(merged.id,), size_before=before)
            else:
                lo, hi = sorted((a_id, b_id))
                self._db.conn.execute(
                    "INSERT OR IGNORE INTO preserved (a_id, b_id, run_id) VALUES (?, ?, ?)", (lo, hi, run_id)
                )
                effect = Effect(removed=(), created=(), size_before=before)
            self._record(
                run_id, step, pair=pair, action=decision.action,
                target=effect.removed[0] if decision.action == "delete" else None, source=decision.source,
                reason=decision.reason, merge_instruction=decision.merge_instruction if decision.action == "merge"
                else "", effect=effect, metric=metric, latency_ms=latency_ms,
            )
        return effect

    def _merge(self, run_id: str, step: int, a_id: str, b_id: str, merged: Entry, embedding: np.ndarray,
               model_id: str) -> None:
        conn = self._db.conn
        incoming = [
            r[0] for r in conn.execute(
                "SELECT DISTINCT src FROM links WHERE dst IN (?, ?) AND src NOT IN (?, ?) ORDER BY src",
                (a_id, b_id, a_id, b_id),
            )
        ]
        self._remove(run_id, step, a_id)
        self._remove(run_id, step, b_id)
        self._store.add(merged, unknown_links="drop")
        self._store.set_embedding(merged.id, embedding, model_id)
        redirected = []
        for src in incoming:
            next_ord = conn.execute("SELECT COALESCE(MAX(ord) + 1, 0) FROM links WHERE src = ?", (src,)).fetchone()[0]
            redirected.append((src, merged.id, next_ord))
        self._store.add_links(redirected)

    def apply_evict(self, run_id: str, step: int, entry_id: str, *, reason: str, metric: str) -> None:
        """Strict-budget eviction of one entry, audited like any decision."""
        with self._store.atomic():
            before = self._store.running_size(metric)
            self._remove(run_id, step, entry_id)
            self._record(
                run_id, step, pair=(entry_id, None, None), action="evict", target=entry_id, source="evict",
                reason=reason, merge_instruction="", effect=Effect(removed=(entry_id,), created=(), size_before=before),
                metric=metric, latency_ms=0.0,
            )

    # --- undo and purge ------------------------------------------------------

    def undo(self, run_id: str) -> int:
        """Restore the store exactly as it was before ``run_id``; returns decisions undone.

        Only the latest run that is not yet undone can be undone (a later run
        may have built on this one's results), and only while its history is
        kept (see :meth:`purge_history`).
        """
        info = self.run(run_id)
        if info.status == "undone":
            raise RunAlreadyUndoneError(f"run {run_id} is already undone")
        later = self._db.conn.execute(
            "SELECT run_id FROM runs WHERE rowid > (SELECT rowid FROM runs WHERE run_id = ?)"
            " AND status != 'undone' ORDER BY rowid DESC LIMIT 1",
            (run_id,),
        ).fetchone()
        if later:
            raise LaterRunError(f"run {later[0]} came after {run_id}; undo it first")
        if self._store.get_meta(f"purged:{run_id}"):
            raise HistoryPurgedError(f"the history of run {run_id} was purged; it cannot be undone")
        conn = self._db.conn
        decisions = self.decisions(run_id)
        with self._store.atomic():
            # An id the run removed may have been added again since (by the app):
            # restoring it would collide. Refuse before changing anything.
            created = {c for d in decisions for c in d.created_ids}
            taken = [r[0] for r in conn.execute(
                "SELECT DISTINCT h.id FROM history h JOIN entries e ON e.id = h.id WHERE h.run_id = ? ORDER BY h.id",
                (run_id,),
            ) if r[0] not in created]
            if taken:
                more = f" and {len(taken) - 5} more" if len(taken) > 5 else ""
                shown = ", ".join(repr(t) for t in taken[:5]) + more
                raise UndoConflictError(
                    f"cannot undo run {run_id}: entries added since it ran use ids it removed ({shown}); "
                    "remove or rename those entries, then undo again. Nothing was changed"
                )
            for d in reversed(decisions):
                for created_id in d.created_ids:
                    if created_id in self._store:
                        self._store.remove(created_id)
                rows = conn.execute(
                    f"SELECT {ENTRY_COLUMNS} FROM history WHERE run_id = ? AND step = ? ORDER BY seq",
                    (run_id, d.step),
                ).fetchall()
                self._store.reinsert(rows)
                links = conn.execute(
                    "SELECT src, dst, ord FROM history_links WHERE run_id = ? AND step = ? ORDER BY rowid",
                    (run_id, d.step),
                ).fetchall()
                self._store.add_links(links)
            conn.execute("DELETE FROM preserved WHERE run_id = ?", (run_id,))
            conn.execute("DELETE FROM history WHERE run_id = ?", (run_id,))
            conn.execute("DELETE FROM history_links WHERE run_id = ?", (run_id,))
            conn.execute("UPDATE runs SET status = 'undone', finished_at = ? WHERE run_id = ?", (_now(), run_id))
        return len(decisions)

    def purge_history(self) -> int:
        """Drop every removed entry kept for undo, scrub the audit log's free text, return the space.

        The history of removed entries goes, and so do the decisions'
        ``reason`` and ``merge_instruction`` (free text from the judge and the
        fact guard that can quote a removed entry); the audit log keeps ids,
        actions, sources, similarities and sizes. With ``secure_delete`` on,
        SQLite overwrites the freed content; the VACUUM that follows rebuilds
        the file without the freed pages, so the removed text is gone from the
        file's bytes. Purged runs can no longer be undone.

        An interrupted (or still running) run is left alone: resuming it
        needs its history. Returns entries purged.
        """
        need, folders = self._store.vacuum_room()
        for folder, free in folders:  # checked first: a purge that cannot VACUUM would leave the space unreturned
            if free < need:
                raise StoreFullError(
                    f"purge-history needs about {need:,} bytes free in {folder} for its VACUUM (the size of "
                    f"{self._store.path.name}); it has {free:,}: free {need - free:,} bytes more there, then "
                    "retry. Nothing was changed"
                )
        conn = self._db.conn
        with self._store.atomic():
            unfinished = self.unfinished_run()
            # SQL's "!= NULL" is never true: a run id no run has stands for "none kept".
            keep = unfinished.run_id if unfinished is not None else ""
            n = conn.execute("SELECT COUNT(*) FROM history WHERE run_id != ?", (keep,)).fetchone()[0]
            for (run_id,) in conn.execute("SELECT DISTINCT run_id FROM history WHERE run_id != ?", (keep,)).fetchall():
                conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (f"purged:{run_id}", _now()))
            conn.execute("DELETE FROM history WHERE run_id != ?", (keep,))
            conn.execute("DELETE FROM history_links WHERE run_id != ?", (keep,))
            conn.execute("UPDATE decisions SET reason = '', merge_instruction = ''"
                         " WHERE run_id != ? AND (reason != '' OR merge_instruction != '')", (keep,))
        self._store.vacuum()
        return n


def _run_info(row: Sequence[Any]) -> RunInfo:
    return RunInfo(
        run_id=row[0], started_at=row[1], finished_at=row[2], status=row[3], method=row[4],
        params=json.loads(row[5]), cursor=row[6], report=json.loads(row[7]) if row[7] else None,
    )
