"""Group commits: many small writes in one transaction, committed every few milliseconds."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["CommitGroup", "WriteHandle"]


@dataclass(frozen=True)
class WriteHandle:
    """How a commit group drives its store's write transaction (the store hands its own to the group).

    ``begin`` takes the store's write lock and begins a write transaction, which
    the lock's holder keeps until ``commit``: other threads' writes wait. If it
    cannot begin, the lock is released and the typed refusal raised. ``commit``
    commits what the transaction holds (rolling it back on an error, which it
    re-raises) and releases the lock in every case; it returns whether there was
    a transaction left to commit (a refusal may have rolled it back already).
    """

    begin: Callable[[], None]
    commit: Callable[[], bool]


class CommitGroup:
    """The open group transaction of :meth:`MemoryStore.grouped` (one thread's writes)."""

    def __init__(self, handle: WriteHandle, window_s: float) -> None:
        if not window_s >= 0:
            raise ValueError(f"window_s must be >= 0, got {window_s!r}")
        self._handle, self.window_s = handle, float(window_s)
        self.thread = threading.get_ident()
        self._opened: float | None = None  # perf_counter() at BEGIN; None: no group transaction open
        #: Group transactions committed so far.
        self.commits = 0

    @property
    def open(self) -> bool:
        """Whether writes are waiting in an uncommitted group transaction."""
        return self._opened is not None

    def begin(self) -> None:
        """Begin the group transaction (the store does, at the group's first write)."""
        self._handle.begin()
        self._opened = time.perf_counter()

    def commit_if_due(self) -> bool:
        """Commit the group transaction if it is ``window_s`` old; whether it did."""
        if self._opened is None or time.perf_counter() - self._opened < self.window_s:
            return False
        self.commit()
        return True

    def commit(self) -> None:
        """Commit the group transaction now (nothing when none is open)."""
        if self._opened is None:
            return
        self._opened = None
        try:
            if self._handle.commit():
                self.commits += 1
        finally:
            time.sleep(0)  # a thread waiting to write gets its turn before the next group begins
