"""One rooted error hierarchy for memrefine_edge.

Library code raises these; only the CLI turns them into messages (and exit
codes) at its edge. Every error carries a human sentence that says what went
wrong and, where there is one, how to fix it. The whole tree::

    MemRefineError
    ├── ModelError
    │   ├── ModelNotFoundError
    │   ├── ModelChecksumError
    │   ├── ModelLoadError
    │   └── MissingExtraError
    ├── StoreError
    │   ├── StoreNotFoundError
    │   ├── StoreFullError
    │   ├── StoreIOError
    │   ├── StoreReadOnlyError
    │   ├── StoreBusyError
    │   ├── StoreExistsError
    │   ├── StoreReplacedError
    │   ├── StorePathError
    │   ├── SchemaError
    │   │   └── NotAStoreError
    │   ├── EntryNotFoundError (also KeyError)
    │   ├── DuplicateIdError
    │   ├── InvalidEntryError (also ValueError)
    │   └── JournalConflictError
    ├── ImportFormatError (also ValueError)
    ├── ExportError
    ├── ChangeSetError (also ValueError)
    ├── ConfigurationError (also ValueError)
    │   ├── UnknownMethodError
    │   ├── OptionConflictError
    │   ├── BudgetError
    │   ├── MethodOptionError (also named RuleOptionError)
    │   └── PluginError
    ├── RunLockedError
    ├── RunInterruptedError
    ├── ResumeError
    ├── RunNotFoundError (also KeyError)
    ├── UndoRefusedError
    │   ├── RunAlreadyUndoneError
    │   ├── LaterRunError
    │   ├── HistoryPurgedError
    │   └── UndoConflictError
    ├── JudgeOutputError
    ├── MergeOutputError
    └── EvalError (also ValueError)
"""

from __future__ import annotations

__all__ = [
    "MemRefineError",
    "ModelError",
    "ModelNotFoundError",
    "ModelChecksumError",
    "ModelLoadError",
    "MissingExtraError",
    "StoreError",
    "StoreFullError",
    "StoreIOError",
    "StoreReadOnlyError",
    "StoreBusyError",
    "SchemaError",
    "NotAStoreError",
    "StoreNotFoundError",
    "JournalConflictError",
    "ConfigurationError",
    "UnknownMethodError",
    "OptionConflictError",
    "ResumeError",
    "UndoRefusedError",
    "RunAlreadyUndoneError",
    "LaterRunError",
    "HistoryPurgedError",
    "EvalError",
    "StoreExistsError",
    "StoreReplacedError",
    "StorePathError",
    "EntryNotFoundError",
    "DuplicateIdError",
    "InvalidEntryError",
    "ImportFormatError",
    "ExportError",
    "ChangeSetError",
    "BudgetError",
    "RuleOptionError",
    "MethodOptionError",
    "PluginError",
    "RunLockedError",
    "RunInterruptedError",
    "RunNotFoundError",
    "UndoConflictError",
    "JudgeOutputError",
    "MergeOutputError",
]


class MemRefineError(Exception):
    """Root of every error this package raises on purpose."""


# --- models -----------------------------------------------------------------


class ModelError(MemRefineError):
    """A model file is missing, corrupted or cannot be loaded."""


class ModelNotFoundError(ModelError):
    """A model file is not where it was looked for."""


class ModelChecksumError(ModelError):
    """A model file exists but its sha256 is not the one in the manifest."""


class ModelLoadError(ModelError):
    """The runtime (onnxruntime, llama.cpp) refused to load a model file."""


class MissingExtraError(ModelError):
    """A feature needs an optional part of the package that is not installed.

    ``extra`` names it: ``pip install 'memrefine-edge[EXTRA]'`` installs it
    (``llm``: llama-cpp-python, which every GGUF model needs).
    """

    def __init__(self, message: str, *, extra: str) -> None:
        self.extra = extra
        super().__init__(message)


# --- store ------------------------------------------------------------------


class StoreError(MemRefineError):
    """Something about the SQLite memory store itself."""


class StoreFullError(StoreError):
    """A write needs more room than the store may take (``max_file_bytes``) or the disk has.

    SQLite's ``SQLITE_FULL``. The write's transaction is rolled back whole,
    so nothing of it is in the store; the store stays usable (free space or
    raise the limit, then retry).
    """


class StoreIOError(StoreError):
    """The operating system refused a write to the store (file too large, an I/O error); nothing was lost."""


class StoreReadOnlyError(StoreError):
    """The store's file, folder or file system is read-only; nothing was written."""


class StoreBusyError(StoreError):
    """Another process held the store's write lock longer than the busy timeout; nothing was written."""


class SchemaError(StoreError):
    """The database file is not a memrefine store, or is from a newer version."""


class NotAStoreError(SchemaError):
    """The file exists but was not created by memrefine_edge (another application's
    database, an empty file, not SQLite at all). It is refused untouched."""


class StoreNotFoundError(StoreError):
    """No memory store at the path (a read or a compression never creates one)."""


class JournalConflictError(StoreError):
    """A decision arrived out of order for its run (a second writer, or a replayed step); nothing was applied."""


class StoreExistsError(StoreError):
    """A store was to be created at a path where another process created one meanwhile."""


class StoreReplacedError(StoreError):
    """The store's file was replaced (another file renamed over it), moved away or removed while open.

    Writes would go to the file that was opened, which the path no longer
    reaches: every write is refused, nothing is written. Close the store and
    open the path again.
    """


class StorePathError(StoreError):
    """The store's path names something other than a regular file (a folder, a FIFO, a device, a socket).

    Refused before anything is opened or created beside it (no lock file).
    """


class EntryNotFoundError(StoreError, KeyError):
    """An entry id that is not (or no longer) in the store."""

    @classmethod
    def for_id(cls, entry_id: object) -> "EntryNotFoundError":
        """The error for one id (cut at 300 characters: an id may be a hostile megabyte of text)."""
        return cls(f"no entry with id {entry_id!r:.300}")

    def __str__(self) -> str:  # KeyError quotes its argument; we want the sentence
        return str(self.args[0]) if self.args else "entry not found"


class DuplicateIdError(StoreError):
    """An entry id that is already taken."""


class InvalidEntryError(StoreError, ValueError):
    """Entry fields that cannot be stored (empty content, NUL bytes, wrong types ...)."""


class ImportFormatError(MemRefineError, ValueError):
    """An input file that does not match the format it was imported as.

    ``line`` is the 1-based line (or record) number where the problem was
    found, when there is one.
    """

    def __init__(self, message: str, *, line: int | None = None) -> None:
        self.line = line
        super().__init__(f"line {line}: {message}" if line is not None else message)


class ExportError(MemRefineError):
    """An export that cannot be written (missing folder, no permission, disk full)."""


class ChangeSetError(MemRefineError, ValueError):
    """A change set that cannot be described or applied; nothing was applied.

    Runs that are not consecutive, a run whose undo history was purged, a file
    that is not a change set, or one that matches nothing in the store it is
    applied to (made for another store, or applied already).
    """


# --- compression --------------------------------------------------------------


class ConfigurationError(MemRefineError, ValueError):
    """Options or parts that do not fit together (an unknown metric, a merge decided with no merger ...)."""


class UnknownMethodError(ConfigurationError):
    """No compression method is registered under that name."""


class OptionConflictError(ConfigurationError):
    """Options that do not go together (``--tau`` for memrefine, say); the CLI reports it as a usage error."""


class BudgetError(ConfigurationError):
    """A budget that is malformed or cannot be reached by any compression."""


class MethodOptionError(ConfigurationError):
    """A value a method's declared option does not take (``tau`` outside [-1, 1], a word where a number goes)."""


#: The earlier name of :class:`MethodOptionError` (the rule methods' option errors), kept as an alias.
RuleOptionError = MethodOptionError


class PluginError(ConfigurationError):
    """A method plugin (an entry point in the ``memrefine_edge.methods`` group) that cannot be loaded."""


class RunLockedError(MemRefineError):
    """Another compression run holds the store's run lock."""


class RunInterruptedError(MemRefineError):
    """An interrupted run waits on this store and the new run's arguments differ from it.

    ``run_id`` names the waiting run: finish it (same arguments, or
    ``resume=True``) or undo it before starting another.
    """

    def __init__(self, message: str, *, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(message)


class RunNotFoundError(MemRefineError, KeyError):
    """A run id that is not recorded in the store."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "run not found"


class ResumeError(MemRefineError):
    """There is no interrupted run to resume, or it cannot be resumed this way (another method)."""


class UndoRefusedError(MemRefineError):
    """Undo cannot restore this run; nothing was changed."""


class RunAlreadyUndoneError(UndoRefusedError):
    """The run is undone already."""


class LaterRunError(UndoRefusedError):
    """A later run, not undone, may have built on this one: undo that one first."""


class HistoryPurgedError(UndoRefusedError):
    """The run's undo history was purged."""


class UndoConflictError(UndoRefusedError):
    """Undo would restore an entry whose id has been taken again since the run; nothing was changed."""


# --- LLM output -------------------------------------------------------------


class JudgeOutputError(MemRefineError):
    """The judge LLM produced output that does not parse into a Decision.

    ``raw`` holds the text exactly as generated, so the caller can log it and
    choose the safe fallback (the compressor preserves the pair).
    """

    def __init__(self, message: str, *, raw: str) -> None:
        self.raw = raw
        super().__init__(f"{message} (raw output: {raw[:200]!r})")


class MergeOutputError(MemRefineError):
    """The merge LLM produced output that does not parse into a merged entry."""

    def __init__(self, message: str, *, raw: str) -> None:
        self.raw = raw
        super().__init__(f"{message} (raw output: {raw[:200]!r})")


class EvalError(MemRefineError, ValueError):
    """Bad evaluation input (missing file, unknown sample or method, budget outside (0, 1])."""
