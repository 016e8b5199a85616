"""Typed errors for the operating system or SQLite refusing a store's write (full, read-only, busy, failed).

Every message says which file, what to do, and that nothing was lost: the failed transaction is rolled back
whole, and the last committed state (with any interrupted run's checkpoint) is intact and resumable.
"""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

from memrefine_edge.core import StoreBusyError, StoreError, StoreFullError, StoreIOError, StoreReadOnlyError

__all__ = ["refusal", "read_refusal", "full_error"]

_SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_FULL, _SQLITE_CANTOPEN = 5, 6, 8, 10, 13, 14
_KEPT = "Nothing was lost: the failed step was rolled back and the store is as it was after its last commit."


def refusal(exc: BaseException, path: Path, max_file_bytes: int | None) -> StoreError | None:
    """The typed error for the operating system (or SQLite) refusing a write, or None for anything else."""
    if isinstance(exc, StoreError):
        return None
    if isinstance(exc, OSError) and not isinstance(exc, sqlite3.Error):
        code = exc.errno
        if code == errno.ENOSPC:
            return full_error(path, max_file_bytes)
        if code in (errno.EROFS, errno.EACCES, errno.EPERM):
            return StoreReadOnlyError(f"{path} cannot be written ({exc.strerror}): the file or its folder is "
                                      f"read-only. {_KEPT} Make it writable, or copy the store elsewhere")
        if code == errno.EFBIG:
            return StoreIOError(f"writing {path} failed: file too large for this process's size limit "
                                f"(ulimit -f). {_KEPT} Raise the limit, then retry")
        return None
    if not isinstance(exc, sqlite3.Error):
        return None
    primary = (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF
    if primary == _SQLITE_FULL or "database or disk is full" in str(exc):
        return full_error(path, max_file_bytes)
    if primary in (_SQLITE_READONLY, _SQLITE_CANTOPEN):
        return StoreReadOnlyError(f"{path} cannot be written ({exc}): the file, its folder or the file "
                                  f"system is read-only. {_KEPT} Make it writable, or copy the store elsewhere")
    if primary == _SQLITE_IOERR:
        return StoreIOError(f"writing {path} failed ({exc}): the disk is full, the file is larger than "
                            f"this process may write (ulimit -f), or the device failed. {_KEPT} Free disk space "
                            "or raise the limit, then retry")
    if primary in (_SQLITE_BUSY, _SQLITE_LOCKED):
        return StoreBusyError(f"{path} is locked by another process for longer than the busy timeout. "
                              f"{_KEPT} Retry when the other writer is done")
    return None


def read_refusal(exc: BaseException, path: Path) -> StoreError | None:
    """A read-only open the file system refused: SQLite could not create its shared-memory file."""
    primary = (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF
    if isinstance(exc, sqlite3.Error) and primary in (_SQLITE_IOERR, _SQLITE_CANTOPEN, _SQLITE_FULL):
        return StoreIOError(f"{path} cannot be opened for reading ({exc}): SQLite needs room for its "
                            f"shared-memory file {path.name}-shm beside it, and the disk is full. Nothing "
                            "was changed. Free some disk space, then retry")
    return None


def full_error(path: Path, max_file_bytes: int | None) -> StoreFullError:
    """The store is full: its size cap (``max_file_bytes``) or the disk."""
    if max_file_bytes is not None:
        return StoreFullError(
            f"{path} is full: the write needs more room than its size limit of "
            f"{max_file_bytes:,} bytes (max_file_bytes) leaves, or the disk is full; nothing was "
            "written. Free space (remove entries, compress, purge the undo history) or raise the limit, "
            "then retry"
        )
    return StoreFullError(
        f"the disk holding {path} is full; nothing was written. Free disk space, then retry"
    )
