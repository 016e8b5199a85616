"""The memory store: one SQLite file, owned by one :class:`MemoryStore`.

Every other part of the package asks the store; none touches its connection.
An entry carries what an A-MEM-style graph memory carries (content, keywords,
links, timestamps, metadata) plus provenance (the source ids whose facts it
holds) and an embedding.

Size accounting (both exact, both tested):

``json``
    The paper's metric. Each entry is serialised on its own with
    ``json.dumps(fields, ensure_ascii=False)`` (default separators) and the
    UTF-8 byte lengths are summed. The counted fields, in this order: ``id``,
    ``content``, ``keywords``, ``links``, ``timestamps``, ``metadata``,
    ``provenance``. The embedding is not counted.
``disk``
    The bytes the memory really occupies in the database file: the used
    bytes (page size minus unused bytes) of every page that belongs to the
    ``entries`` and ``links`` tables and their indexes, read from SQLite's
    ``dbstat``. Embeddings count here. Bookkeeping (audit log, undo history)
    does not; ``stats`` reports it as ``overhead_bytes`` and the whole file as
    ``file_bytes``.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

import sqlite_utils

from memrefine_edge.core import (
    ConfigurationError,
    DuplicateIdError,
    Entry,
    EntryNotFoundError,
    InvalidEntryError,
    SchemaError,
    StoreError,
    StoreNotFoundError,
    is_lookup_key,
    json_size,
    stored_hash,
    validate_entry,
)

from ._commits import CommitGroup
from ._files import APPLICATION_ID, OpenedFile, check_path_kind, check_store_file, connect, create_store_file
from ._journal import RunJournal
from ._maintenance import WAL_FILE_LIMIT_BYTES, MaintenanceMixin
from ._refusals import read_refusal, refusal
from ._schema import ENTRY_COLUMNS, MIGRATIONS, split_sql
from ._search_index import SearchIndex
from ._sizes import SizesMixin
from ._transactions import TransactionsMixin
from ._uses import UsesMixin
from ._vectors import VectorsMixin

__all__ = ["MemoryStore", "PAGE_SIZE"]

#: The page size of a new store (see :class:`MemoryStore`): the smallest SQLite has.
PAGE_SIZE = 512
_PAGE_SIZES = tuple(1 << n for n in range(9, 17))
#: How many strings' numbers a store remembers (:meth:`MemoryStore.string_num`; about 0.5 MB).
STRING_CACHE = 4096


class MemoryStore(TransactionsMixin, SizesMixin, VectorsMixin, MaintenanceMixin, UsesMixin):
    """A memory store in one SQLite file.

    ``MemoryStore(path)`` opens (and creates, unless ``create=False``) the
    file, applies pending migrations, and turns on WAL, a busy timeout and
    ``secure_delete`` (removed text is overwritten, not left in free pages).
    Use it as a context manager or call :meth:`close`.

    Durability: the WAL with ``synchronous="NORMAL"`` (default) keeps the
    file consistent through a crash or power loss but may lose the last
    commits before it (they are re-done: an interrupted run resumes, an
    unacknowledged add is sent again); ``synchronous="FULL"`` syncs every
    commit to the disk, so nothing committed is lost, at the cost measured by
    ``bench/durability.py``.

    ``max_file_bytes`` caps the database file (SQLite's ``max_page_count``,
    rounded down to whole pages; default: no cap beyond the disk). A write
    that would grow the file past it -- an import, an add, a compression
    step's journal and undo history -- raises :class:`StoreFullError` and
    writes nothing, exactly like a full disk does; the store stays usable, so
    freeing space (removing entries, compressing, purging the undo history)
    or reopening with a higher cap and retrying succeeds. The cap is on the
    main file: the ``-wal`` file next to it is not counted (it is truncated
    at :meth:`close`). A store already larger than the cap opens, reads and
    shrinks as usual but cannot grow. The cap belongs to this connection; it
    is not stored in the file.

    The file must stay the one opened: once another file is renamed over it
    (or it is moved or removed), every write raises
    :class:`StoreReplacedError` and writes nothing; close the store and open
    the path again.

    ``page_size`` is the SQLite page size of a store this call creates
    (default :data:`PAGE_SIZE`, 512 bytes; a power of two from 512 to 65536);
    an existing file keeps the one it was made with. Small pages keep a small
    store small: every table and index takes at least one page, and an entry
    row (about 1 KB with its embedding) spills into overflow pages that SQLite
    fills completely, where larger pages would hold one or two rows and leave
    the rest empty.

    ``record_uses`` (default True; always off read-only): each entry a
    :meth:`search` returns counts one use, written with the connection's next
    write or its close (:meth:`uses`, :mod:`~memrefine_edge.store._uses`).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        create: bool = True,
        read_only: bool = False,
        busy_timeout_ms: int = 10_000,
        max_file_bytes: int | None = None,
        synchronous: str = "NORMAL",
        page_size: int = 0,
        record_uses: bool = True,
        _new_file: bool = False,
    ) -> None:
        page_size = page_size or PAGE_SIZE
        if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size not in _PAGE_SIZES:
            raise ConfigurationError(f"page_size must be a power of two from 512 to 65536, got {page_size!r}")
        if max_file_bytes is not None and (
            isinstance(max_file_bytes, bool) or not isinstance(max_file_bytes, int) or max_file_bytes <= 0
        ):
            raise ConfigurationError(f"max_file_bytes must be a positive integer or None, got {max_file_bytes!r}")
        if str(synchronous).upper() not in ("NORMAL", "FULL"):
            raise ConfigurationError(f"synchronous must be 'NORMAL' or 'FULL', got {synchronous!r}")
        self.path = Path(path)
        #: The size cap asked for (bytes), or None.
        self.max_file_bytes = max_file_bytes
        #: Opened read-only: nothing is written to the file (a write raises).
        self.read_only = read_only
        #: Whether searches on this connection count as uses of what they return (store._uses).
        self.record_uses = bool(record_uses) and not read_only
        self._uses_pending: dict[str, list[int]] = {}
        check_path_kind(self.path)  # a folder, a FIFO, a device: refused before anything opens it
        if not _new_file:
            if not self.path.exists():
                if not create or read_only:
                    raise StoreNotFoundError(f"no memory store at {self.path} (create one with `memrefine import`)")
                create_store_file(self.path, lambda tmp: MemoryStore(
                    tmp, _new_file=True, max_file_bytes=max_file_bytes, page_size=page_size).close())
            # Before anything writes to it: only a file this module created is opened.
            check_store_file(self.path)
        try:
            self._db = sqlite_utils.Database(connect(self.path, read_only=read_only))
            #: The file this connection opened: a write is refused once the path names another (see _before_commit).
            self._file = OpenedFile(self.path)
            conn = self._db.conn
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            if read_only:
                # SQLite refuses every change on this connection. Opened read-write only where
                # no write-ahead log is left to copy into the file (files.connect).
                conn.execute("PRAGMA query_only = ON")
            if not read_only:
                if _new_file:
                    # The page size and auto_vacuum only take effect on a file with no tables yet;
                    # the application id marks the file as a memory store for later opens.
                    conn.execute(f"PRAGMA page_size = {page_size}")
                    conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
                    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(f"PRAGMA synchronous = {synchronous.upper()}")
            if not read_only:
                conn.execute(f"PRAGMA journal_size_limit = {WAL_FILE_LIMIT_BYTES}")
            conn.execute("PRAGMA secure_delete = ON")
            conn.execute("PRAGMA foreign_keys = ON")
            self._apply_size_cap()
        except Exception as exc:
            refused = self._refusal(exc) if not read_only else read_refusal(exc, self.path)
            if refused is not None:
                raise refused from exc
            raise SchemaError(f"{self.path} is not a usable SQLite database: {exc}") from exc
        self._lock = threading.RLock()
        self._version = 0
        #: The search index in memory (store._search_index): built by the first search, then brought up
        #: to date from the change feed by each search (not dropped by writes).
        self._search_index: SearchIndex | None = None
        self._in_tx = False
        self._depth = 0
        self._group: CommitGroup | None = None  # set inside grouped()
        # text -> strings.num for string_num(). Rows of ``strings`` are never deleted or renumbered
        # (INTEGER PRIMARY KEY survives VACUUM); only a rollback can take one back, and every
        # rollback on this connection empties the cache (_forget_strings).
        self._string_nums: dict[str, int] = {}
        try:
            self._migrate()
        except BaseException:
            self._db.conn.close()
            raise
        self._journal: RunJournal | None = None
        # SQLite's data_version when this connection last checked its file before a commit: unchanged
        # means no other connection has committed since (see _release_log).
        self._others_version = self.data_version()
        #: Called with the store after every committed add (see the engine's Upkeep).
        self.after_add: list[Callable[["MemoryStore"], object]] = []
        #: Called with the store when an add begins; each returns a context manager left when that add
        #: ends, committed or not (the engine's Upkeep: its worker steps aside while an add runs).
        self.add_guards: list[Callable[["MemoryStore"], AbstractContextManager[object]]] = []
        #: The same around every :meth:`search` (the engine's Upkeep: its worker steps aside while the
        #: caller searches, so a search does not share the cores and the interpreter with a pass).
        self.search_guards: list[Callable[["MemoryStore"], AbstractContextManager[object]]] = []
        #: Called with the store when :meth:`close` begins, before the file is closed (the engine's
        #: Upkeep stops its worker there).
        self.before_close: list[Callable[["MemoryStore"], object]] = []

    # --- lifecycle -----------------------------------------------------------

    def close(self) -> None:
        """Stop what runs on the store's behalf (:attr:`before_close`), checkpoint the WAL and close the file."""
        for hook in list(self.before_close):
            hook(self)
        if not self.read_only:
            try:
                self._flush_uses()
            except Exception:  # noqa: BLE001 - uses are a signal: closing must not fail for them
                pass
            if self._file.change() is not None:
                self._release_log()
            else:
                try:
                    self._db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                except Exception:  # closing must not fail because another reader is busy
                    pass
        self._db.conn.close()

    def __enter__(self) -> "MemoryStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _apply_size_cap(self) -> None:
        if self.max_file_bytes is None:
            return
        conn = self._db.conn
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        # SQLite keeps the cap at no less than the file's current page count.
        conn.execute(f"PRAGMA max_page_count = {max(1, self.max_file_bytes // page_size)}")

    def _refusal(self, exc: BaseException) -> StoreError | None:
        """The typed error for the system refusing a write, or None (:func:`.refusals.refusal`)."""
        return refusal(exc, self.path, self.max_file_bytes)

    def _raise_refusal(self, exc: BaseException) -> None:
        """Raise the typed error for ``exc`` if it is a refusal (see :meth:`_refusal`); else return."""
        typed = self._refusal(exc)
        if typed is not None:
            raise typed from exc

    def _migrate(self) -> None:
        conn = self._db.conn
        try:
            if not self.read_only:
                conn.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
            done = {row[0] for row in conn.execute("SELECT name FROM _migrations")}
        except Exception as exc:
            self._raise_refusal(exc)
            raise SchemaError(f"{self.path} is not a memrefine store: {exc}") from exc
        known = {m.name for m in MIGRATIONS}
        if done - known:
            raise SchemaError(
                f"{self.path} was written by a newer memrefine_edge (unknown migrations: "
                f"{', '.join(sorted(done - known))}); upgrade the package"
            )
        pending = [m.name for m in MIGRATIONS if m.name not in done]
        if pending and self.read_only:
            raise SchemaError(
                f"{self.path} was written by an older memrefine_edge and must be upgraded before it can be read "
                f"read-only (pending: {', '.join(pending)}); run `memrefine upgrade --db {self.path}`"
            )
        for migration in MIGRATIONS:
            if migration.name in done:
                continue
            with self.atomic():
                for statement in split_sql(migration.sql):
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO _migrations (name, applied_at) VALUES (?, datetime('now'))",
                    (migration.name,),
                )

    @property
    def applied_migrations(self) -> list[str]:
        """Names of the migrations recorded in this file, in order applied."""
        return [r[0] for r in self._db.conn.execute("SELECT name FROM _migrations ORDER BY rowid")]

    @property
    def journal(self) -> "RunJournal":
        """The run journal (audit log, preserved pairs, undo history) of this store."""
        if self._journal is None:
            self._journal = RunJournal(self, self._db)
        return self._journal

    # --- reading -------------------------------------------------------------

    def __len__(self) -> int:
        return int(self._db.conn.execute("SELECT value FROM totals WHERE name = 'entries'").fetchone()[0])

    def __contains__(self, entry_id: object) -> bool:
        return (
            is_lookup_key(entry_id)
            and self._db.conn.execute("SELECT 1 FROM entries WHERE id = ?", (entry_id,)).fetchone() is not None
        )

    def ids(self) -> list[str]:
        """Live entry ids in insertion order."""
        return [r[0] for r in self._db.conn.execute("SELECT id FROM entries ORDER BY seq")]

    def contents(self, *, page_rows: int = 2048) -> Iterator[str]:
        """The text of every live entry in insertion order, read ``page_rows`` at a time.

        Memory stays that of one page, whatever the store's size (:meth:`entries`
        reads every row at once, for one consistent snapshot with the links);
        an entry added between pages after the current one is included.
        """
        after = -(1 << 63)  # below any seq SQLite can store
        while True:
            rows = self._db.conn.execute("SELECT seq, content FROM entries WHERE seq > ? ORDER BY seq LIMIT ?",
                                         (after, page_rows)).fetchall()
            if not rows:
                return
            after = rows[-1][0]
            for _, content in rows:
                yield content

    def get(self, entry_id: str) -> Entry:
        """The entry with this id; :class:`EntryNotFoundError` if there is none."""
        if not is_lookup_key(entry_id):
            raise EntryNotFoundError.for_id(entry_id)
        row = self._db.conn.execute(
            "SELECT id, content, keywords, timestamps, metadata, provenance FROM entries WHERE id = ?",
            (entry_id,),
        ).fetchone()
        if row is None:
            raise EntryNotFoundError.for_id(entry_id)
        return self._row_to_entry(row, self._links_of(entry_id))

    def entries(self) -> Iterator[Entry]:
        """Every live entry, in insertion order."""
        links: dict[str, list[str]] = {}
        with self._read_snapshot():  # links and entries of the same state, whatever others commit
            for src, dst in self._db.conn.execute("SELECT src, dst FROM links ORDER BY src, ord"):
                links.setdefault(src, []).append(dst)
            rows = self._db.conn.execute(
                "SELECT id, content, keywords, timestamps, metadata, provenance FROM entries ORDER BY seq"
            ).fetchall()
        for row in rows:
            yield self._row_to_entry(row, links.get(row[0], []))

    def seq_of(self, entry_id: str) -> int:
        """Insertion sequence number of an entry (the tie-break order)."""
        if not is_lookup_key(entry_id):
            raise EntryNotFoundError.for_id(entry_id)
        row = self._db.conn.execute("SELECT seq FROM entries WHERE id = ?", (entry_id,)).fetchone()
        if row is None:
            raise EntryNotFoundError.for_id(entry_id)
        return int(row[0])

    def _links_of(self, entry_id: str) -> list[str]:
        return [r[0] for r in self._db.conn.execute("SELECT dst FROM links WHERE src = ? ORDER BY ord", (entry_id,))]

    @staticmethod
    def _row_to_entry(row: Sequence[Any], links: Sequence[str]) -> Entry:
        return Entry(
            id=row[0],
            content=row[1],
            keywords=tuple(json.loads(row[2])),
            links=tuple(links),
            timestamps=tuple(json.loads(row[3])),
            metadata=json.loads(row[4]),
            provenance=tuple(json.loads(row[5])),
        )

    # --- writing -------------------------------------------------------------

    def add(self, entry: Entry, *, unknown_links: str = "error") -> Entry:
        """Insert one entry (see :meth:`add_many`)."""
        return self.add_many([entry], unknown_links=unknown_links)[0]

    def add_many(self, entries: Iterable[Entry], *, unknown_links: str = "error") -> list[Entry]:
        """Insert entries in one transaction: all of them, or none.

        Links may point to entries of the same batch. ``unknown_links`` says
        what to do with a link to an id that exists nowhere: ``"error"``
        (default) or ``"drop"`` (the returned entries show what was kept).
        """
        if unknown_links not in ("error", "drop"):
            raise ValueError("unknown_links must be 'error' or 'drop'")
        if isinstance(entries, Entry) or not isinstance(entries, Iterable):
            raise InvalidEntryError(f"add_many takes an iterable of entries, got {type(entries).__name__}")
        with ExitStack() as guards:
            for guard in list(self.add_guards):
                guards.enter_context(guard(self))
            out = self._add_batch(entries, unknown_links)
        if not self._in_tx:  # only once the entries are committed, never inside a decision
            for hook in list(self.after_add):
                hook(self)
        return out

    def _add_batch(self, entries: Iterable[Entry], unknown_links: str) -> list[Entry]:
        """The work of :meth:`add_many`: validate, check the ids and links, insert and commit."""
        batch = [validate_entry(e) for e in entries]
        seen: set[str] = set()
        for e in batch:
            if e.id in seen:
                raise DuplicateIdError(f"id {e.id!r} appears twice in the input")
            seen.add(e.id)
        with self.atomic():
            taken = [e.id for e in batch if e.id in self]
            if taken:
                raise DuplicateIdError(f"id {taken[0]!r} is already in the store ({len(taken)} taken in all)")
            out = []
            for e in batch:
                links = tuple(link for link in e.links if link in seen or link in self)
                missing = [link for link in e.links if link not in links]
                if missing and unknown_links == "error":
                    raise InvalidEntryError(f"entry {e.id!r} links to unknown id {missing[0]!r}")
                out.append(replace(e, links=links))
            for e in out:
                self._insert(e)
        return out

    def _insert(self, e: Entry, *, seq: int | None = None) -> None:
        conn = self._db.conn
        conn.execute(
            "INSERT INTO entries (seq, id, content, keywords, timestamps, metadata, provenance, content_hash,"
            " json_bytes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                seq,
                e.id,
                e.content,
                _dumps(list(e.keywords)),
                _dumps(list(e.timestamps)),
                _dumps(dict(e.metadata)),
                _dumps(list(e.provenance)),
                stored_hash(e.content),
                json_size(e),
            ),
        )
        conn.executemany(
            "INSERT INTO links (src, dst, ord) VALUES (?, ?, ?)",
            [(e.id, dst, i) for i, dst in enumerate(e.links)],
        )

    def reinsert(self, rows: Iterable[Sequence[Any]]) -> None:
        """Put entry rows back exactly as they were (all of :data:`ENTRY_COLUMNS`, seq and embedding
        included); used by undo. Links are restored separately with :meth:`add_links`."""
        marks = ",".join("?" * len(ENTRY_COLUMNS.split(",")))
        with self.atomic():
            self._db.conn.executemany(f"INSERT INTO entries ({ENTRY_COLUMNS}) VALUES ({marks})", list(rows))

    def remove(self, entry_id: str) -> list[tuple[str, str, int]]:
        """Delete an entry and prune every link to or from it.

        Returns the removed links as ``(src, dst, ord)`` so a caller that
        keeps history can restore them.
        """
        conn = self._db.conn
        with self.atomic():
            if entry_id not in self:
                raise EntryNotFoundError.for_id(entry_id)
            removed = self.links_touching(entry_id)
            sources = sorted({src for src, dst, _ in removed if dst == entry_id and src != entry_id})
            conn.execute("DELETE FROM links WHERE src = ? OR dst = ?", (entry_id, entry_id))
            conn.execute("DELETE FROM entries WHERE id = ?", (entry_id,))
            for src in sources:  # their link lists shrank: so did their json size
                self._refresh_size(src)
        return removed

    def links_touching(self, entry_id: str) -> list[tuple[str, str, int]]:
        """The links (``src, dst, ord``) to or from an entry, in the order :meth:`remove` returns them."""
        return [tuple(r) for r in self._db.conn.execute(
            "SELECT src, dst, ord FROM links WHERE src = ? OR dst = ? ORDER BY src, ord", (entry_id, entry_id))]

    def add_links(self, links: Iterable[tuple[str, str, int]]) -> None:
        """Re-insert links (``src, dst, ord``) between live entries; used by undo."""
        with self.atomic():
            touched = set()
            for src, dst, ord_ in links:
                if src in self and dst in self:
                    self._db.conn.execute(
                        "INSERT OR IGNORE INTO links (src, dst, ord) VALUES (?, ?, ?)", (src, dst, ord_)
                    )
                    touched.add(src)
            for src in touched:
                self._refresh_size(src)

    def _refresh_size(self, entry_id: str) -> None:
        self._db.conn.execute(
            "UPDATE entries SET json_bytes = ? WHERE id = ?", (json_size(self.get(entry_id)), entry_id)
        )

    def max_seq(self) -> int:
        """The highest insertion sequence number of a live entry (0 for an empty store)."""
        return int(self._db.conn.execute("SELECT COALESCE(MAX(seq), 0) FROM entries").fetchone()[0])

    # --- strings ---------------------------------------------------------------

    def string_num(self, text: str, *, add: bool = False) -> int | None:
        """The number of ``text`` in the store's table of strings (ids, actions and model names named by
        number elsewhere); with ``add``, added if new (inside the caller's transaction), else None if absent."""
        # Remembered: a decision names each id of its pair two or three times (audit row,
        # preserved pair, undo history) and its action and source every time.
        num = self._string_nums.get(text)
        if num is not None:
            return num
        conn = self._db.conn
        row = conn.execute("SELECT num FROM strings WHERE text = ?", (text,)).fetchone()
        if row is not None:
            num = int(row[0])
        elif not add:
            return None
        else:
            num = conn.execute("INSERT INTO strings (text) VALUES (?)", (text,)).lastrowid
            assert num is not None  # an INSERT into a rowid table always sets it
        if len(self._string_nums) >= STRING_CACHE:
            self._string_nums.clear()  # bounded: a long run names 100k ids once or twice each
        self._string_nums[text] = num
        return num

    def _forget_strings(self) -> None:
        # A rollback may take back strings this connection added: their numbers would be
        # reused for other texts, so nothing remembered may outlive one.
        self._string_nums.clear()

    # --- metadata ------------------------------------------------------------

    def get_meta(self, key: str, default: str | None = None) -> str | None:
        row = self._db.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else default

    def set_meta(self, key: str, value: str) -> None:
        with self.atomic():
            self._db.conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def delete_meta(self, key: str) -> None:
        with self.atomic():
            self._db.conn.execute("DELETE FROM meta WHERE key = ?", (key,))




def _dumps(value: Any) -> str:
    """A field as an entry row stores it: JSON without the spaces after separators (rows written
    before keep theirs; both read the same)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
