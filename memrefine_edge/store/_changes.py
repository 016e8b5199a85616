"""Change sets: what compression runs did to the ids the user imported, as deletes and updates.

A change set lets any memory store (mem0, A-MEM, a file of JSON lines) make
the change a compression made here, without re-importing: applied in order to
the store as it was before the runs, it leaves exactly what
``memrefine export`` writes after them (up to what the format holds, see
:data:`~memrefine_edge.store._export.EXPORT_DROPPED`).

The file is JSON lines. The first line names the change set::

    {"memrefine_changes": 1, "application_id": 1297237318, "store": "<16 hex>",
     "format": "mem0", "runs": ["<run id>", ...], "undone": [...], "operations": 3}

``store`` is derived from the store's first recorded run (its id and start
time), so two stores never share it and a copy of a store keeps it. Every
other line is one operation, in the order to apply them (every update, then every
delete, each in the order decided: a change set stopped half-way leaves a memory twice,
never a merged text without its sources)::

    {"op": "update", "id": "a", "expect": "<sha256>", "group": 1, "text": "...", "metadata": {...},
     "record": {...}, "merged_from": ["a", "b"], "run": "...", "step": 4, "action": "merge",
     "source": "llm", "reason": "..."}
    {"op": "delete", "id": "b", "expect": "<sha256>", "group": 1, "into": "a", "run": "...", ...}

``expect`` is the SHA-256 (hex) of the text the id had before the runs; an
applier checks it first (:func:`plan_changes`) and skips, with the reason, every
operation whose memory is missing or has changed since, together with the other
operations of its ``group`` (the ones that only make sense together, e.g. the
update that carries a merge and the delete of its second source). A ``delete``
the judge took because another memory holds its facts names that memory in
``kept`` (``[id, sha256]``): it must be there, as it was before the runs, for the
delete to be applied.

A merge is an ``update`` of its first source (the id the export uses for the
merged entry, see :mod:`memrefine_edge.store._export`) and a ``delete`` of the
other source with ``into`` naming the first; merges of merges resolve to the
ids the user imported. An update that only changes links (``action``
``"relink"``: a link to a removed entry went with it) appears in the formats
that hold links, in a group of its own: it only rewrites that memory's links.
``record`` is the whole memory in the change set's format, as
``memrefine export --format FORMAT`` writes it.

Undone runs produce no operations. A change set is read from the undo history:
once ``purge-history`` has dropped a run's history, that run -- and every run
before it -- can no longer be described (:class:`ChangeSetError` says so).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from memrefine_edge.core import ChangeSetError, Entry, OptionConflictError, content_hash

from ._export import UserIds, export_record, user_ids, write_atomic
from ._files import APPLICATION_ID

if TYPE_CHECKING:  # pragma: no cover
    from ._core import MemoryStore
    from ._journal import DecisionRecord

__all__ = ["CHANGE_FORMATS", "Change", "ChangeSet", "ChangePlan", "describe_changes", "read_changes",
           "plan_changes", "apply_to_records", "store_identity", "TEXT_FIELD"]

CHANGE_FORMATS = ("jsonl", "mem0", "amem")
#: The field of a record in each format that holds the memory's text.
TEXT_FIELD = {"jsonl": "content", "mem0": "memory", "amem": "content"}
_VERSION = 1
_CHANGING = ("delete", "merge", "evict")


@dataclass(frozen=True)
class Change:
    """One operation of a change set (see the module for the fields)."""

    op: str
    id: str
    expect: str
    group: int
    run: str | None
    step: int | None
    action: str
    source: str
    reason: str
    into: str | None = None
    kept: tuple[str, str] | None = None
    merged_from: tuple[str, ...] = ()
    text: str | None = None
    metadata: dict[str, Any] | None = None
    record: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        """The operation's JSON object (keys left out where they do not apply)."""
        out: dict[str, Any] = {"op": self.op, "id": self.id, "expect": self.expect, "group": self.group}
        if self.op == "update":
            out.update(text=self.text, metadata=self.metadata, record=self.record)
            if self.merged_from:
                out["merged_from"] = list(self.merged_from)
        if self.into is not None:
            out["into"] = self.into
        if self.kept is not None:
            out["kept"] = list(self.kept)
        out.update(run=self.run, step=self.step, action=self.action, source=self.source, reason=self.reason)
        return out


@dataclass(frozen=True)
class ChangeSet:
    """The operations that carry one or more runs over to the store the user imported from."""

    format: str
    store: str | None
    runs: tuple[str, ...]
    undone: tuple[str, ...] = ()
    changes: tuple[Change, ...] = ()

    def header(self) -> dict[str, Any]:
        """The first line of the file."""
        return {"memrefine_changes": _VERSION, "application_id": APPLICATION_ID, "store": self.store,
                "format": self.format, "runs": list(self.runs), "undone": list(self.undone),
                "operations": len(self.changes)}

    def lines(self) -> Iterator[str]:
        """The file, one JSON line at a time (each ends with a newline)."""
        yield json.dumps(self.header(), ensure_ascii=False) + "\n"
        for change in self.changes:
            yield json.dumps(change.as_dict(), ensure_ascii=False) + "\n"

    def write(self, out: str | os.PathLike[str] | IO[str] | None = None) -> None:
        """Write the file to a path (atomically), a text stream, or stdout (None)."""
        write_atomic(sys.stdout if out is None else out, self.lines())

    def counts(self) -> dict[str, int]:
        """Operations by kind: ``delete``, ``update``."""
        out = {"delete": 0, "update": 0}
        for change in self.changes:
            out[change.op] += 1
        return out


@dataclass
class ChangePlan:
    """What an applier does with a change set: the operations to apply, in order, and those it skips."""

    apply: list[Change] = field(default_factory=list)
    skipped: list[tuple[Change, str]] = field(default_factory=list)


def store_identity(store: "MemoryStore") -> str | None:
    """A store's identity in change sets: 16 hex digits from its first run's id and start time (None: no runs)."""
    runs = store.journal.runs()
    if not runs:
        return None
    first = runs[0]
    return hashlib.sha256(f"{first.run_id}\x00{first.started_at}".encode()).hexdigest()[:16]


# --- describing runs ------------------------------------------------------------------------


class _Past:
    """The store at an earlier point, as a sparse overlay over its present state.

    Walking decisions back (their merged entries dropped, the entries they
    removed put back from the undo history with their links) mirrors what
    :meth:`RunJournal.undo` does to the file, in memory and only for the
    entries the decisions touch.
    """

    def __init__(self, store: "MemoryStore") -> None:
        self.store = store
        self.entries: dict[str, tuple[Entry, int] | None] = {}  # entry (no links) and its seq; None: absent
        self.links: dict[str, dict[str, int]] = {}  # src -> {dst: ord}
        self.incoming: dict[str, set[str]] = {}  # dst -> the loaded srcs that link to it
        self.present: dict[str, tuple[tuple[Entry, int] | None, dict[str, int]]] = {}
        self._sources_loaded: set[str] = set()  # ids whose present incoming links are all loaded

    def load(self, entry_id: str) -> None:
        if entry_id in self.entries:
            return
        if entry_id in self.store:
            entry = self.store.get(entry_id)
            self.entries[entry_id] = (replace(entry, links=()), self.store.seq_of(entry_id))
            outgoing = {dst: ord_ for src, dst, ord_ in self.store.links_touching(entry_id) if src == entry_id}
        else:
            self.entries[entry_id], outgoing = None, {}
        self.links[entry_id] = outgoing
        for dst in outgoing:
            self.incoming.setdefault(dst, set()).add(entry_id)
        self.present[entry_id] = (self.entries[entry_id], dict(outgoing))

    def live(self, entry_id: str) -> bool:
        if entry_id in self.entries:
            return self.entries[entry_id] is not None
        return entry_id in self.store

    def drop(self, entry_id: str) -> None:
        """Remove an entry and every link to or from it."""
        if not self.live(entry_id):
            self.load(entry_id)
            return
        if entry_id in self.store and entry_id not in self._sources_loaded:
            for src, dst, _ in self.store.links_touching(entry_id):
                if dst == entry_id:
                    self.load(src)  # every link to it is now in the overlay
            self._sources_loaded.add(entry_id)
        self.load(entry_id)
        for src in self.incoming.pop(entry_id, set()):
            self.links[src].pop(entry_id, None)
        for dst in self.links[entry_id]:
            self.incoming.get(dst, set()).discard(entry_id)
        self.entries[entry_id], self.links[entry_id] = None, {}

    def put(self, entry: Entry, seq: int) -> None:
        if self.live(entry.id):  # added again since (outside any run): not there before
            self.drop(entry.id)
        self.load(entry.id)
        self.entries[entry.id] = (entry, seq)

    def link(self, src: str, dst: str, ord_: int) -> None:
        if not (self.live(src) and self.live(dst)):
            return  # as undo does: a link comes back only between entries that are back
        self.load(src)
        if dst not in self.links[src]:
            self.links[src][dst] = ord_
            self.incoming.setdefault(dst, set()).add(src)

    def undo(self, decision: "DecisionRecord", removed: list[tuple[Entry, int, list[tuple[str, str, int]]]]) -> None:
        for created in decision.created_ids:
            self.drop(created)
        for entry, seq, _ in removed:
            self.put(entry, seq)
        for _, _, links in removed:
            for src, dst, ord_ in links:
                self.link(src, dst, ord_)

    def snapshot(self) -> dict[str, tuple[tuple[Entry, int] | None, dict[str, int]]]:
        return {i: (self.entries[i], dict(self.links[i])) for i in self.entries}


def _entry(value: tuple[tuple[Entry, int] | None, dict[str, int]]) -> Entry | None:
    row, links = value
    if row is None:
        return None
    return replace(row[0], links=tuple(sorted(links, key=lambda dst: links[dst])))


def _select(store: "MemoryStore", run_ids: Sequence[str], since: str | None) -> tuple[list[str], list[str], list[str]]:
    """(the runs described, the named runs that were undone, the runs after them), in run order."""
    journal = store.journal
    if run_ids and since is not None:
        raise OptionConflictError("give run ids or --since, not both")
    named = [journal.run(r).run_id for r in run_ids]  # RunNotFoundError for an unknown id
    order = journal.runs()
    ids = [r.run_id for r in order]
    undone = {r.run_id for r in order if r.status == "undone"}
    if since is not None:
        chosen = set(ids[ids.index(journal.run(since).run_id):])
    else:
        chosen = set(named) if named else set(ids)
    active = [r for r in ids if r not in undone]
    span = [r for r in active if r in chosen]
    if not span:
        return [], [r for r in ids if r in chosen], []
    first, last = active.index(span[0]), active.index(span[-1])
    gap = [r for r in active[first:last + 1] if r not in chosen]
    if gap:
        raise ChangeSetError(f"runs {span[0]} and {span[-1]} are not consecutive: run {gap[0]} came between them "
                             f"and is not undone; name it too, or give --since {span[0]}")
    after = active[last + 1:]
    for run_id in span + after:
        if journal.history_purged(run_id):
            what = ("what its decisions removed" if run_id in span else
                    f"the store as it was before it, which the change set of {span[-1]} needs")
            raise ChangeSetError(
                f"the undo history of run {run_id} was purged: a change set can no longer describe {what} "
                f"(the texts to check a target against, the entries merged away; `memrefine log {run_id}` keeps "
                "their ids). Describe only the runs after it, or export the store instead (`memrefine export "
                "--format FORMAT`)")
    return span, [r for r in ids if r in chosen and r in undone], after


class _Groups:
    """Union-find over ids: the operations that must be applied together."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        root = x
        while self.parent.get(root, root) != root:
            root = self.parent[root]
        while x != root:
            x, self.parent[x] = self.parent.get(x, x), root
        return root

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


def describe_changes(store: "MemoryStore", run_ids: Sequence[str] = (), *, since: str | None = None,
                     format: str = "jsonl") -> ChangeSet:
    """The change set of ``run_ids`` (consecutive runs; default: every run), or of ``since`` and the runs after it.

    Reads only. Named runs that were undone add no operations (they are listed
    as ``undone``). :class:`RunNotFoundError` for an unknown run;
    :class:`ChangeSetError` for runs that are not consecutive, or when a purged
    history keeps a run from being described.
    """
    if format not in CHANGE_FORMATS:
        raise ChangeSetError(f"unknown change set format {format!r}; use one of {', '.join(CHANGE_FORMATS)}")
    for _ in range(2):  # a consistent read: retried if another connection committed meanwhile
        version = store.data_version()
        out = _describe(store, list(run_ids), since, format)
        if store.data_version() == version:
            return out
    return _describe(store, list(run_ids), since, format)


def _describe(store: "MemoryStore", run_ids: list[str], since: str | None, format: str) -> ChangeSet:
    span, undone, after = _select(store, run_ids, since)
    identity = store_identity(store)
    if not span:
        return ChangeSet(format=format, store=identity, runs=(), undone=tuple(undone))
    journal = store.journal
    by_run: dict[str, list[DecisionRecord]] = {r: [] for r in span + after}
    for d in journal.decisions():
        if d.run_id in by_run and d.action in _CHANGING:
            by_run[d.run_id].append(d)
    past = _Past(store)

    def walk_back(runs: list[str]) -> None:
        for run_id in reversed(runs):
            for d in reversed(by_run[run_id]):
                removed = journal.removed_entries(run_id, d.step)
                if len(removed) != len(d.removed_ids):
                    raise ChangeSetError(f"the undo history of run {run_id} lacks what step {d.step} removed "
                                         f"({', '.join(d.removed_ids)}); the change set cannot be described")
                past.undo(d, removed)

    walk_back(after)
    end = past.snapshot()
    walk_back(span)
    ids = user_ids(store)
    decisions = [d for r in span for d in by_run[r]]
    return ChangeSet(format=format, store=identity, runs=tuple(span), undone=tuple(undone),
                     changes=tuple(_operations(past, end, decisions, ids, format)))


def _operations(past: _Past, end_snap: dict, decisions: list["DecisionRecord"], ids: UserIds,
                format: str) -> list[Change]:
    base: dict[str, Entry] = {}
    end: dict[str, Entry] = {}
    for entry_id in past.entries:
        for state, value in ((base, (past.entries[entry_id], past.links[entry_id])),
                             (end, end_snap.get(entry_id, past.present[entry_id]))):
            entry = _entry(value)
            if entry is not None:
                state[ids(entry.id)] = entry
    # Who decided what, in order: the last decision on each id explains its operation.
    last: dict[str, tuple[int, DecisionRecord]] = {}
    into: dict[str, str] = {}
    kept: dict[str, str] = {}  # deleted id -> the entry that holds its facts (its id in the store)
    groups = _Groups()
    for pos, d in enumerate(decisions):
        if d.action == "merge":
            carrier = ids(d.created_ids[0])
            for uid in (ids(d.a_id or ""), ids(d.b_id or "")):
                last[uid], _ = (pos, d), kept.pop(uid, None)
                groups.union(carrier, uid)
                into[uid] = carrier
                if uid == carrier:
                    del into[uid]
        else:
            target = ids(d.target or "")
            last[target] = (pos, d)
            into.pop(target, None)
            kept.pop(target, None)
            if d.action == "delete":
                other = (d.b_id if d.target == d.a_id else d.a_id) or ""
                kept[target] = other  # the entry's own id: its text before the runs is read below
                groups.union(target, ids(other))
    ops: list[tuple[tuple[int, int], str, Change]] = []
    order = {uid: n for n, uid in enumerate(base)}
    for uid in sorted(set(base) | set(end), key=lambda u: order.get(u, len(order))):
        before, after = base.get(uid), end.get(uid)
        if before is None:
            raise ChangeSetError(f"entry {after.id if after else uid!r} would be written under {uid!r}, an id "
                                 "the store did not have before these runs; export the store instead")
        if after is not None:
            record = export_record(after, format, ids)
            if record == export_record(before, format, ids):
                continue
        expect = content_hash(before.content)
        run: str | None
        step: int | None
        if uid in last:
            pos, d = last[uid]
            key, action, reason = (0 if after else 1, pos), d.action, d.reason
            run, step, source = d.run_id, d.step, d.source
        else:  # its links changed: a link to an entry these runs removed went with that entry
            kept_links = {ids(link) for link in after.links} if after else set()
            gone = [g for g in dict.fromkeys(ids(link) for link in before.links) if g not in kept_links]
            causes = sorted((last[g] for g in gone if g in last), key=lambda item: item[0])
            cause = causes[-1][1] if causes else None
            key, action = (0, causes[-1][0] if causes else len(decisions)), "relink"
            run, step, source = (cause.run_id, cause.step, cause.source) if cause else (None, None, "")
            reason = f"its links to {', '.join(gone)} went with the entries removed" if gone else "its links changed"
        if after is None:
            change = Change(op="delete", id=uid, expect=expect, group=0, run=run, step=step, action=action,
                            source=source, reason=reason, into=into.get(uid))
        else:
            change = Change(op="update", id=uid, expect=expect, group=0, run=run, step=step, action=action,
                            source=source, reason=reason, text=after.content,
                            metadata=_format_metadata(record, format), record=record)
        ops.append((key, uid, change))
    touched = {uid for _, uid, _ in ops}  # ids with an operation
    out: list[Change] = []
    numbers: dict[str, int] = {}
    # Updates first, then deletes (each in the order decided): a change set stopped half-way leaves a
    # memory twice, never the merged text without its source.
    for _, uid, change in sorted(ops, key=lambda item: item[0]):
        group = numbers.setdefault(groups.find(uid), len(numbers) + 1)
        extra: dict[str, Any] = {"group": group}
        holder = _entry((past.entries[kept[uid]], {})) if uid in kept and kept[uid] in past.entries else (
            past.store.get(kept[uid]) if uid in kept and kept[uid] in past.store else None)
        if change.op == "delete" and holder is not None:
            extra["kept"] = (ids(holder.id), content_hash(holder.content))
        if change.into is not None:
            final, seen = change.into, {uid}
            while final in into and final in touched and final not in seen:  # merged on again: who carries it
                seen.add(final)
                final = into[final]
            extra["into"] = final
        out.append(replace(change, **extra))
    absorbed: dict[str, list[str]] = {}
    for change in out:
        if change.op == "delete" and change.into is not None:
            absorbed.setdefault(change.into, []).append(change.id)
    return [replace(c, merged_from=(c.id, *absorbed[c.id])) if c.op == "update" and c.id in absorbed else c
            for c in out]


def _format_metadata(record: dict[str, Any], format: str) -> dict[str, Any]:
    """The metadata an ``update(id, text, metadata)`` call passes, in the change set's format."""
    if format == "amem":
        return {k: v for k, v in record.items() if k not in ("id", "content", "keywords", "links", "timestamp")}
    return dict(record.get("metadata") or {})


# --- reading and applying -------------------------------------------------------------------


def _change_from(obj: Any, where: str) -> Change:
    if not isinstance(obj, dict):
        raise ChangeSetError(f"{where}: an operation must be a JSON object")
    op = obj.get("op")
    if op not in ("delete", "update"):
        raise ChangeSetError(f"{where}: unknown operation {op!r} (a change set has 'delete' and 'update')")
    entry_id, expect, group = obj.get("id"), obj.get("expect"), obj.get("group")
    if not isinstance(entry_id, str) or not entry_id:
        raise ChangeSetError(f"{where}: 'id' must be a string")
    if not isinstance(expect, str) or len(expect) != 64:
        raise ChangeSetError(f"{where}: 'expect' must be the SHA-256 (64 hex digits) of the text the id had")
    if isinstance(group, bool) or not isinstance(group, int):
        raise ChangeSetError(f"{where}: 'group' must be a whole number")
    kept = obj.get("kept")
    if kept is not None and not (isinstance(kept, list) and len(kept) == 2 and all(isinstance(k, str) for k in kept)):
        raise ChangeSetError(f"{where}: 'kept' must be [id, sha256]")
    text, metadata, record = obj.get("text"), obj.get("metadata"), obj.get("record")
    if op == "update" and not (isinstance(text, str) and isinstance(metadata, dict) and isinstance(record, dict)):
        raise ChangeSetError(f"{where}: an update needs 'text' (a string), 'metadata' and 'record' (objects)")
    into, merged = obj.get("into"), obj.get("merged_from") or []
    step = obj.get("step")
    return Change(op=op, id=entry_id, expect=expect, group=group, run=obj.get("run"),
                  step=step if isinstance(step, int) else None, action=str(obj.get("action", "")),
                  source=str(obj.get("source", "")), reason=str(obj.get("reason", "")),
                  into=into if isinstance(into, str) else None, kept=(kept[0], kept[1]) if kept else None,
                  merged_from=tuple(m for m in merged if isinstance(m, str)), text=text if op == "update" else None,
                  metadata=metadata if op == "update" else None, record=record if op == "update" else None)


def read_changes(source: str | os.PathLike[str] | IO[str]) -> ChangeSet:
    """Read a change set file (a path or an open text stream); :class:`ChangeSetError` if it is not one."""
    if isinstance(source, (str, os.PathLike)):
        name = Path(source).name
        try:
            text = Path(source).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ChangeSetError(f"cannot read the change set {source}: {exc}") from exc
    else:
        name, text = getattr(source, "name", "the change set"), source.read()
    lines = [(n, line) for n, line in enumerate(text.split("\n"), 1) if line.strip()]
    parsed = []
    for n, line in lines:
        try:
            parsed.append((n, json.loads(line)))
        except (json.JSONDecodeError, RecursionError, ValueError) as exc:
            raise ChangeSetError(f"{name} line {n}: not valid JSON ({exc})") from exc
    head = parsed[0][1] if parsed else None
    if not isinstance(head, dict) or head.get("memrefine_changes") != _VERSION:
        raise ChangeSetError(f"{name} is not a memrefine change set (its first line must be the header "
                             "`memrefine changes` writes)")
    if head.get("application_id") != APPLICATION_ID:
        raise ChangeSetError(f"{name} was not written for a memrefine store (application id "
                             f"{head.get('application_id')!r})")
    fmt = head.get("format")
    if fmt not in CHANGE_FORMATS:
        raise ChangeSetError(f"{name}: unknown change set format {fmt!r}")
    runs, undone = head.get("runs"), head.get("undone", [])
    if not all(isinstance(v, list) and all(isinstance(r, str) for r in v) for v in (runs, undone)):
        raise ChangeSetError(f"{name}: 'runs' and 'undone' must be lists of run ids")
    changes = tuple(_change_from(obj, f"{name} line {n}") for n, obj in parsed[1:])
    if head.get("operations") != len(changes):
        raise ChangeSetError(f"{name} holds {len(changes)} operations where its header says "
                             f"{head.get('operations')!r}: the file is cut short or was edited")
    return ChangeSet(format=fmt, store=head.get("store"), runs=tuple(runs or ()), undone=tuple(undone or ()),
                     changes=changes)


def plan_changes(changes: ChangeSet, current: Callable[[str], str | None]) -> ChangePlan:
    """Which operations to apply to a target and which to skip (with the reason), checked before any is applied.

    ``current(id)`` is the target's text for an id, or None if it has none.
    An operation is applied only if its id holds the text it expects (and the
    memory in ``kept`` too), and only with every other operation of its group.
    :class:`ChangeSetError` if no memory it expects matches (a change set for
    another store, or one applied already): then nothing may be applied.
    """
    seen: dict[str, str | None] = {}

    def problem(entry_id: str, expect: str, role: str) -> str | None:
        if entry_id not in seen:
            seen[entry_id] = current(entry_id)
        text = seen[entry_id]
        if text is None:
            return f"{entry_id!r}{role} is not in the target"
        if content_hash(text) != expect:
            return f"{entry_id!r}{role} changed since the import"
        return None

    groups: dict[int, list[Change]] = {}
    expected: dict[str, set[str]] = {}
    for change in changes.changes:
        groups.setdefault(change.group, []).append(change)
        for entry_id, sha in [(change.id, change.expect), *([change.kept] if change.kept else [])]:
            expected.setdefault(entry_id, set()).add(sha)
    bad: dict[int, list[str]] = {}
    for number, members in groups.items():
        for c in members:
            found = [problem(c.id, c.expect, "")]
            if c.kept is not None:
                found.append(problem(c.kept[0], c.kept[1], f" (which holds the facts of {c.id!r})"))
            bad.setdefault(number, []).extend(p for p in found if p)
    if seen and not any(text is not None and content_hash(text) in expected[i] for i, text in seen.items()):
        raise ChangeSetError(
            f"none of the {len(seen)} memories this change set expects is in the target as it expects it (each "
            f"is missing or changed): it was made for another store than this one (store {changes.store}), or "
            "it was applied already. Nothing was applied")
    plan = ChangePlan()
    for c in changes.changes:
        if bad.get(c.group):
            plan.skipped.append((c, "; ".join(bad[c.group])))
        else:
            plan.apply.append(c)
    return plan


def apply_to_records(records: Iterable[dict[str, Any]], changes: ChangeSet) -> tuple[list[dict[str, Any]], ChangePlan]:
    """Apply a change set to the records of an export file in its format (each with an ``id``).

    Returns the records after it (in their order; an updated record keeps its
    place) and the plan (:func:`plan_changes`): nothing is applied to a record
    whose text is not the one expected.
    """
    by_id = {str(r.get("id")): r for r in records}
    text_field = TEXT_FIELD[changes.format]

    def current(entry_id: str) -> str | None:
        value = by_id.get(entry_id, {}).get(text_field)
        return value if isinstance(value, str) else None

    plan = plan_changes(changes, current)
    for c in plan.apply:
        if c.op == "delete":
            by_id.pop(c.id, None)
        else:
            by_id[c.id] = dict(c.record or {})
    return list(by_id.values()), plan
