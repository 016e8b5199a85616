"""The run lock: one compression (or undo, or purge) on a store at a time."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Any

from memrefine_edge.core import RunLockedError, StorePathError, StoreReadOnlyError

from ._files import check_path_kind, path_kind

__all__ = ["RunLock"]


class RunLock:
    """An exclusive, crash-safe lock on a store's compression runs.

    ``flock`` on ``<db>.lock`` next to the real file (symbolic links
    resolved, so every path to one store shares one lock): the kernel
    releases it when the holder dies, so a crashed run never leaves the
    store locked. A store path that names anything but a regular file (a
    FIFO, a device) is refused first (:class:`StorePathError`): no lock file
    is created beside it; so is a lock path that names one.
    """

    def __init__(self, db_path: Path) -> None:
        self.db_path = Path(db_path)
        self.path = Path(os.path.realpath(db_path) + ".lock")
        self._fh: Any = None

    def __enter__(self) -> "RunLock":
        check_path_kind(self.db_path)
        kind = path_kind(self.path)
        if kind is not None:  # a FIFO or a folder cannot be locked (it was misreported as a read-only folder)
            raise StorePathError(f"the run lock {self.path} is {kind}, not a lock file; nothing was changed. Remove "
                                 "it (the next run makes a new one)")
        try:
            self._fh = open(self.path, "a+")
        except OSError as exc:
            raise StoreReadOnlyError(
                f"cannot create the run lock {self.path} ({exc.strerror}): the store's folder is read-only. "
                "Nothing was changed. Make the folder writable, or copy the store elsewhere"
            ) from exc
        try:
            fcntl.flock(self._fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._fh.close()
            raise RunLockedError(
                f"another compression is running on {self.path.with_suffix('')} (lock {self.path}); "
                "wait for it to finish"
            ) from None
        return self

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self._fh, fcntl.LOCK_UN)
        self._fh.close()
