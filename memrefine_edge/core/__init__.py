"""The core types every stage shares: entries, decisions, reports, the error tree.

Nothing here imports another part of the package.
"""

from __future__ import annotations

from ._decision import ACTIONS, AUDIT_ACTIONS, SOURCES, Action, AuditAction, Decision, Source, Target
from ._entry import (
    MAX_CONTENT_CHARS,
    MAX_ID_CHARS,
    MAX_METADATA_DEPTH,
    Entry,
    content_hash,
    is_lookup_key,
    json_size,
    stored_hash,
    validate_entry,
)
from ._errors import (
    BudgetError,
    ChangeSetError,
    ConfigurationError,
    DuplicateIdError,
    EntryNotFoundError,
    EvalError,
    ExportError,
    HistoryPurgedError,
    ImportFormatError,
    InvalidEntryError,
    JournalConflictError,
    JudgeOutputError,
    LaterRunError,
    MemRefineError,
    MergeOutputError,
    MethodOptionError,
    MissingExtraError,
    ModelChecksumError,
    ModelError,
    ModelLoadError,
    ModelNotFoundError,
    NotAStoreError,
    OptionConflictError,
    PluginError,
    ResumeError,
    RuleOptionError,
    RunAlreadyUndoneError,
    RunInterruptedError,
    RunLockedError,
    RunNotFoundError,
    SchemaError,
    StoreBusyError,
    StoreError,
    StoreExistsError,
    StoreFullError,
    StoreIOError,
    StoreNotFoundError,
    StorePathError,
    StoreReadOnlyError,
    StoreReplacedError,
    UndoConflictError,
    UndoRefusedError,
    UnknownMethodError,
)
from ._memory import pin_mmap_threshold, release_free_memory
from ._report import CompressionReport, Progress
from ._types import Metric, Mode, StopReason

__all__ = [
    "ACTIONS", "AUDIT_ACTIONS", "Action", "AuditAction", "BudgetError", "ChangeSetError", "CompressionReport",
    "ConfigurationError", "Decision", "DuplicateIdError", "Entry", "EntryNotFoundError", "EvalError", "ExportError",
    "HistoryPurgedError", "ImportFormatError", "InvalidEntryError", "JournalConflictError", "JudgeOutputError",
    "LaterRunError", "MAX_CONTENT_CHARS", "MAX_ID_CHARS", "MAX_METADATA_DEPTH", "MemRefineError",
    "MergeOutputError", "MethodOptionError", "Metric", "MissingExtraError", "Mode", "ModelChecksumError",
    "ModelError", "ModelLoadError", "ModelNotFoundError", "NotAStoreError", "OptionConflictError", "PluginError",
    "Progress", "ResumeError", "RuleOptionError", "RunAlreadyUndoneError", "RunInterruptedError", "RunLockedError",
    "RunNotFoundError", "SOURCES", "SchemaError", "Source", "StopReason", "StoreBusyError", "StoreError",
    "StoreExistsError", "StoreFullError", "StoreIOError", "StoreNotFoundError", "StorePathError",
    "StoreReadOnlyError", "StoreReplacedError", "Target", "UndoConflictError", "UndoRefusedError",
    "UnknownMethodError", "content_hash", "is_lookup_key", "json_size", "pin_mmap_threshold", "release_free_memory",
    "stored_hash", "validate_entry",
]
