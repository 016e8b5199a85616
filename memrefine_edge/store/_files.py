"""The store's file: what a store path may name, recognising a store this module made, creating one
atomically, connecting, and noticing the file replaced while open."""

from __future__ import annotations

import os
import secrets
import sqlite3
import stat
from collections.abc import Callable
from pathlib import Path

from memrefine_edge.core import NotAStoreError, StoreError, StorePathError, StoreReplacedError

__all__ = ["APPLICATION_ID", "check_path_kind", "path_kind", "check_store_file", "create_store_file", "connect",
           "copy_store", "read_only_uri", "OpenedFile"]

#: ``PRAGMA application_id`` of every store this module creates ("MREF").
APPLICATION_ID = 0x4D524546
_SQLITE_CANTOPEN, _SQLITE_NOTADB = 14, 26
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def path_kind(path: Path) -> str | None:
    """What ``path`` names when that is not a regular file ("a FIFO (named pipe)", ...); None for a regular
    file or a missing path (links followed). Only ``stat`` is used: nothing is opened."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None  # missing (or unreadable): opening it says what is wrong
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "a special file")


def check_path_kind(path: Path) -> None:
    """Raise :class:`StorePathError` if ``path`` names anything but a regular file (links followed).

    A missing path passes (a store may be created there). Only ``stat`` is
    used: a FIFO is never opened (that would wait for a writer forever), and
    nothing is created beside a refused path.
    """
    kind = path_kind(path)
    if kind is not None:
        raise StorePathError(f"{path} is {kind}, not a database file; nothing was opened or created. Give the "
                             "path of a memory store file, or of a new one to create")


def read_only_uri(path: Path) -> str:
    """The URI of a connection to ``path`` in SQLite's read-only mode, which never writes the file.

    Where nothing can write the file (a read-only folder or file system) and
    no write-ahead log is left, the file is opened immutable: SQLite then
    needs no ``-shm`` file, which it could not create there.
    """
    real = Path(os.path.realpath(path))
    immutable = not os.access(real.parent, os.W_OK) and not Path(f"{real}-wal").exists()
    return Path(path).absolute().as_uri() + ("?immutable=1" if immutable else "?mode=ro")


def connect(path: Path, *, read_only: bool) -> sqlite3.Connection:
    """A connection to the store file at ``path``; ``read_only``: one that never writes the file.

    A read-only connection finding a write-ahead log beside the file opens
    in SQLite's read-only mode (:func:`read_only_uri`): it reads the log but
    never copies it into the file, not at close either, as a read-write
    connection that finds itself the last one would; and the log may not be
    the file's own (another file renamed over one a writer still holds: the
    log lies beside the path). With no log there is none to copy: where the
    file and folder can be written it opens read-write (the caller makes it
    ``query_only``), so that the ``-wal`` and ``-shm`` files it creates go
    again at close instead of staying beside the store.
    """
    if not read_only:
        return sqlite3.connect(str(path), check_same_thread=False)
    real = Path(os.path.realpath(path))
    if not Path(f"{real}-wal").exists() and os.access(real, os.W_OK) and os.access(real.parent, os.W_OK):
        return sqlite3.connect(str(path), check_same_thread=False)
    return sqlite3.connect(read_only_uri(path), uri=True, check_same_thread=False)


class OpenedFile:
    """The file a store's connection opened, to notice another file renamed over it, or it moved or removed.

    SQLite keeps writing to the file it opened, and keeps its write-ahead log
    and shared-memory file beside the *path*: once the path names another
    file, a write would be acknowledged into a file nothing reaches any more,
    through a log the new file would read as its own. Compared by device and
    inode of the real path (symbolic links resolved at open, as SQLite does),
    with one ``stat`` call.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._real = os.path.realpath(path)
        info = os.stat(self._real)
        self._key = (info.st_dev, info.st_ino)

    def change(self) -> str | None:
        """None while the path still names the opened file; else what happened to it."""
        try:
            info = os.stat(self._real)
        except (FileNotFoundError, NotADirectoryError):
            return "moved away or removed"
        except OSError:
            return None  # a folder that cannot be searched any more: the write's own refusal says so
        return None if (info.st_dev, info.st_ino) == self._key else "replaced by another file"

    def check(self) -> None:
        """Raise :class:`StoreReplacedError` unless the path still names the opened file."""
        change = self.change()
        if change is not None:
            raise StoreReplacedError(
                f"{self.path} was {change} while this store had it open, so nothing was written: the "
                "write would have gone to the file that was opened, which that path no longer reaches. "
                f"Close this store and open {self.path} again")


def check_store_file(path: Path) -> None:
    """Raise :class:`NotAStoreError` unless ``path`` is a memory store this module created.

    Reads only: a foreign file is refused untouched. A store is recognised by
    its application id, or (stores made before the id was set) by its
    migration table next to an ``entries`` table.

    The file is read through SQLite, never through a descriptor of this
    module's own: closing any descriptor of a file drops every POSIX lock
    the process holds on it, those of the process's open SQLite connections
    to the same store included (SQLite keeps its own descriptors open while
    another of its connections holds a lock). Another process closing the
    store would then take itself for the last one and remove the write-ahead
    log the open stores still write to. The application id is read with the
    file opened immutable (the main file alone: no lock, no ``-wal`` or
    ``-shm`` made beside a foreign database); it is in the main file from
    the moment a store is linked into place.
    """
    untouched = "it was left untouched (pick another --db, or move the file away)"
    try:
        size = os.stat(path).st_size
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc}") from exc
    if not size:
        raise NotAStoreError(f"{path} is an empty file, not a memory store; {untouched}")
    try:
        app_id = _read_one(path, path.absolute().as_uri() + "?immutable=1", "PRAGMA application_id", untouched)[0][0]
    except NotAStoreError:
        # Read without a lock while a checkpoint was writing the file (page 1, with the new page count,
        # goes first): read it again as any reader does, the write-ahead log included.
        app_id = _read_one(path, read_only_uri(path), "PRAGMA application_id", untouched)[0][0]
    if app_id == APPLICATION_ID:
        return
    if app_id != 0:
        raise NotAStoreError(f"{path} belongs to another application (SQLite application id {app_id:#x}); "
                             f"{untouched}")
    # Read like any read-only open (the write-ahead log included): never written.
    tables = {r[0] for r in _read_one(path, read_only_uri(path),
                                      "SELECT name FROM sqlite_master WHERE type = 'table'", untouched)}
    if not {"_migrations", "entries"} <= tables:
        shown = ", ".join(sorted(tables)[:8]) or "none"
        raise NotAStoreError(f"{path} is an SQLite database of another application (tables: {shown}), not a "
                             f"memory store; {untouched}")


def _read_one(path: Path, uri: str, sql: str, untouched: str) -> list[tuple]:
    """The rows of one query on a connection of its own to ``path`` (a read-only ``uri``), for
    :func:`check_store_file`: a file SQLite cannot read as a database is not a memory store."""
    try:
        conn = sqlite3.connect(uri, uri=True)
        try:
            return conn.execute(sql).fetchall()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        primary = (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF
        if primary == _SQLITE_NOTADB:
            raise NotAStoreError(f"{path} is not an SQLite database, so not a memory store; {untouched}") from exc
        if primary == _SQLITE_CANTOPEN:
            raise StoreError(f"cannot read {path}: {exc}") from exc
        raise NotAStoreError(f"{path} is not a readable SQLite database ({exc}); {untouched}") from exc


def create_store_file(path: Path, initialise: Callable[[Path], None]) -> bool:
    """Create a new store at ``path`` atomically; whether this call's file is the one in place.

    ``initialise(tmp)`` builds the store under a private name beside ``path``
    (and may fill it); it is linked into place only when complete, so a crash
    or an error leaves no half-made file, and a store another process created
    at ``path`` meanwhile is kept as it is (False: the caller uses that one).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.creating")
    try:
        initialise(tmp)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False  # another process created it first: theirs stands
        except OSError:  # a file system without hard links: a plain rename, checked first
            if path.exists():
                return False
            os.replace(tmp, path)
        return True
    finally:
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{tmp}{suffix}").unlink(missing_ok=True)


def copy_store(src: Path, dst: Path) -> None:
    """A consistent copy of a store (WAL contents included) through SQLite's backup API.

    The source is only read (:func:`connect`: also on a read-only file
    system); ``dst`` must not exist and is created private (0600): a copy
    holds everything the store holds.
    """
    check_path_kind(Path(src))
    os.close(os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    source = connect(Path(src), read_only=True)
    source.execute("PRAGMA query_only = ON")
    target = sqlite3.connect(str(dst))
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()
