"""Apply a memrefine change set to A-MEM notes: a notes file, or an ``AgenticMemorySystem``.

    memrefine changes --format amem --output changes.jsonl
    python examples/apply_amem.py changes.jsonl --notes notes.json --dry-run   # what it would do
    python examples/apply_amem.py changes.jsonl --notes notes.json

The notes file is one `memrefine import --format amem` reads (a list,
``{"notes": [...]}`` or ``{id: note}``); it is written back whole, in the same
shape, or not at all. From Python, ``apply(system, read_changes(path))`` works
on anything with A-MEM's public ``read(id)``, ``update(id, **fields)`` and
``delete(id)``.

Every operation is checked before anything is applied: the note it names must
hold the text the change set expects (the one imported). An operation whose
note is missing or has changed since is reported and skipped, with the
operations of its group (the update carrying a merge and the delete of the
merge's other source go together). A change set that matches nothing (made for
another store, or applied already) is refused: one error line, nothing applied.
An update sets the note's content, keywords, links, timestamp and the A-MEM
fields the change set holds; an update with ``action`` ``relink`` only drops a
link to a note the runs removed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memrefine_edge.core import ChangeSetError, MemRefineError
from memrefine_edge.store import Change, ChangePlan, ChangeSet, plan_changes, read_changes


def describe(change: Change) -> str:
    """One line for an operation: what, on which id, and who decided it why."""
    where = f"run {change.run} step {change.step}" if change.run else "links"
    into = f" into {change.into}" if change.into else ""
    return f"{change.op} {change.id}{into}  ({change.action} by {change.source or '-'}, {where}: {change.reason})"


def _content(note: Any) -> str | None:
    text = note.get("content") if isinstance(note, dict) else getattr(note, "content", None)
    return text if isinstance(text, str) else None


def apply(system: Any, changes: ChangeSet, *, dry_run: bool = False,
          out: Callable[[str], object] = print) -> ChangePlan:
    """Apply ``changes`` to ``system`` (A-MEM's read / update / delete); returns the plan."""
    if changes.format != "amem":
        raise ChangeSetError(f"this change set is in the {changes.format} format; write one for A-MEM with "
                             "`memrefine changes --format amem`")
    plan = plan_changes(changes, lambda note_id: _content(system.read(note_id)))
    for change, why in plan.skipped:
        out(f"skip   {describe(change)}: {why}")
    for change in plan.apply:
        if dry_run:
            out(f"would  {describe(change)}")
            continue
        if change.op == "delete":
            system.delete(change.id)
        else:
            system.update(change.id, **{k: v for k, v in (change.record or {}).items() if k != "id"})
        out(f"done   {describe(change)}")
    verb = "would apply" if dry_run else "applied"
    out(f"{verb} {len(plan.apply)} operations, skipped {len(plan.skipped)} (store {changes.store})")
    return plan


class NotesFile:
    """A notes file as an A-MEM system: read / update / delete on its notes, then ``save`` it back whole."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ChangeSetError(f"cannot read the notes file {self.path}: {exc}") from exc
        if isinstance(data, list):
            self.shape, notes = "list", data
        elif isinstance(data, dict) and isinstance(data.get("notes"), list):
            self.shape, notes = "notes", data["notes"]
        elif isinstance(data, dict) and all(isinstance(v, dict) for v in data.values()):
            self.shape, notes = "dict", [{**v, "id": k} for k, v in data.items()]
            self.ids_inside = all("id" in v for v in data.values())  # written back as they were
        else:
            raise ChangeSetError(f"{self.path} holds no A-MEM notes (a list, {{'notes': [...]}} or {{id: note}})")
        self.notes = {str(n.get("id")): n for n in notes if isinstance(n, dict)}
        if self.shape != "dict":
            self.ids_inside = True

    def read(self, note_id: str) -> dict[str, Any] | None:
        return self.notes.get(note_id)

    def update(self, note_id: str, **fields: Any) -> bool:
        if note_id not in self.notes:
            return False
        self.notes[note_id] = {**self.notes[note_id], **fields}
        return True

    def delete(self, note_id: str) -> bool:
        return self.notes.pop(note_id, None) is not None

    def save(self) -> None:
        notes = list(self.notes.values())
        data: Any = {"list": notes, "notes": {"notes": notes},
                     "dict": {n["id"]: {k: v for k, v in n.items() if k != "id" or self.ids_inside}
                              for n in notes}}[self.shape]
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh, ensure_ascii=False, indent=1)
                fh.write("\n")
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("changes", help="a change set from `memrefine changes --format amem`")
    parser.add_argument("--notes", required=True, help="the A-MEM notes file to change (JSON)")
    parser.add_argument("--dry-run", action="store_true", help="print what would be done; change nothing")
    args = parser.parse_args(argv)
    try:
        changes = read_changes(args.changes)
        notes = NotesFile(args.notes)
        apply(notes, changes, dry_run=args.dry_run)
        if not args.dry_run:
            notes.save()
    except MemRefineError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
