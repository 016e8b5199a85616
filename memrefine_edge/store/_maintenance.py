"""File upkeep of a store: long writes, VACUUM, pragmas (a part of :class:`~memrefine_edge.store.MemoryStore`)."""

from __future__ import annotations

import os
import re
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memrefine_edge.core import StoreError, StoreReplacedError

__all__ = ["MaintenanceMixin", "COMPACT_SHARE", "LONG_WRITE_WAL_BYTES", "WAL_FILE_LIMIT_BYTES"]

#: The share of the file that must be free space before :meth:`MemoryStore.compact` VACUUMs it.
COMPACT_SHARE = 0.1
#: How far the write-ahead log may grow during :meth:`MemoryStore.long_write` before SQLite copies
#: it back into the file (SQLite's own default is 1,000 pages: 0.5 MiB at 512-byte pages).
LONG_WRITE_WAL_BYTES = 4 << 20
#: The size SQLite truncates the write-ahead log file back to once it has been copied back, so a
#: long write does not leave a file of LONG_WRITE_WAL_BYTES beside the store while it stays open.
WAL_FILE_LIMIT_BYTES = 1 << 20


class MaintenanceMixin:
    """The upkeep methods of :class:`~memrefine_edge.store.MemoryStore` (its connection, its file)."""

    if TYPE_CHECKING:  # provided by MemoryStore
        _db: Any
        _lock: threading.RLock
        _in_tx: bool
        read_only: bool
        path: Path
        _file: Any  # files.OpenedFile
        _others_version: int

        def _raise_refusal(self, exc: BaseException) -> None: ...

        def _apply_size_cap(self) -> None: ...

    # --- the file replaced while open (see files.OpenedFile) -------------------------------------------

    def _refuse_if_replaced(self) -> None:
        """Before a write transaction begins: :class:`StoreReplacedError` if the path no longer names
        the file this connection opened (see :class:`.files.OpenedFile`)."""
        try:
            self._file.check()
        except StoreReplacedError:
            self._release_log()
            raise

    def _before_commit(self) -> None:
        """Inside a write transaction, just before its COMMIT: the same check (the caller rolls back on
        the error), so no write is acknowledged into a file the path no longer reaches. One ``stat``."""
        self._file.check()
        # No other connection can commit while this one holds the write lock: whatever the log holds
        # now was committed while the path still named this file.
        self._others_version = self.data_version()

    def _release_log(self) -> None:
        """The file was replaced: take this connection's commits out of the write-ahead log.

        The log lies beside the path, where the new file would read its pages
        as its own (and a writer would copy them into it). A TRUNCATE
        checkpoint copies them into the file this connection opened and
        empties the log, but only when no other connection has committed since
        this one last checked its file: a log that may hold the new file's own
        commits is left alone. Best effort; never raises.
        """
        if self.read_only:
            return
        try:
            if self.data_version() == self._others_version:
                self._db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error:
            pass

    # --- upkeep -------------------------------------------------------------------------------------

    @contextmanager
    def long_write(self) -> Iterator[None]:
        """A long series of small transactions on this connection (a compression run, one per decision).

        Each commit appends the pages it changed to the write-ahead log; every
        1,000 pages (SQLite's default) SQLite copies the log back into the file
        and syncs it, and the same hot pages (totals, the run's cursor, the
        audit log's last page) are copied again each time. Inside the block the
        log may grow to about :data:`LONG_WRITE_WAL_BYTES` first, so the hot pages
        are copied back less often (the docs' benchmarks page has the figures).
        Each decision still commits on its own. At the end
        the setting is restored and the log copied back without waiting for
        readers (a PASSIVE checkpoint); the log file is truncated to
        :data:`WAL_FILE_LIMIT_BYTES` when SQLite next restarts it.
        """
        if self.read_only:
            yield
            return
        conn = self._db.conn
        before = int(self.pragma("wal_autocheckpoint"))
        pages = max(before, LONG_WRITE_WAL_BYTES // (int(self.pragma("page_size")) + 24))  # 24: a frame's header
        self.pragma("wal_autocheckpoint", pages)
        try:
            yield
        finally:
            self.pragma("wal_autocheckpoint", before)
            if not self._in_tx and self._file.change() is None:  # a replaced file's log: see _release_log
                try:
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
                except sqlite3.Error:  # busy or full: the next automatic checkpoint does it
                    pass

    def vacuum(self) -> None:
        """Return free pages to the file system (``VACUUM``).

        VACUUM rebuilds the file in a temporary copy, then writes it back
        through the WAL: it needs free room of about the file's size in both
        places. A refusal leaves the file as it was (typed error, see
        :meth:`vacuum_room`).
        """
        with self._lock:
            self._refuse_if_replaced()
            try:
                self._db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                self._db.conn.execute("VACUUM")
                self._db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error as exc:
                self._raise_refusal(exc)
                raise
            self._apply_size_cap()  # a cap clamped to a larger file applies again once it shrank

    def compact(self, *, freed_bytes: int = 0, min_share: float = COMPACT_SHARE) -> bool:
        """VACUUM when it pays off: when the free pages and ``freed_bytes`` (the bytes of the rows the
        caller removed since the file was last packed, which left room inside pages) are at least
        ``min_share`` of the file, and the folders have room for it. Returns whether it ran. O(1) to decide.

        A compression ends with it (:class:`~memrefine_edge.engine._compressor.Compressor`): deletes and
        merges leave pages part-empty, and a VACUUM packs the rows again. It costs a rewrite of the
        file, in time about proportional to the file's size; a store that has not lost that share
        of its bytes is left as it is.
        """
        if self.read_only:
            return False
        with self._lock:
            if self._in_tx:
                raise StoreError("compact() cannot run inside a transaction")
            page_size = int(self.pragma("page_size"))
            size = int(self.pragma("page_count")) * page_size
            if not size or int(self.pragma("freelist_count")) * page_size + max(0, freed_bytes) < min_share * size:
                return False
            need, folders = self.vacuum_room()
            if any(free < need for _, free in folders):
                return False  # a VACUUM that cannot finish would only fail: the file stays as it is
            self.vacuum()
            return True

    def vacuum_room(self) -> tuple[int, list[tuple[str, int]]]:
        """What a VACUUM needs: ``(bytes, [(folder, free bytes), ...])`` for the store's and the temp folder.

        Each folder must have about the file's size free (the temporary copy in
        the temp folder, the rewritten pages in the store's WAL).
        """
        import shutil
        import tempfile

        need = int(self.pragma("page_count")) * int(self.pragma("page_size"))
        folders = []
        for folder in dict.fromkeys((str(self.path.absolute().parent), os.environ.get("SQLITE_TMPDIR")
                                     or tempfile.gettempdir())):
            try:
                folders.append((folder, shutil.disk_usage(folder).free))
            except OSError:
                continue
        return need, folders

    def data_version(self) -> int:
        """SQLite's ``data_version``: changes whenever *another* connection commits to the file."""
        return int(self._db.conn.execute("PRAGMA data_version").fetchone()[0])

    def pragma(self, name: str, value: int | str | None = None) -> Any:
        """Read (or, with ``value``, set) one SQLite setting of this store's connection.

        For diagnostics and tests: ``store.pragma("page_size")``,
        ``store.pragma("synchronous", "FULL")`` (full durability per commit).
        Only a plain pragma name and a number or word are accepted.
        """
        if not re.fullmatch(r"[a-z_]+", name):
            raise ValueError(f"not a pragma name: {name!r}")
        if value is None:
            row = self._db.conn.execute(f"PRAGMA {name}").fetchone()
            return row[0] if row else None
        if not re.fullmatch(r"-?\d+|[A-Za-z_]+", str(value)):
            raise ValueError(f"not a pragma value: {value!r}")
        self._db.conn.execute(f"PRAGMA {name} = {value}")
        return self.pragma(name)

    def set_trace(self, callback: Callable[[str], object] | None) -> None:
        """Call ``callback`` with every SQL statement this store's connection runs (None: stop)."""
        self._db.conn.set_trace_callback(callback)

    def integrity_check(self) -> str:
        """SQLite's ``PRAGMA integrity_check``: ``"ok"`` for a sound file."""
        return str(self._db.conn.execute("PRAGMA integrity_check").fetchone()[0])
