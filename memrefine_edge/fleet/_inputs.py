"""What a fleet job compresses: store paths, a glob, or a manifest file, each read lazily.

A manifest has one store a line: a path, or a JSON object with a ``path``
and, optionally, that store's own ``budget`` (written as ``memrefine budget
set`` reads it: ``"50%"``, ``0.5``, ``"80KB"``). Blank lines and lines
starting with ``#`` are skipped; a relative path is read from the
manifest's folder. The file is read a line at a time, so a manifest of
millions of stores is never held in memory. A line that cannot be read
becomes a job that fails with the reason (the rest of the manifest goes on).
"""

from __future__ import annotations

import glob as globlib
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from memrefine_edge.core import ImportFormatError

__all__ = ["StoreJob", "read_manifest", "glob_stores", "as_jobs", "count_manifest"]


@dataclass(frozen=True)
class StoreJob:
    """One store of a fleet job: its ``path``, its own ``budget`` (None: the job's), where it was read.

    ``problem`` is set when the manifest line could not be read: such a
    job is reported failed with it, never run. ``source`` names the line
    (``manifest.jsonl:12``) for the result row.
    """

    path: str
    budget: str | None = None
    source: str | None = None
    problem: str | None = None


def _budget_text(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ImportFormatError(f"\"budget\" must be text (\"50%\", \"80KB\") or a number, got {value!r}")
    return value if isinstance(value, str) else repr(value)


def _job_from_line(text: str, base: Path, where: str) -> StoreJob:
    if not text.startswith("{"):
        return StoreJob(path=str(base / text), source=where)
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        return StoreJob(path=text, source=where, problem=f"{where}: not a JSON object ({exc.msg})")
    if not isinstance(obj, dict) or not isinstance(obj.get("path"), str) or not obj["path"].strip():
        return StoreJob(path=text, source=where, problem=f"{where}: a JSON line needs a \"path\" (text)")
    unknown = sorted(set(obj) - {"path", "budget"})
    if unknown:
        return StoreJob(path=obj["path"], source=where,
                        problem=f"{where}: unknown field(s) {', '.join(unknown)} (a line has \"path\" and "
                                "\"budget\")")
    budget = None
    if obj.get("budget") is not None:
        try:
            budget = _budget_text(obj["budget"])
        except ImportFormatError as exc:
            return StoreJob(path=obj["path"], source=where, problem=f"{where}: {exc}")
    return StoreJob(path=str(base / obj["path"]), budget=budget, source=where)


def read_manifest(path: str | os.PathLike[str]) -> Iterator[StoreJob]:
    """The jobs of a manifest, one line at a time (see the module's docstring for the format)."""
    manifest = Path(path)
    base = manifest.parent
    with open(manifest, encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            yield _job_from_line(text, base, f"{manifest.name}:{number}")


def count_manifest(path: str | os.PathLike[str]) -> int:
    """How many stores a manifest names (one pass over the file, a line at a time)."""
    with open(path, encoding="utf-8") as fh:
        return sum(1 for line in fh if line.strip() and not line.lstrip().startswith("#"))


def glob_stores(pattern: str) -> Iterator[StoreJob]:
    """The files a glob matches (``**`` crosses folders), as they are found: not sorted, not held."""
    for name in globlib.iglob(os.path.expanduser(pattern), recursive=True):
        if not name.endswith(("-wal", "-shm", "-journal", ".lock")) and not os.path.isdir(name):
            yield StoreJob(path=name)


def as_jobs(stores: Iterable[str | os.PathLike[str] | StoreJob]) -> Iterator[StoreJob]:
    """Paths (or jobs) as jobs, lazily."""
    for item in stores:
        yield item if isinstance(item, StoreJob) else StoreJob(path=os.fspath(item))
