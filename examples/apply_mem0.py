"""Apply a memrefine change set to a mem0 OSS ``Memory`` through its public ``get``, ``update`` and ``delete``.

    memrefine changes --format mem0 --output changes.jsonl
    python examples/apply_mem0.py changes.jsonl --dry-run        # what it would do
    python examples/apply_mem0.py changes.jsonl [--config mem0.json]

Every operation is checked before anything is applied: the memory it names
must hold the text the change set expects (the one imported). An operation
whose memory is missing or has changed since is reported and skipped, with
the operations of its group (the update carrying a merge and the delete of
the merge's other source go together). A change set that matches nothing
(made for another store, or applied already) is refused: one error line,
nothing applied.

``update`` is called as ``update(memory_id, text)``, plus ``metadata=`` where
the installed mem0 takes it; mem0 itself then sets the memory's hash and
``updated_at``. From Python: ``apply(memory, read_changes(path))``.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from collections.abc import Callable
from typing import Any

from memrefine_edge.core import ChangeSetError, MemRefineError
from memrefine_edge.store import Change, ChangePlan, ChangeSet, plan_changes, read_changes


def describe(change: Change) -> str:
    """One line for an operation: what, on which id, and who decided it why."""
    where = f"run {change.run} step {change.step}" if change.run else "links"
    into = f" into {change.into}" if change.into else ""
    return f"{change.op} {change.id}{into}  ({change.action} by {change.source or '-'}, {where}: {change.reason})"


def _text(memory: Any, memory_id: str, out: Callable[[str], object]) -> str | None:
    try:
        found = memory.get(memory_id)
    except Exception as exc:  # some vector stores raise for a missing id: reported, and the operation skipped
        out(f"note   could not read {memory_id}: {exc}")
        return None
    text = found.get("memory") if isinstance(found, dict) else None
    return text if isinstance(text, str) else None


def apply(memory: Any, changes: ChangeSet, *, dry_run: bool = False,
          out: Callable[[str], object] = print) -> ChangePlan:
    """Apply ``changes`` to ``memory`` (anything with mem0's get / update / delete); returns the plan."""
    if changes.format != "mem0":
        raise ChangeSetError(f"this change set is in the {changes.format} format; write one for mem0 with "
                             "`memrefine changes --format mem0`")
    plan = plan_changes(changes, lambda memory_id: _text(memory, memory_id, out))
    for change, why in plan.skipped:
        out(f"skip   {describe(change)}: {why}")
    takes_metadata = "metadata" in inspect.signature(memory.update).parameters
    done = 0
    for change in plan.apply:
        if dry_run:
            out(f"would  {describe(change)}")
            continue
        try:
            if change.op == "delete":
                memory.delete(change.id)
            elif takes_metadata:
                memory.update(change.id, change.text, metadata=change.metadata)
            else:
                memory.update(change.id, change.text)
        except Exception as exc:
            raise ChangeSetError(f"{change.op} of {change.id} failed ({exc}) after {done} operations (listed "
                                 "above); running the same change set again skips what was applied") from exc
        done += 1
        out(f"done   {describe(change)}")
    verb = "would apply" if dry_run else "applied"
    out(f"{verb} {len(plan.apply)} operations, skipped {len(plan.skipped)} (store {changes.store})")
    return plan


def open_memory(config: str | None) -> Any:
    """A mem0 ``Memory``: the default one, or ``Memory.from_config`` of a JSON file."""
    try:
        from mem0 import Memory  # type: ignore[import-not-found]
    except ImportError as exc:
        raise ChangeSetError("mem0 is not installed here (pip install mem0ai)") from exc
    if config is None:
        return Memory()
    with open(config, encoding="utf-8") as fh:
        return Memory.from_config(json.load(fh))


def main(argv: list[str] | None = None, *, memory: Any = None) -> int:
    """The command line; ``memory`` replaces the mem0 ``Memory`` it would open (tests, embedding apps)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("changes", help="a change set from `memrefine changes --format mem0`")
    parser.add_argument("--dry-run", action="store_true", help="print what would be done; change nothing")
    parser.add_argument("--config", help="a mem0 config JSON file for Memory.from_config")
    args = parser.parse_args(argv)
    try:
        changes = read_changes(args.changes)
        apply(memory if memory is not None else open_memory(args.config), changes, dry_run=args.dry_run)
    except MemRefineError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
