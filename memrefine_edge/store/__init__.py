"""The memory store: one SQLite file, and the only code in the package that runs SQL.

:class:`MemoryStore` is the hub that owns the connection; its parts are private modules:
sizes (both size metrics), vectors (embeddings, search), maintenance (long writes, VACUUM,
pragmas), commits (group commits), refusals (typed errors for a write the system refuses),
files (what a store file is), schema (the named, append-only migrations), journal (runs,
decisions, preserved pairs and the undo history), lock (the run lock), budget (the standing
budget and how budgets are read), formats (import, and the JSON-lines export), export (every
import format, under the ids the user imported) and changes (what runs did, as operations any
memory store can apply).
"""

from __future__ import annotations

from ._budget import (
    StandingBudget,
    check_budget_bytes,
    clear_budget,
    get_budget,
    parse_budget,
    parse_ratio,
    parse_size,
    resolve_target,
    set_budget,
)
from ._changes import (
    CHANGE_FORMATS,
    Change,
    ChangePlan,
    ChangeSet,
    apply_to_records,
    describe_changes,
    plan_changes,
    read_changes,
    store_identity,
)
from ._core import MemoryStore
from ._export import EXPORT_DROPPED, EXPORT_FORMATS, UserIds, export_file, user_ids
from ._files import APPLICATION_ID, check_path_kind, check_store_file, copy_store, create_store_file
from ._formats import FORMATS, ImportReport, export_jsonl, import_file, json_lines, load_sample, parse_file, sample_path
from ._journal import DecisionRecord, RunInfo, RunJournal
from ._lock import RunLock
from ._sizes import METRICS, StoreStats
from ._vectors import quantize_embedding, stored_embedding_bytes

__all__ = [
    "APPLICATION_ID", "DecisionRecord", "FORMATS", "ImportReport", "METRICS", "MemoryStore", "RunInfo",
    "RunJournal", "RunLock", "StandingBudget", "StoreStats", "check_budget_bytes", "check_path_kind",
    "check_store_file", "clear_budget", "copy_store", "create_store_file", "export_jsonl", "get_budget",
    "import_file", "json_lines", "load_sample", "parse_budget", "parse_file", "parse_ratio", "parse_size",
    "quantize_embedding", "resolve_target", "sample_path", "set_budget", "stored_embedding_bytes",
    "CHANGE_FORMATS", "Change", "ChangePlan", "ChangeSet", "EXPORT_DROPPED", "EXPORT_FORMATS", "UserIds",
    "apply_to_records", "describe_changes", "export_file", "plan_changes", "read_changes", "store_identity",
    "user_ids",
]
