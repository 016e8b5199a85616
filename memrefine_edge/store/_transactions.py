"""Write and read transactions of :class:`~memrefine_edge.store.MemoryStore` (a part of it).

One write transaction at a time per store (:meth:`TransactionsMixin.atomic`, ``BEGIN IMMEDIATE``;
nested blocks are savepoints), optionally grouped so that many small writes share a commit
(:meth:`TransactionsMixin.grouped`, :class:`~memrefine_edge.store._commits.CommitGroup`); every
commit first writes the uses searches noted and runs the store's pre-commit checks; a failed write
rolls back and raises the typed refusal (disk full, file replaced, ...). Reads that must agree take
one snapshot (:meth:`TransactionsMixin._read_snapshot`).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from memrefine_edge.core import StoreReplacedError

from ._commits import CommitGroup, WriteHandle

__all__ = ["TransactionsMixin"]


class TransactionsMixin:
    """The transactions of :class:`~memrefine_edge.store.MemoryStore` (see the module docstring)."""

    if TYPE_CHECKING:  # provided by MemoryStore and its other parts
        _db: Any
        _lock: threading.RLock
        _in_tx: bool
        _depth: int
        _version: int
        _group: CommitGroup | None

        def _forget_strings(self) -> None: ...

        def _raise_refusal(self, exc: BaseException) -> None: ...

        def _refuse_if_replaced(self) -> None: ...

        def _before_commit(self) -> None: ...

        def _release_log(self) -> None: ...

        def _write_uses(self) -> None: ...

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """One SQLite write transaction (``BEGIN IMMEDIATE``) for the block.

        Nested, it is a savepoint inside the outer transaction: an error that
        leaves the inner block rolls back only the inner block's changes, so
        a caller that catches it keeps the outer work (which still commits or
        rolls back as a whole).
        """
        with self._lock:
            conn = self._db.conn
            group = self._group
            if not self._in_tx and group is not None and group.thread == threading.get_ident():
                group.begin()  # the group's transaction: this block becomes its first savepoint
            if self._in_tx:
                self._depth += 1
                name = f"sp{self._depth}"
                conn.execute(f"SAVEPOINT {name}")
                try:
                    yield
                    conn.execute(f"RELEASE {name}")
                except BaseException as exc:
                    self._forget_strings()
                    if conn.in_transaction:  # SQLITE_FULL may have rolled back everything already
                        conn.execute(f"ROLLBACK TO {name}")
                        conn.execute(f"RELEASE {name}")
                    self._raise_refusal(exc)
                    raise
                finally:
                    self._depth -= 1
                return
            self._refuse_if_replaced()
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:  # another writer held the lock past the busy timeout, say
                self._raise_refusal(exc)
                raise
            self._in_tx = True
            try:
                yield
                self._write_uses()
                self._before_commit()
                conn.execute("COMMIT")
            except BaseException as exc:
                self._roll_back(exc)
                raise
            finally:
                self._end_write()

    def _roll_back(self, exc: BaseException) -> None:
        """After a failed write transaction: roll back what is left of it, then raise the typed
        refusal for ``exc`` if it is one (else return, and the caller re-raises ``exc``)."""
        # SQLITE_FULL (and a few other errors) roll the transaction back by themselves; a second
        # ROLLBACK would fail and hide the real error.
        self._forget_strings()
        conn = self._db.conn
        if conn.in_transaction:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:  # the refusal may have ended the transaction already
                pass
        if isinstance(exc, StoreReplacedError):
            self._release_log()
        self._raise_refusal(exc)

    def _end_write(self) -> None:
        """A write transaction ended (committed or rolled back): the store's version moves on."""
        self._in_tx = False
        self._version += 1

    def _begin_group(self) -> None:
        """A commit group's transaction begins (:class:`WriteHandle`): the write lock is held until its commit,
        so this store's writes from other threads wait for it."""
        self._lock.acquire()
        try:
            self._refuse_if_replaced()
            self._db.conn.execute("BEGIN IMMEDIATE")
        except BaseException as exc:
            self._lock.release()
            if isinstance(exc, sqlite3.Error):
                self._raise_refusal(exc)
            raise
        self._in_tx = True

    def _commit_group(self) -> bool:
        """A commit group's transaction commits (:class:`WriteHandle`); whether one was left to commit."""
        conn = self._db.conn
        try:
            if not conn.in_transaction:  # SQLITE_FULL may have rolled everything back already
                return False
            self._write_uses()
            self._before_commit()
            conn.execute("COMMIT")
            return True
        except BaseException as exc:
            self._roll_back(exc)
            raise
        finally:
            self._end_write()
            self._lock.release()

    @contextmanager
    def grouped(self, *, window_s: float) -> Iterator["CommitGroup"]:
        """Let the block's writes (on this thread) share transactions: fewer commits for a run of small ones.

        Each :meth:`atomic` block inside is a savepoint of a group transaction,
        which the first of them begins; :meth:`CommitGroup.commit_if_due`
        commits it once it is ``window_s`` old, :meth:`CommitGroup.commit` at
        once, and leaving the block commits what is left, also when the block
        raises (each block that failed was rolled back by its savepoint). So
        every block is still all or nothing, and a crash loses at most the
        blocks of the open group, which never reached the file. While a group
        is open, other connections' writers wait (``busy_timeout``) and so do
        this store's writes from other threads: keep the window short
        (``window_s=0``: every block commits on its own, as without a group).
        """
        if self._group is not None:
            raise RuntimeError("grouped() blocks do not nest")
        group = CommitGroup(WriteHandle(begin=self._begin_group, commit=self._commit_group), window_s)
        self._group = group
        try:
            yield group
        finally:
            self._group = None
            group.commit()

    @contextmanager
    def _read_snapshot(self) -> Iterator[None]:
        """One read transaction: every query inside sees the same committed state, whatever other
        connections commit meanwhile (WAL). Inside a write transaction, that one is used."""
        with self._lock:
            conn = self._db.conn
            if self._in_tx or conn.in_transaction:
                yield
                return
            conn.execute("BEGIN")
            try:
                conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()  # the snapshot starts here
                yield
            finally:
                conn.execute("COMMIT")
