"""Concurrency: readers during a compression, the run lock, a crashed lock holder.

The compression runs in a subprocess (``tests/support/crash_worker.py``) that pauses
every few decisions and waits to be told to go on, so the test knows exactly
what is committed at each pause, while readers (a thread with its own
connection in this process, and another process) read freely in between.
Nothing asserted depends on timing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from memrefine_edge.core import Entry, RunLockedError
from memrefine_edge.engine import Upkeep
from memrefine_edge.store import MemoryStore
from memrefine_edge.testing import HashEncoder
from tests.support.crash_fakes import (
    WORDS,
    Config,
    campaign_entries,
    check_invariants,
    check_snapshot,
    compress_in_process,
    compressor_for,
    decision_keys,
    export,
    make_campaign_store,
    read_everything,
)

HERE = Path(__file__).resolve().parents[1] / "support"  # the workers and fakes run in subprocesses
CFG = Config("paper", budget=0.45)
TIMEOUT = 60


class Worker:
    """The compression subprocess, driven line by line."""

    def __init__(self, db: Path, *extra: str) -> None:
        self.proc = subprocess.Popen([sys.executable, str(HERE / "crash_worker.py"), str(db), *CFG.argv(), *extra],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        self._watchdog = threading.Timer(TIMEOUT, self.proc.kill)
        self._watchdog.start()

    def next_line(self, *prefixes: str) -> str:
        while True:
            line = self.proc.stdout.readline()
            assert line, f"worker ended early: {self.proc.stderr.read()}"
            if line.startswith(prefixes):
                return line.strip()

    def go(self) -> None:
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        assert self.proc.wait() == -signal.SIGKILL

    def finish(self) -> None:
        self.proc.stdin.close()  # the worker waits for this after the run
        assert self.proc.wait() == 0, self.proc.stderr.read()

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *exc: object) -> None:
        self._watchdog.cancel()
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if not f.closed:
                f.close()


@pytest.fixture
def stores(tmp_path):
    """(db, reference): a fresh store, and the same store compressed by one uninterrupted run."""
    db, ref = tmp_path / "memory.db", tmp_path / "reference.db"
    make_campaign_store(db, n=CFG.n, seed=CFG.seed)
    make_campaign_store(ref, n=CFG.n, seed=CFG.seed)
    compress_in_process(ref, CFG)
    with MemoryStore(ref, create=False) as s:  # steps: every decision, preserves (not audited) included
        yield db, {"export": export(s), "decisions": decision_keys(s), "steps": s.journal.runs()[0].cursor}


def assert_equals_reference(db: Path, reference: dict) -> None:
    with MemoryStore(db, create=False) as s:
        assert s.integrity_check() == "ok"
        assert s.journal.unfinished_run() is None and len(s.journal.runs()) == 1
        assert decision_keys(s) == reference["decisions"]
        assert export(s) == reference["export"]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(HERE / "cli_fake_models.py"), *args], capture_output=True, text=True,
                          timeout=TIMEOUT)


@pytest.mark.slow
def test_readers_never_fail_and_see_whole_decisions_while_a_compression_runs(stores, tmp_path):
    db, reference = stores
    original = campaign_entries(CFG.n, CFG.seed)
    original_ids = {e.id for e in original}
    errors: list[BaseException] = []
    rounds = [0]
    stop, first_round = threading.Event(), threading.Event()

    def reader() -> None:  # its own connection, reading as fast as it can
        try:
            with MemoryStore(db, create=False) as store:
                encoder = HashEncoder()
                while not stop.is_set():
                    read_everything(store, encoder, WORDS[rounds[0] % len(WORDS)])
                    check_snapshot(db, original_ids)
                    rounds[0] += 1
                    first_round.set()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
            first_round.set()

    stop_file = tmp_path / "stop-reading"
    other = subprocess.Popen([sys.executable, str(HERE / "read_worker.py"), str(db), str(CFG.n), str(CFG.seed),
                              str(stop_file)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    thread = threading.Thread(target=reader)
    pauses = []
    try:
        with Worker(db, "--release", "0", "--window", "1000000", "--pause-every", "5", "--sleep-ms", "2") as w:
            w.next_line("at 0")
            thread.start()
            assert first_round.wait(TIMEOUT)
            # This process's long-lived store: its answers must follow the other process's commits.
            with MemoryStore(db, create=False) as mine:
                encoder = HashEncoder()
                w.go()
                while True:
                    line = w.next_line("paused", "done")
                    if line.startswith("done"):
                        break
                    n = int(line.split()[1])
                    pauses.append(n)
                    # Paused: exactly n decisions are committed, and everything agrees on them.
                    summary = check_invariants(db, original, reference["decisions"])
                    assert summary["decisions"] == n and summary["unfinished"]
                    assert check_snapshot(db, original_ids) == n
                    for query in ("tea coffee", "sister birthday", WORDS[n % len(WORDS)]):
                        with MemoryStore(db, create=False) as fresh:
                            expected = read_everything(fresh, encoder, query)
                        assert read_everything(mine, encoder, query) == expected, (n, query)
                    w.go()
                w.finish()
                expected = {q: read_everything(mine, encoder, q) for q in ("tea coffee", "dog cat")}
            with MemoryStore(db, create=False) as fresh:
                assert {q: read_everything(fresh, encoder, q) for q in expected} == expected
    finally:
        stop.set()
        stop_file.touch()
        if thread.is_alive() or thread.ident:
            thread.join(TIMEOUT)
        out, err = other.communicate(timeout=TIMEOUT)
    assert not errors, errors[0]
    assert other.returncode == 0, err
    assert rounds[0] >= 1 and int(out) >= 1
    assert pauses == list(range(5, reference["steps"] + 1, 5))
    assert_equals_reference(db, reference)


@pytest.mark.slow
def test_second_run_is_refused_and_a_killed_holder_leaves_the_lock_free(stores):
    db, reference = stores
    original = campaign_entries(CFG.n, CFG.seed)
    with Worker(db, "--pause-every", "7") as w:
        w.next_line("paused 7")  # the worker holds the run lock now
        with MemoryStore(db, create=False) as s:
            run_id = s.journal.unfinished_run().run_id
            with pytest.raises(RunLockedError, match="another compression is running on") as info:
                compressor_for(s, mode=CFG.mode, policy=CFG.policy, min_similarity=None).run(budget=CFG.budget)
            assert str(db) in str(info.value) and "wait for it to finish" in str(info.value)
            assert s.journal.unfinished_run().cursor == 7  # refused before anything was done

        # The command line: one clear line on stderr, exit code 1, no traceback; same for undo.
        for args in (["compress", "--db", str(db), "--budget", str(CFG.budget), "--mode", CFG.mode],
                     ["undo", "--db", str(db), run_id]):
            refused = cli(*args)
            assert refused.returncode == 1, (args, refused.stdout, refused.stderr)
            assert refused.stderr.startswith("Error: another compression is running on"), refused.stderr
            assert str(db) in refused.stderr and "Traceback" not in refused.stderr
            assert refused.stdout == ""
        summary = check_invariants(db, original, reference["decisions"])
        assert summary["decisions"] == 7 and summary["unfinished"]

        w.kill()  # SIGKILL while it holds the lock: flock is released with the process

    summary = check_invariants(db, original, reference["decisions"])
    assert summary["decisions"] == 7 and summary["unfinished"]
    # The same command again, through the command line: it takes the lock and finishes the run.
    resumed = cli("compress", "--db", str(db), "--budget", str(CFG.budget), "--mode", CFG.mode, "--json")
    assert resumed.returncode == 0, resumed.stderr
    report = json.loads(resumed.stdout)
    assert report["resumed"] and report["run_id"] == run_id and report["budget_met"]
    assert report["decisions"] == reference["steps"]
    assert_equals_reference(db, reference)


@pytest.mark.slow
def test_killed_holder_mid_transaction_then_resume_in_process(stores):
    """Killed inside a decision's transaction (just before COMMIT): lock and write lock both come free."""
    db, reference = stores
    original = campaign_entries(CFG.n, CFG.seed)
    killed = subprocess.run([sys.executable, str(HERE / "crash_worker.py"), str(db), *CFG.argv(), "--kill",
                             "commit:11"], capture_output=True, text=True, timeout=TIMEOUT)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert check_invariants(db, original, reference["decisions"])["decisions"] == 11
    report = compress_in_process(db, CFG)
    assert report.resumed and report.budget_met
    assert_equals_reference(db, reference)


@pytest.mark.slow
def test_upkeep_on_add_skips_its_pass_while_another_process_compresses(stores):
    """An add that committed must not raise because a compression elsewhere holds the lock."""
    db, _ = stores
    with Worker(db, "--pause-every", "4") as w:
        w.next_line("paused 4")  # the worker holds the run lock
        with MemoryStore(db, create=False) as s:
            low = 3 * s.min_entry_json_bytes()
            upkeep = Upkeep(compressor_for(s, mode="strict", policy="upkeep", min_similarity=None),
                            high_bytes=low, low_bytes=low).install()
            s.add(Entry(id="late-1", content="Ana: the new job starts in June", provenance=("D9:1",)))
            assert "late-1" in s and upkeep.reports == []  # committed, pass not run (the lock is held), no error
            while True:
                w.go()
                if w.next_line("paused", "done").startswith("done"):
                    break
            w.finish()
            assert upkeep.wait_idle()
            (report,) = upkeep.reports  # the lock is free again: the worker, trying again, runs the pass
            assert report.budget_met and s.json_bytes() <= low and upkeep.error is None
            s.add(Entry(id="late-2", content="Ben: the bike was fixed on Friday", provenance=("D9:2",)))
            assert upkeep.wait_idle() and all(r.budget_met for r in upkeep.reports) and s.json_bytes() <= low
            assert s.integrity_check() == "ok" and s.journal.unfinished_run() is None


_OPEN_AND_CLOSE = "import sys\nfrom memrefine_edge.store import MemoryStore\nMemoryStore(sys.argv[1], create=False).close()\n"
_READ_IDS = ("import sys\nfrom memrefine_edge.store import MemoryStore\n"
             "with MemoryStore(sys.argv[1], create=False, read_only=True) as s:\n    print(' '.join(s.ids()))\n")


def test_a_second_store_on_the_same_file_keeps_the_first_ones_locks(tmp_path):
    """Opening a store checks the file is one (its header): that read must not drop this process's SQLite locks.

    Closing any descriptor of a file drops every POSIX lock the process holds on it, the locks SQLite's
    connections hold included. Without them another process closing the store believes it was the last
    and removes the write-ahead log the first store still writes to: its commits vanish for everyone else.
    """
    db = tmp_path / "memory.db"
    MemoryStore(db).close()
    first = MemoryStore(db, create=False)
    try:
        first.add(Entry(id="a", content="Ana likes green tea."))
        second = MemoryStore(db, create=False)  # the same file again, in this process (a reader thread, say)
        second.close()
        other = subprocess.run([sys.executable, "-c", _OPEN_AND_CLOSE, str(db)], capture_output=True, text=True,
                               timeout=TIMEOUT)
        assert other.returncode == 0, other.stderr
        assert Path(f"{db}-wal").exists()  # the other process knew it was not the last: the log stays
        first.add(Entry(id="b", content="Ben likes black coffee."))
        seen = subprocess.run([sys.executable, "-c", _READ_IDS, str(db)], capture_output=True, text=True,
                              timeout=TIMEOUT)
        assert seen.stdout.split() == ["a", "b"], seen.stderr  # the first store's commit, seen by others
    finally:
        first.close()
    with MemoryStore(db, create=False) as store:
        assert store.integrity_check() == "ok" and store.ids() == ["a", "b"]
