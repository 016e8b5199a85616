"""The memory store: one SQLite file, and the only code in the package that runs SQL.

* :mod:`.core`: :class:`MemoryStore`, the hub that owns the connection, with its parts
  :mod:`.sizes` (both size metrics), :mod:`.vectors` (embeddings, search), :mod:`.maintenance`
  (long writes, VACUUM, pragmas) and :mod:`.commits` (group commits);
* :mod:`.refusals`: typed errors for a write the system refuses (full, read-only, busy);
* :mod:`.schema`: the named, append-only migrations;
* :mod:`.journal`: runs, decisions, preserved pairs and the undo history;
* :mod:`.lock`: the run lock.
"""

from __future__ import annotations

from memrefine_edge.core._entry import MAX_CONTENT_CHARS, MAX_ID_CHARS, Entry, content_hash, json_size, validate_entry
from memrefine_edge.store._core import MemoryStore
from memrefine_edge.store._files import APPLICATION_ID, check_store_file
from memrefine_edge.store._journal import DecisionRecord, RunInfo, RunJournal
from memrefine_edge.store._lock import RunLock
from memrefine_edge.store._sizes import METRICS, StoreStats
from memrefine_edge.store._vectors import quantize_embedding

__all__ = [
    "Entry",
    "MemoryStore",
    "validate_entry",
    "StoreStats",
    "json_size",
    "content_hash",
    "MAX_CONTENT_CHARS",
    "MAX_ID_CHARS",
    "METRICS",
    "APPLICATION_ID",
    "check_store_file",
    "RunJournal",
    "RunInfo",
    "DecisionRecord",
    "RunLock",
    "quantize_embedding",
]
