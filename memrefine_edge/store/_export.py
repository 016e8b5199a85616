"""Export in every import format, under the ids the user imported.

What each format writes (:data:`EXPORT_FORMATS`; the matching importer in
:mod:`memrefine_edge.store._formats` reads it back), and what it cannot hold
(:data:`EXPORT_DROPPED`, also in ``memrefine export --help``):

``jsonl``
    One JSON object per line with every field of the entry: nothing is dropped.
``mem0``
    ``{"results": [...]}`` as mem0's ``get_all()`` returns it: ``id``, ``memory``,
    ``hash``, ``metadata``, ``categories`` (the keywords), ``created_at`` (the first
    timestamp), ``updated_at`` (the last one, if there are two or more) and the
    ``user_id`` / ``agent_id`` / ``run_id`` the import put into the metadata.
``amem``
    A-MEM notes as A-MEM keeps them, ``{id: note}``: ``id``, ``content``,
    ``keywords``, ``links``, ``timestamp`` (the first) and the A-MEM fields the
    import put into the metadata (``last_accessed``, ``context``, ``tags``,
    ``category``, ``retrieval_count``, ``evolution_history``).
``text``
    One paragraph per entry, separated by blank lines.

The ids are the user's own: an entry a merge made (``m-`` and 16 hex digits
inside the store) is written under the id of its **first source**, the
earlier-inserted entry of the merged pair (followed back through chained merges
to an id the user imported). That entry is the one whose metadata and first
timestamp the merged entry keeps, so a store that applies the merge as
``update(first source, merged text)`` plus ``delete(second source)`` keeps the
memory's own id, creation time and metadata. Links and a merged entry's
``merged_from`` name ids the same way. Should that id have been added to the
store again since (by the application, outside any run), the merged entry keeps
its own id rather than take one twice.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from memrefine_edge.core import Entry, ExportError

if TYPE_CHECKING:  # pragma: no cover
    from ._core import MemoryStore

__all__ = ["EXPORT_FORMATS", "EXPORT_DROPPED", "UserIds", "user_ids", "export_record", "export_file", "render_export",
           "write_atomic"]

EXPORT_FORMATS = ("jsonl", "mem0", "amem", "text")

#: What each export format cannot hold (the rest comes back on re-import).
EXPORT_DROPPED: dict[str, str] = {
    "jsonl": "nothing",
    "mem0": "links, provenance and the timestamps between the first and the last (mem0 has created_at and "
            "updated_at); a merged memory's hash is that of its new text, computed as mem0 does (MD5)",
    "amem": "provenance, the timestamps after the first, metadata other than A-MEM's own fields "
            "(last_accessed, context, tags, category, retrieval_count, evolution_history) and empty values",
    "text": "ids (a re-import numbers the paragraphs), keywords, links, timestamps, metadata and provenance; "
            "blank lines inside an entry become line breaks",
}

#: Metadata keys the mem0 importer takes from a memory's top level (written back there).
_MEM0_TOP = ("hash", "user_id", "agent_id", "run_id")
#: Metadata keys the A-MEM importer takes from a note (written back as note fields).
_AMEM_FIELDS = ("last_accessed", "context", "tags", "category", "retrieval_count", "evolution_history")


class UserIds:
    """The id each entry is exported under: its own, or for a merged entry the id of its first source.

    ``merges`` maps each merged entry's id to its pair ``(first source, second
    source)`` (merges of runs not undone); ``live`` says whether an id is an
    entry of the store now.
    """

    def __init__(self, merges: dict[str, tuple[str, str]], live: Callable[[str], bool]) -> None:
        self.merges = merges
        self._live = live
        self._memo: dict[str, str] = {}

    def is_merged(self, entry_id: str) -> bool:
        """Whether a merge made ``entry_id``."""
        return entry_id in self.merges

    def __call__(self, entry_id: str) -> str:
        """The id ``entry_id`` is exported under."""
        if entry_id not in self.merges:
            return entry_id
        chain, current = [], entry_id
        while current in self.merges and current not in self._memo:  # a loop: chains of merges can be long
            chain.append(current)
            current = self.merges[current][0]
        if current in self._memo:  # resolved before
            root = self._memo[current]
            taken = root == current
        else:
            # An id the application added again since the merge took it: no entry takes an id twice.
            root, taken = current, self._live(current)
        for merged in chain:
            self._memo[merged] = merged if taken else root
        return self._memo[entry_id]

    def sources(self, entry_id: str) -> tuple[str, ...]:
        """The exported ids of every entry merged into ``entry_id`` (itself for an entry no merge made)."""
        out, todo = [], [entry_id]
        while todo:
            current = todo.pop()
            if current in self.merges:
                todo.extend(reversed(self.merges[current]))
            else:
                out.append(self(current))
        return tuple(dict.fromkeys(out))


def user_ids(store: "MemoryStore") -> UserIds:
    """The export ids of ``store``: merges of the runs not undone, followed back to the ids imported."""
    journal = store.journal
    undone = {r.run_id for r in journal.runs() if r.status == "undone"}
    merges = {d.created_ids[0]: (d.a_id, d.b_id) for d in journal.decisions()
              if d.action == "merge" and d.run_id not in undone and d.created_ids and d.a_id and d.b_id}
    return UserIds(merges, lambda entry_id: entry_id in store)


def _metadata(entry: Entry, ids: UserIds) -> dict[str, Any]:
    meta = dict(entry.metadata)
    merged_from = meta.get("merged_from")
    if ids.is_merged(entry.id) and isinstance(merged_from, list):
        meta["merged_from"] = [ids(m) if isinstance(m, str) else m for m in merged_from]
    return meta


def _text_paragraph(content: str) -> str:
    """``content`` as the text importer reads a paragraph back: no blank lines, no trailing spaces."""
    lines = content.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return "\n".join(line.rstrip() for line in lines if line.strip()).strip()


def export_record(entry: Entry, format: str, ids: UserIds) -> Any:
    """One entry as ``format`` writes it (a dict; for ``text``, the paragraph), under its export id."""
    entry_id = ids(entry.id)
    links = list(dict.fromkeys(ids(link) for link in entry.links if ids(link) != entry_id))
    meta = _metadata(entry, ids)
    if format == "jsonl":
        return {"id": entry_id, "content": entry.content, "keywords": list(entry.keywords), "links": links,
                "timestamps": list(entry.timestamps), "metadata": meta, "provenance": list(entry.provenance)}
    if format == "mem0":
        if ids.is_merged(entry.id) and "hash" in meta:
            meta["hash"] = hashlib.md5(entry.content.encode("utf-8")).hexdigest()  # as mem0's update does
        top = {key: meta.pop(key) for key in _MEM0_TOP if meta.get(key) is not None}
        record: dict[str, Any] = {"id": entry_id, "memory": entry.content}
        if "hash" in top:
            record["hash"] = top.pop("hash")
        record["metadata"] = meta
        if entry.keywords:
            record["categories"] = list(entry.keywords)
        stamps = entry.timestamps
        record["created_at"] = stamps[0] if stamps else None
        record["updated_at"] = stamps[-1] if len(stamps) > 1 else None
        return {**record, **top}
    if format == "amem":
        note: dict[str, Any] = {"id": entry_id, "content": entry.content, "keywords": list(entry.keywords),
                                "links": links}
        if entry.timestamps:
            note["timestamp"] = entry.timestamps[0]
        note.update({key: meta[key] for key in _AMEM_FIELDS if meta.get(key) not in (None, "", [])})
        return note
    if format == "text":
        return _text_paragraph(entry.content)
    raise ExportError(f"unknown export format {format!r}; use one of {', '.join(EXPORT_FORMATS)}")


def render_export(records: list[Any], format: str) -> Iterable[str]:
    """The text of an export file of ``records`` (from :func:`export_record`), in pieces."""
    if format == "jsonl":
        return (json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    if format == "mem0":
        return [json.dumps({"results": records}, ensure_ascii=False, indent=1) + "\n"]
    if format == "amem":
        return [json.dumps({r["id"]: r for r in records}, ensure_ascii=False, indent=1) + "\n"]
    if format == "text":
        return ["\n\n".join(records) + ("\n" if records else "")]
    raise ExportError(f"unknown export format {format!r}; use one of {', '.join(EXPORT_FORMATS)}")


def write_atomic(out: str | os.PathLike[str] | IO[str], pieces: Iterable[str]) -> None:
    """Write ``pieces`` to a stream, or to a path atomically (a temporary file renamed into place)."""
    if not isinstance(out, (str, os.PathLike)):
        for piece in pieces:
            out.write(piece)
        return
    target = Path(out)
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:
        raise ExportError(f"cannot write {target}: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as stream:
            for piece in pieces:
                stream.write(piece)
        os.replace(tmp, target)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):  # disk full, target is a directory ...
            raise ExportError(f"cannot write {target}: {exc.strerror or exc}") from exc
        raise


def export_file(store: "MemoryStore", out: str | os.PathLike[str] | IO[str] | None = None, *,
                format: str = "jsonl") -> int:
    """Write every live entry in ``format`` under the user's ids (see the module); returns the count.

    ``out`` is a path (written atomically: a failed export leaves no half
    file), a text stream, or None for stdout. Reads only.
    """
    if format not in EXPORT_FORMATS:
        raise ExportError(f"unknown export format {format!r}; use one of {', '.join(EXPORT_FORMATS)}")
    for _ in range(3):  # a consistent read: the journal and the entries of one state
        version = store.data_version()
        ids = user_ids(store)
        records = [export_record(e, format, ids) for e in store.entries()]
        if store.data_version() == version:
            break
    write_atomic(sys.stdout if out is None else out, render_export(records, format))
    return len(records)
