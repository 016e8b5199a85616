"""Group commits: many small writes in one transaction, committed every few milliseconds."""

from __future__ import annotations

import sqlite3
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ._core import MemoryStore

__all__ = ["CommitGroup"]


class CommitGroup:
    """The open group transaction of :meth:`MemoryStore.grouped` (one thread's writes)."""

    def __init__(self, store: "MemoryStore", window_s: float) -> None:
        if not window_s >= 0:
            raise ValueError(f"window_s must be >= 0, got {window_s!r}")
        self._store, self.window_s = store, float(window_s)
        self.thread = threading.get_ident()
        self._opened: float | None = None  # perf_counter() at BEGIN; None: no group transaction open
        #: Group transactions committed so far.
        self.commits = 0

    @property
    def open(self) -> bool:
        """Whether writes are waiting in an uncommitted group transaction."""
        return self._opened is not None

    def _begin(self) -> None:
        store = self._store
        store._lock.acquire()  # held until the commit: other threads' writes wait for it
        try:
            store._refuse_if_replaced()
            store._db.conn.execute("BEGIN IMMEDIATE")
        except BaseException as exc:
            store._lock.release()
            if isinstance(exc, sqlite3.Error):
                store._raise_refusal(exc)
            raise
        store._in_tx = True
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
        store = self._store
        conn = store._db.conn
        self._opened = None
        try:
            if conn.in_transaction:  # SQLITE_FULL may have rolled everything back already
                store._before_commit()
                conn.execute("COMMIT")
                self.commits += 1
        except BaseException as exc:
            store._roll_back(exc)
            raise
        finally:
            store._end_write()
            store._lock.release()
            time.sleep(0)  # a thread waiting to write gets its turn before the next group begins
