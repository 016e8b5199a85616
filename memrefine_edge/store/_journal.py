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
is recomputed for an entry undo brings back. Each of those fields is stored
packed when that is shorter (:func:`pack_field`, migration 0009). The audit log (table ``audit``,
readable as the view ``decisions``) keeps ids, sizes, actions, reasons and
merge instructions of every decision that changed the memory (delete, merge,
evict); a purge blanks the reasons and merge instructions (free text that can
quote what was removed) and keeps the rest, since it is how a user reviews
what was done.

A preserve changes nothing and writes no audit row (migration 0011): its pair
is one row of ``preserves`` (the two entries' insertion numbers and the run:
never proposed again), and the run counts it by source (``runs.preserved``,
:meth:`RunJournal.preserve_counts`), which its report shows. So the file grows
with the entries and their undo history, not with the pairs judged: a store of
distinct facts where every pair is judged and kept costs about 12 bytes a pair,
not an audit row of about 60. The one exception is a delete a method deferred
(a preserve of source ``deferred``, see :meth:`RunJournal.deferrals`): a delete
kept for later, audited like one, its reason naming what it would delete. Steps
number every decision, and a run's cursor is its next step: each step is an
audit row or a counted preserve. The pairs of an entry a decision removed move
with it into its row of the undo history (migration 0015: a pass only asks
about pairs of live entries), come back with it at undo and go with it at
``purge_history``; those of an entry removed outside a run stay in ``preserves``
until the purge.

The audit log is compact (migration 0006): ids, actions and sources are
interned once in ``strings`` and referenced by number, the run by its number,
the time in unix seconds, the latency in whole microseconds, and what the
action implies (the ids a delete or merge removed) is not stored again. Free
text is stored packed (:func:`pack_text`: raw deflate with a fixed dictionary
of the judges' wording) when that is shorter.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from memrefine_edge.core import (
    Decision,
    Entry,
    HistoryPurgedError,
    JournalConflictError,
    LaterRunError,
    RunAlreadyUndoneError,
    RunNotFoundError,
    StoreFullError,
    UndoConflictError,
    stored_hash,
)

from ._judged import kept_pairs, put_back_pairs, take_pairs
from ._packing import pack_field, pack_text, unpack_text
from ._records import DecisionRecord, Effect, RunInfo, run_info

if TYPE_CHECKING:  # pragma: no cover
    import sqlite_utils

    from ._protocols import JournalStore

__all__ = ["RunJournal", "RunInfo", "DecisionRecord", "Effect", "pack_field", "pack_text", "unpack_text"]



def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class RunJournal:
    """Runs, decisions, preserved pairs and undo history of one store."""

    def __init__(self, store: "JournalStore", db: "sqlite_utils.Database") -> None:
        self._store = store
        self._db = db
        self._run_nums: dict[str, int] = {}  # committed by start_run, never deleted: safe to keep

    def _run_num(self, run_id: str) -> int:
        num = self._run_nums.get(run_id)
        if num is None:
            row = self._db.conn.execute("SELECT num FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if row is None:
                raise RunNotFoundError(f"no run {run_id!r} in this store (see `memrefine log`)")
            num = self._run_nums[run_id] = int(row[0])
        return num

    def _string(self, text: str | None) -> int | None:
        """The number of ``text`` in ``strings`` (added if new; inside the caller's transaction)."""
        return None if text is None else self._store.string_num(text, add=True)

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
            "SELECT run_id, started_at, finished_at, status, method, params, cursor, report, preserved FROM runs"
            " WHERE run_id = ?",
            (run_id,),
        ).fetchone()
        if row is None:
            raise RunNotFoundError(f"no run {run_id!r} in this store (see `memrefine log`)")
        return run_info(row)

    def runs(self) -> list[RunInfo]:
        """All runs, oldest first."""
        rows = self._db.conn.execute(
            "SELECT run_id, started_at, finished_at, status, method, params, cursor, report, preserved FROM runs"
            " ORDER BY started_at, rowid"
        ).fetchall()
        return [run_info(r) for r in rows]

    def unfinished_run(self) -> RunInfo | None:
        """The run that was interrupted, if any (there is at most one: runs are locked)."""
        unfinished = [r for r in self.runs() if r.status == "running"]
        return unfinished[-1] if unfinished else None

    def decisions(self, run_id: str | None = None) -> list[DecisionRecord]:
        """Audited decisions (deletes, merges, evictions), of one run or of all, in order.

        A preserve decision has no audit row (but a deferred delete, ``source="deferred"``): it is
        counted (:meth:`preserve_counts`) and its pair kept (:meth:`preserved_pairs`). Steps number
        every decision, so a run's audited steps have gaps where it preserved: its cursor is its
        audited decisions plus its counted preserves.
        """
        # Through the `decisions` view (migration 0006): the one definition of how an audit
        # row reads back, with the ids its action implies filled in and times as ISO text.
        sql = (
            "SELECT run_id, step, a_id, b_id, similarity, action, target, source, reason, merge_instruction,"
            " created_ids, removed_ids, size_before, size_after, latency_ms, at FROM decisions"
        )
        args: tuple[Any, ...] = ()
        if run_id is not None:  # the run's rows are one range of the audit log's key (migration 0013)
            sql += " WHERE rowid BETWEEN ? AND ?"
            args = _run_keys(self._run_num(self.run(run_id).run_id))
        rows = self._db.conn.execute(sql + " ORDER BY rowid", args).fetchall()
        return [
            DecisionRecord(run_id=r[0], step=r[1], a_id=r[2], b_id=r[3], similarity=r[4], action=r[5], target=r[6],
                           source=r[7], reason=unpack_text(r[8]), merge_instruction=unpack_text(r[9]),
                           created_ids=json.loads(r[10]), removed_ids=json.loads(r[11]), size_before=r[12],
                           size_after=r[13], latency_ms=r[14], at=r[15])
            for r in rows
        ]

    def _removed(self, run: int, step: int) -> list[tuple[tuple[Any, ...], list[tuple[str, str, int]]]]:
        """The entry rows (all of :data:`ENTRY_COLUMNS`, as undo puts them back) a step removed, in its
        order, each with the links removed with it (``src, dst, ord``)."""
        lo = _history_key(run, step, 0)
        out = []
        for row in self._db.conn.execute(
                f"SELECT {_KEPT_COLUMNS}, links FROM removals WHERE k BETWEEN ? AND ? ORDER BY k", (lo, lo + 7)):
            seq, entry_id, *packed, json_bytes, links = row
            content, keywords, timestamps, metadata, provenance = (unpack_text(v) for v in packed)
            links = unpack_text(links) if links is not None else None
            full = (seq, entry_id, content, keywords, timestamps, metadata, provenance, stored_hash(content),
                    json_bytes, None, None, None)
            out.append((full, [(entry_id if src is None else src, entry_id if dst is None else dst, int(ord_))
                               for src, dst, ord_ in json.loads(links or "[]")]))
        return out

    def id_in_use(self, entry_id: str) -> bool:
        """Whether ``entry_id`` is live or named by the audit log (an entry some decision judged in a
        delete or merge, removed or created, which undo may bring back): an id a new merged entry must not take."""
        return entry_id in self._store or self._store.string_num(entry_id) is not None

    def preserve_counts(self, run_id: str) -> dict[str, int]:
        """How many preserve decisions ``run_id`` took that have no audit row (all but the deferred
        deletes, which :meth:`decisions` lists), by source (``{}`` for none)."""
        return self.run(run_id).preserved

    def removed_bytes(self, run_id: str) -> dict[str, int]:
        """The bytes (in the run's metric) ``run_id``'s audited decisions removed, by action: ``delete``
        (deferred deletes included), ``merge`` and ``evict``; an action it never took is absent."""
        rows = self._db.conn.execute(
            "SELECT s.text, SUM(d.size_before - d.size_after) FROM audit d JOIN strings s ON s.num = d.action"
            " WHERE d.k BETWEEN ? AND ? GROUP BY s.text ORDER BY s.text", _run_keys(self._run_num(run_id))).fetchall()
        return {str(action): int(n or 0) for action, n in rows}

    def preserved_pairs(self) -> list[tuple[str, str]]:
        """Pairs judged preserve whose entries are live or kept by the undo history: ``(a_id, b_id)``,
        ``a_id < b_id``, sorted (either order is the same pair)."""
        conn = self._db.conn
        names = {int(seq): entry_id for seq, entry_id in conn.execute("SELECT seq, id FROM removals ORDER BY k")}
        names.update((int(seq), entry_id) for seq, entry_id in conn.execute("SELECT seq, id FROM entries"))
        pairs = ((names.get(a), names.get(b)) for a, b in kept_pairs(conn))
        return sorted({(min(x, y), max(x, y)) for x, y in pairs if x is not None and y is not None})

    def is_preserved(self, a_id: str, b_id: str) -> bool:
        """Whether the pair of these two live entries was judged preserve (never proposed again)."""
        seqs = sorted(int(r[0]) for r in self._db.conn.execute(
            "SELECT seq FROM entries WHERE id IN (?, ?)", (a_id, b_id)))
        return len(seqs) == 2 and self._db.conn.execute(
            "SELECT 1 FROM preserves WHERE a = ? AND b = ?", seqs).fetchone() is not None

    def deferrals(self, *, live: bool = False) -> list[tuple[str, str, float]]:
        """Pairs preserved with ``source="deferred"`` by any run not undone: ``(a_id, b_id, similarity)``.

        In the order they were decided (run, then step). ``live=True``: only
        those whose two entries are both live, the deletes a run may still
        take (see :class:`~memrefine_edge.engine._compressor.Compressor`). Purging
        the history keeps them, as it keeps the preserved pairs.
        """
        sql = ("SELECT sa.text, sb.text, d.similarity FROM deferrals d "
               "JOIN strings sa ON sa.num = d.a JOIN strings sb ON sb.num = d.b ")
        if live:
            sql += "JOIN entries ea ON ea.id = sa.text JOIN entries eb ON eb.id = sb.text "
        return [(r[0], r[1], float(r[2])) for r in self._db.conn.execute(sql + "ORDER BY d.run, d.step")]

    def live_preserved_pairs(self, *, after_seq: int = 0, chunk: int = 4096) -> Iterator[tuple[str, str]]:
        """Preserved pairs whose two entries are both live, streamed ``chunk`` rows per query; with
        ``after_seq``, only those with an entry inserted after it (a live pass's changed entries).

        What a pair queue needs on resume: after a long run most preserved pairs name a
        removed entry, and a list of all of them as string tuples, held during the queue
        build, grows with the run. Each chunk is its own short query, so a write between
        two chunks is safe; pairs that one removes stop showing up, and the queue ignores
        any pair that names an entry it was not given.
        """
        conn, last = self._db.conn, (-(1 << 63), -(1 << 63))
        while True:
            rows = conn.execute(
                "SELECT p.a, p.b, ea.id, eb.id FROM preserves p "
                "JOIN entries ea ON ea.seq = p.a JOIN entries eb ON eb.seq = p.b "
                "WHERE (p.a, p.b) > (?, ?) AND p.b > ? ORDER BY p.a, p.b LIMIT ?",
                (*last, int(after_seq), int(chunk))).fetchall()
            for row in rows:
                yield row[2], row[3]
            if len(rows) < chunk:
                return
            last = (rows[-1][0], rows[-1][1])

    # --- applying decisions --------------------------------------------------

    def _remove(self, run_id: str, step: int, entry_id: str, nth: int = 0) -> int:
        """Remove an entry, keeping in the undo history what undo restores (``nth``: its place in the step);
        returns its insertion number.

        Kept: every field of the row but the content hash (recomputed from the content) and the
        embedding (1,536 bytes at 384 float32 dimensions, often more than the entry: an entry undo
        brings back is embedded again by the next compression or search), and the links removed
        with it.
        """
        conn = self._db.conn
        row = conn.execute(f"SELECT {_KEPT_COLUMNS} FROM entries WHERE id = ?", (entry_id,)).fetchone()
        if row is None:
            self._store.get(entry_id)  # raises EntryNotFoundError
        links = self._store.links_touching(entry_id)
        packed = json.dumps([[None if src == entry_id else src, None if dst == entry_id else dst, ord_]
                             for src, dst, ord_ in links], ensure_ascii=False, separators=(",", ":"))
        seq, kept_id, *fields, json_bytes = row
        # The copy is written first: the history needs its room before the removal frees any. The
        # pairs judged of the entry go with it (migration 0015): only live pairs are ever asked about.
        conn.execute(f"INSERT INTO removals (k, {_KEPT_COLUMNS}, links, pairs) VALUES ({', '.join('?' * 11)})",
                     (_history_key(self._run_num(run_id), step, nth), seq, kept_id,
                      *(pack_field(f) for f in fields), json_bytes, pack_field(packed) if links else None,
                      take_pairs(conn, int(seq))))
        self._store.remove(entry_id)
        return int(seq)

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
        s = self._string
        created = list(effect.created)
        made = created[0] if len(created) == 1 else None
        removed = list(effect.removed)
        conn.execute(
            "INSERT INTO audit (k, a, b, similarity, action, target, made, source, reason, merge_instruction,"
            " size_before, size_after, latency_us, at, removed_ids, created_ids)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                _audit_key(self._run_num(run_id), step), s(pair[0]), s(pair[1]), pair[2], s(action), s(target), s(made),
                s(source), pack_text(reason), pack_text(merge_instruction), effect.size_before,
                self._store.running_size(metric), round(float(latency_ms) * 1000), int(time.time()),
                None if removed == _implied_removed(action, pair[0], pair[1], target) else json.dumps(removed),
                None if created == ([made] if made is not None else []) else json.dumps(created),
            ),
        )
        self._advance(run_id, step)

    def _advance(self, run_id: str, step: int, *, preserved: str | None = None) -> None:
        """Move the run's cursor past ``step`` (and first count a preserve of source ``preserved``).

        The cursor's update is the decision's last write, the same statement for every kind."""
        conn = self._db.conn
        if preserved is not None:  # a source is a plain word (core.SOURCES): a JSON path as it is
            conn.execute("UPDATE runs SET preserved = json_set(COALESCE(preserved, '{}'), ?,"
                         " COALESCE(json_extract(preserved, ?), 0) + 1) WHERE run_id = ?",
                         (f'$."{preserved}"', f'$."{preserved}"', run_id))
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
        again, and counts it with its run (no audit row: see the module docstring).
        Returns what changed. :class:`EntryNotFoundError` (nothing written) if an
        entry of the pair is gone.
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
                # The pair by its entries' numbers (two integers), the count with the run: no audit row.
                self._db.conn.execute(
                    "INSERT OR IGNORE INTO preserves (a, b, run) SELECT MIN(seq), MAX(seq), ? FROM entries"
                    " WHERE id IN (?, ?) HAVING COUNT(*) = 2", (self._run_num(run_id), a_id, b_id),
                )
                effect = Effect(removed=(), created=(), size_before=before)
                if decision.source != "deferred":
                    self._advance(run_id, step, preserved=decision.source)
                    return effect
                # A delete kept for a run that needs the bytes (deferrals()): audited, as a delete is.
                self._db.conn.execute(
                    "INSERT INTO deferrals (run, step, a, b, similarity) VALUES (?, ?, ?, ?, ?)",
                    (self._run_num(run_id), step, self._string(a_id), self._string(b_id), float(pair[2])),
                )
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
        sources = (self._remove(run_id, step, a_id, 0), self._remove(run_id, step, b_id, 1))
        self._store.add(merged, unknown_links="drop")
        self._store.set_embedding(merged.id, embedding, model_id)
        # The merged entry was used as often as its two entries together (migration 0014).
        conn.execute("INSERT INTO uses (seq, hits, last) SELECT (SELECT seq FROM entries WHERE id = ?), SUM(hits),"
                     " MAX(last) FROM uses WHERE seq IN (?, ?) HAVING COUNT(*) > 0", (merged.id, *sources))
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
            run = self._run_num(run_id)
            first, last = _history_key(run, 0, 0), _history_key(run + 1, 0, 0) - 1
            taken = [r[0] for r in conn.execute(
                "SELECT DISTINCT h.id FROM removals h JOIN entries e ON e.id = h.id WHERE h.k BETWEEN ? AND ?"
                " ORDER BY h.id", (first, last),
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
                removed = self._removed(run, d.step)
                self._store.reinsert(sorted((row for row, _ in removed), key=lambda r: r[0]))
                self._store.add_links([link for _, links in removed for link in links])
            put_back_pairs(conn, first, last)  # the pairs judged of what it removed, this run's dropped next
            conn.execute("DELETE FROM preserves WHERE run = ?", (run,))
            conn.execute("DELETE FROM deferrals WHERE run = ?", (run,))
            conn.execute("DELETE FROM removals WHERE k BETWEEN ? AND ?", (first, last))
            conn.execute("UPDATE runs SET status = 'undone', finished_at = ? WHERE run_id = ?", (_now(), run_id))
        return len(decisions)

    def purge_history(self) -> int:
        """Drop every removed entry kept for undo, scrub the audit log's free text, return the space.

        The history of removed entries goes, and so do the decisions'
        ``reason`` and ``merge_instruction`` (free text from the judge and the
        fact guard that can quote a removed entry); the audit log keeps ids,
        actions, sources, similarities and sizes of every decision that changed
        the memory (delete, merge, evict). The preserved pairs of entries no
        longer live nor kept go with them (those of live entries stay: never
        proposed again); each run keeps its count of preserves. With ``secure_delete`` on,
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
            keep_num = self._run_num(keep) if keep else -1
            conn.execute("DELETE FROM removals WHERE k / ? != ?", (_RUN_SPAN, keep_num))
            conn.execute("UPDATE audit SET reason = NULL, merge_instruction = NULL"
                         " WHERE k / ? != ? AND (reason IS NOT NULL OR merge_instruction IS NOT NULL)",
                         (_RUN_SPAN, keep_num))
            # Pairs naming an entry that is neither live nor in the history left: never proposed again.
            kept = "(SELECT seq FROM entries UNION ALL SELECT seq FROM removals)"
            conn.execute(f"DELETE FROM preserves WHERE a NOT IN {kept} OR b NOT IN {kept}")
            conn.execute(f"DELETE FROM uses WHERE seq NOT IN {kept}")
        self._store.vacuum()
        return n

    # --- reading the undo history (change sets) --------------------------------

    def removed_entries(self, run_id: str, step: int) -> list[tuple[Entry, int, list[tuple[str, str, int]]]]:
        """What one step of ``run_id`` removed, as the undo history keeps it, in the step's order.

        Each item: the entry (its ``links`` left empty), its insertion number, and the links removed
        with it (``src, dst, ord``). Empty for a step that removed nothing, a run undone, or a run
        whose history was purged (:meth:`history_purged`). Reads only.
        """
        out = []
        for row, links in self._removed(self._run_num(run_id), step):
            seq, entry_id, content, keywords, timestamps, metadata, provenance = row[:7]
            entry = Entry(id=entry_id, content=content, keywords=tuple(json.loads(keywords)),
                          timestamps=tuple(json.loads(timestamps)), metadata=json.loads(metadata),
                          provenance=tuple(json.loads(provenance)))
            out.append((entry, int(seq), links))
        return out

    def history_purged(self, run_id: str) -> bool:
        """Whether ``purge-history`` dropped what ``run_id`` removed (:class:`RunNotFoundError` if unknown)."""
        return self._store.get_meta(f"purged:{self.run(run_id).run_id}") is not None


#: The undo history's key (migration 0007): runs.num * _RUN_SPAN + step * _STEP_SLOTS + the entry's place in the step.
_RUN_SPAN = 1 << 32
_STEP_SLOTS = 8
#: The columns of an entry row the undo history keeps, in table order.
_KEPT_COLUMNS = "seq, id, content, keywords, timestamps, metadata, provenance, json_bytes"


def _history_key(run: int, step: int, nth: int) -> int:
    if not 0 <= nth < _STEP_SLOTS or not 0 <= step < _RUN_SPAN // _STEP_SLOTS:
        raise ValueError(f"step {step} (entry {nth}) is outside what the undo history can key")
    return run * _RUN_SPAN + step * _STEP_SLOTS + nth


def _audit_key(run: int, step: int) -> int:
    """The audit log's key of a decision (migration 0013): its run's number and its step in one integer."""
    if not 0 <= step < _RUN_SPAN:
        raise ValueError(f"step {step} is outside what the audit log can key")
    return run * _RUN_SPAN + step


def _run_keys(run: int) -> tuple[int, int]:
    """The first and last key of a run's rows in the audit log."""
    return run * _RUN_SPAN, (run + 1) * _RUN_SPAN - 1


def _implied_removed(action: str, a_id: str | None, b_id: str | None, target: str | None) -> list[str]:
    """The ids a decision removed, as its action implies (what the audit log does not store again)."""
    if action == "merge":
        return [a_id, b_id]  # type: ignore[list-item]
    return [target] if target is not None else []
