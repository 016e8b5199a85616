"""A store file replaced (renamed over, or removed) while a process has it open.

A process that holds a store keeps writing to the file it opened, which no
path reaches any more once another file is renamed over it: every write it
acknowledged would be lost with that file. SQLite keeps the write-ahead log
and its index beside the *path*, so the new file and the old process share
them. The store refuses every write once the file at its path is not the one
it opened, and read-only commands never copy a write-ahead log into the file.
The holder runs in its own process (``tests/support/holder_worker.py``), as a user's
agent would, and the commands are the real command line.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from memrefine_edge.core import Entry, StoreError, StoreReplacedError
from memrefine_edge.store import MemoryStore

HERE = Path(__file__).resolve().parents[1] / "support"  # the workers and fakes run in subprocesses
TIMEOUT = 60


def _entries(prefix: str, n: int) -> list[Entry]:
    return [Entry(id=f"{prefix}{i}", content=f"{prefix} note {i}: Ben paddled across the fjord with Marit in June.")
            for i in range(n)]


def _store(path: Path, prefix: str, n: int) -> list[str]:
    with MemoryStore(path) as store:
        store.add_many(_entries(prefix, n))
        return store.ids()


def _file_alone(db: Path, folder: Path) -> tuple[str, list[str]]:
    """Integrity and ids of the database file by itself, without the write-ahead log beside it."""
    folder.mkdir()
    copy = folder / "alone.db"
    shutil.copyfile(db, copy)
    conn = sqlite3.connect(copy)
    try:
        return (conn.execute("PRAGMA integrity_check").fetchone()[0],
                [r[0] for r in conn.execute("SELECT id FROM entries ORDER BY seq")])
    finally:
        conn.close()


def _through_the_path(db: Path) -> tuple[str, list[str]]:
    with MemoryStore(db, create=False, read_only=True) as store:
        return store.integrity_check(), store.ids()


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(HERE / "cli_fake_models.py"), *args], capture_output=True,
                          text=True, timeout=TIMEOUT)


class Holder:
    """``tests/support/holder_worker.py``: a process that keeps the store open and adds when told to."""

    def __init__(self, db: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, str(HERE / "holder_worker.py"), str(db)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        self._watchdog = threading.Timer(TIMEOUT, self.proc.kill)
        self._watchdog.start()
        assert self._line() == "open"

    def _line(self) -> str:
        line = self.proc.stdout.readline()
        assert line, f"the holder ended early: {self.proc.stderr.read()}"
        return line.strip()

    def ask(self, command: str) -> str:
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self._line()

    def quit(self) -> None:
        assert self.ask("quit") == "closed"
        assert self.proc.wait() == 0, self.proc.stderr.read()

    def __enter__(self) -> "Holder":
        return self

    def __exit__(self, *exc: object) -> None:
        self._watchdog.cancel()
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            f.close()


def _assert_refused(answer: str, db: Path) -> None:
    assert answer.startswith("refused StoreReplacedError: "), answer
    assert str(db) in answer and "replaced" in answer and "nothing was written" in answer, answer


def test_a_writer_whose_file_is_renamed_over_refuses_and_readers_see_the_new_file(tmp_path):
    db, new = tmp_path / "memory.db", tmp_path / "new.db"
    _store(db, "old", 20)
    new_ids = _store(new, "new", 12)
    with Holder(db) as a:
        for i in range(3):  # committed: in the write-ahead log beside the path, not yet in the file
            assert a.ask(f"add a{i}") == "ok"
        os.replace(new, db)
        _assert_refused(a.ask("add b0"), db)  # not acknowledged into a file nothing reaches any more
        _assert_refused(a.ask("group b1 b2"), db)  # a group commit too
        _assert_refused(a.ask("add b3"), db)  # and every later write
        # A read-only command in another process reads the new file, and writes nothing into it.
        stats = cli("stats", "--db", str(db), "--json")
        assert stats.returncode == 0, stats.stderr
        assert json.loads(stats.stdout)["entries"] == len(new_ids)
        assert _file_alone(db, tmp_path / "during") == ("ok", new_ids)
        a.quit()
    assert _file_alone(db, tmp_path / "after") == ("ok", new_ids)
    assert _through_the_path(db) == ("ok", new_ids)
    assert cli("stats", "--db", str(db)).returncode == 0


def test_a_read_only_command_run_before_the_writer_notices_never_writes_its_log_into_the_new_file(tmp_path):
    db, new = tmp_path / "memory.db", tmp_path / "new.db"
    _store(db, "old", 20)
    new_ids = _store(new, "new", 12)
    with Holder(db) as a:
        for i in range(5):
            assert a.ask(f"add a{i}") == "ok"
        os.replace(new, db)
        # The holder has not written since: its log, beside the path, still holds the old file's pages.
        # What a reader sees through it is not asserted; that the file stays sound is.
        for args in (("stats",), ("export", str(tmp_path / "out.jsonl")), ("log",), ("budget", "show")):
            cli(*args, "--db", str(db))
            assert _file_alone(db, tmp_path / f"after-{args[0]}") == ("ok", new_ids)
        _assert_refused(a.ask("add b0"), db)
        a.quit()
    assert _file_alone(db, tmp_path / "end") == ("ok", new_ids)
    assert _through_the_path(db) == ("ok", new_ids)


def test_read_only_commands_leave_the_file_as_a_killed_writer_left_it(tmp_path):
    db = tmp_path / "memory.db"
    _store(db, "old", 10)
    # A writer killed with its last commits still in the write-ahead log (never checkpointed).
    code = ("import os, sys\nfrom memrefine_edge.core import Entry\nfrom memrefine_edge.store import MemoryStore\n"
            "s = MemoryStore(sys.argv[1], create=False)\n"
            "s.add_many([Entry(id=f'late{i}', content=f'late note {i}: Ana moved to Porto.') for i in range(4)])\n"
            "os.kill(os.getpid(), 9)\n")
    killed = subprocess.run([sys.executable, "-c", code, str(db)], capture_output=True, text=True, timeout=TIMEOUT)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    raw = db.read_bytes()
    for args in (("stats", "--json"), ("export", str(tmp_path / "out.jsonl")), ("log",), ("budget", "show")):
        res = cli(*args, "--db", str(db))
        assert res.returncode == 0, (args, res.stderr)
        assert db.read_bytes() == raw, args  # the log was read, not copied into the file
    stats = json.loads(cli("stats", "--db", str(db), "--json").stdout)
    assert stats["entries"] == 14  # the killed writer's commits are read through the log
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == 14
    with MemoryStore(db, create=False) as store:  # the next writer takes the log in, as always
        assert store.integrity_check() == "ok" and len(store) == 14


# --- the library, one process ----------------------------------------------------------------------------


def test_every_write_is_refused_once_the_file_is_replaced_and_nothing_lands_anywhere(tmp_path):
    db, new = tmp_path / "memory.db", tmp_path / "new.db"
    _store(db, "old", 5)
    new_ids = _store(new, "new", 3)
    store = MemoryStore(db, create=False)
    try:
        store.add(Entry(id="before", content="Ana likes green tea."))
        os.replace(new, db)
        writes = {
            "add": lambda: store.add(Entry(id="x", content="Ben likes black coffee.")),
            "add_many": lambda: store.add_many(_entries("y", 2)),
            "remove": lambda: store.remove("old1"),
            "set_meta": lambda: store.set_meta("k", "v"),
            "vacuum": store.vacuum,
        }
        for name, write in writes.items():
            with pytest.raises(StoreReplacedError) as info:
                write()
            assert isinstance(info.value, StoreError), name
            assert str(db) in str(info.value) and "nothing was written" in str(info.value), name
        with pytest.raises(StoreReplacedError):
            with store.grouped(window_s=3600):
                store.add(Entry(id="g", content="Ben sold his kayak."))
        assert "x" not in store and "old1" in store  # not even into the old file
    finally:
        store.close()
    assert _through_the_path(db) == ("ok", new_ids)


def test_a_removed_or_moved_file_is_refused_too(tmp_path):
    db = tmp_path / "memory.db"
    _store(db, "old", 3)
    with MemoryStore(db, create=False) as store:
        os.replace(db, tmp_path / "moved.db")
        with pytest.raises(StoreReplacedError, match="moved away or removed") as info:
            store.add(Entry(id="x", content="Ben likes black coffee."))
        assert "nothing was written" in str(info.value)
        os.replace(tmp_path / "moved.db", db)  # the same file back in place: writes go on
        store.add(Entry(id="x", content="Ben likes black coffee."))
    assert _through_the_path(db)[1] == ["old0", "old1", "old2", "x"]


def test_a_store_opened_through_a_link_keeps_writing_when_the_link_is_pointed_elsewhere(tmp_path):
    # The write-ahead log lives beside the real file, so the link's target changing moves nothing.
    real, other, link = tmp_path / "real.db", tmp_path / "other.db", tmp_path / "link.db"
    _store(real, "r", 2)
    _store(other, "o", 2)
    link.symlink_to(real)
    with MemoryStore(link, create=False) as store:
        link.unlink()
        link.symlink_to(other)
        store.add(Entry(id="x", content="Ben likes black coffee."))
    assert _through_the_path(real)[1] == ["r0", "r1", "x"]
    assert _through_the_path(other)[1] == ["o0", "o1"]


def test_a_compression_whose_file_is_replaced_mid_run_stops_and_the_new_file_stays_sound(tmp_path):
    from tests.support.crash_fakes import Config, make_campaign_store

    cfg = Config("paper", budget=0.45)
    db, new = tmp_path / "memory.db", tmp_path / "new.db"
    make_campaign_store(db, n=cfg.n, seed=cfg.seed)
    new_ids = _store(new, "new", 12)
    worker = subprocess.Popen([sys.executable, str(HERE / "crash_worker.py"), str(db), *cfg.argv(), "--pause-every",
                               "5"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while not (line := worker.stdout.readline()).startswith("paused 5"):
            assert line, worker.stderr.read()
        os.replace(new, db)  # five decisions committed, the run lock held
        worker.stdin.write("go\n")
        worker.stdin.flush()
        out, err = worker.communicate(timeout=TIMEOUT)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    assert worker.returncode == 1 and "StoreReplacedError" in err and "nothing was written" in err, (out, err)
    assert "done" not in out
    assert _file_alone(db, tmp_path / "alone") == ("ok", new_ids)
    assert _through_the_path(db) == ("ok", new_ids)
