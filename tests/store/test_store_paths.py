"""What ``--db`` may name, and the settings every command reads from the environment.

A store path names a regular file or nothing yet. A FIFO, a device, a socket
or a folder is refused with one line before anything opens it (opening a
FIFO waits for a writer forever) and before anything is created beside it
(no run lock). A malformed ``MEMREFINE_*`` setting is one line too, never a
traceback, and nothing is written.
"""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from memrefine_edge.cli import cli
from memrefine_edge.core import ConfigurationError, Entry, StorePathError
from memrefine_edge.store import MemoryStore, RunLock, sample_path

HERE = Path(__file__).resolve().parents[1] / "support"  # the workers and fakes run in subprocesses
FAKE_CLI = HERE / "cli_fake_models.py"
SECONDS = 30  # a refused command ends at once; one that opened a FIFO would wait forever

#: Every command that takes --db, as a user would type it (the store path is appended).
COMMANDS = (
    ("stats",), ("log",), ("budget", "show"), ("budget", "set", "0.5"), ("upgrade",), ("search", "tea"),
    ("import", "--format", "jsonl", str(sample_path())), ("compress", "--budget", "0.5"),
    ("compress", "--budget", "0.5", "--dry-run"), ("undo", "run-1"), ("purge-history", "--yes"),
)


def _run_all(db: Path, cwd: Path, *, from_env: bool = False) -> dict[tuple[str, ...], subprocess.CompletedProcess]:
    """Every command on ``db`` (given as ``--db``, or as ``$MEMREFINE_DB``) at once, each in its own process;
    one still running after SECONDS is killed."""
    env = {**os.environ, "MEMREFINE_DB": str(db)} if from_env else None
    where = [] if from_env else ["--db", str(db)]
    procs = {args: subprocess.Popen([sys.executable, str(FAKE_CLI), *args, *where], cwd=cwd, env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for args in COMMANDS}
    done = {}
    for args, proc in procs.items():
        try:
            out, err = proc.communicate(timeout=SECONDS)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            err += "\n(still running: killed)"
        done[args] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return done


def _assert_refused_everywhere(db: Path, kind: str, cwd: Path, *, from_env: bool = False) -> None:
    for args, res in _run_all(db, cwd, from_env=from_env).items():
        assert res.returncode == 1, (args, res.returncode, res.stderr[-1500:])
        assert "Traceback" not in res.stderr, (args, res.stderr[-1500:])
        errors = [line for line in res.stderr.splitlines() if line.startswith("Error:")]
        assert errors == [f"Error: {db} is {kind}, not a database file; nothing was opened or created. Give the "
                          "path of a memory store file, or of a new one to create"], (args, res.stderr[-1500:])


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_a_fifo_is_refused_by_every_command_without_waiting_or_leaving_a_lock(tmp_path):
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    _assert_refused_everywhere(fifo, "a FIFO (named pipe)", tmp_path)
    assert _names(tmp_path) == ["f"]  # no f.lock, no half-made store beside it
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_link_to_a_fifo_is_refused_the_same_way(tmp_path):
    fifo, link = tmp_path / "f", tmp_path / "memory.db"
    os.mkfifo(fifo)
    link.symlink_to(fifo)
    _assert_refused_everywhere(link, "a FIFO (named pipe)", tmp_path)
    assert _names(tmp_path) == ["f", "memory.db"]


def test_a_socket_and_a_folder_are_refused(tmp_path):
    sock = tmp_path / "s.sock"
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(sock))
        _assert_refused_everywhere(sock, "a socket", tmp_path)
    finally:
        server.close()
    folder = tmp_path / "d.db"
    folder.mkdir()
    # --db names no folder (a usage error of the command line); $MEMREFINE_DB reaches the store's own check.
    res = subprocess.run([sys.executable, str(FAKE_CLI), "stats", "--db", str(folder)], capture_output=True, text=True,
                         timeout=SECONDS)
    assert res.returncode == 2 and "is a directory" in res.stderr and "Traceback" not in res.stderr
    _assert_refused_everywhere(folder, "a directory", tmp_path, from_env=True)
    _assert_refused_everywhere(sock, "a socket", tmp_path, from_env=True)
    assert _names(tmp_path) == ["d.db", "s.sock"] and _names(folder) == []


def test_dev_null_is_refused_and_nothing_is_created_beside_it(tmp_path):
    lock = Path("/dev/null.lock")
    existed = lock.exists()
    try:
        _assert_refused_everywhere(Path("/dev/null"), "a character device", tmp_path)
        assert lock.exists() == existed
    finally:
        if lock.exists() and not existed:
            lock.unlink()  # left by a run of this test on code that still created it
    assert _names(tmp_path) == []


def test_a_run_lock_path_that_is_a_fifo_is_refused_with_a_clear_error(tmp_path):
    db = tmp_path / "memory.db"
    with MemoryStore(db) as store:
        store.add(Entry(id="a", content="Ana likes green tea."))
    before = db.read_bytes()
    os.mkfifo(tmp_path / "memory.db.lock")
    for args in (("compress", "--budget", "0.5"), ("undo", "run-1"), ("purge-history", "--yes")):
        try:
            res = subprocess.run([sys.executable, str(FAKE_CLI), *args, "--db", str(db)], capture_output=True,
                                 text=True, timeout=SECONDS)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{args} waited on the FIFO for {SECONDS}s")
        assert res.returncode == 1 and "Traceback" not in res.stderr, (args, res.stderr[-1500:])
        assert res.stderr == (f"Error: the run lock {tmp_path / 'memory.db.lock'} is a FIFO (named pipe), not a "
                              "lock file; nothing was changed. Remove it (the next run makes a new one)\n"), args
    assert db.read_bytes() == before


@contextmanager
def _deadline(seconds: int):
    """Fail (instead of hanging the suite) if the block blocks on a FIFO."""
    def expired(_signum, _frame):
        raise AssertionError(f"still blocked after {seconds}s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_the_library_refuses_the_same_paths_before_opening_them(tmp_path):
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    for path, kind in ((fifo, "a FIFO"), (Path("/dev/null"), "a character device"), (tmp_path, "a directory")):
        for open_it in (lambda p: MemoryStore(p), lambda p: MemoryStore(p, read_only=True, create=False),
                        lambda p: RunLock(p).__enter__()):
            with _deadline(SECONDS), pytest.raises(StorePathError, match=f"is {kind}"):
                open_it(path)
    assert _names(tmp_path) == ["f"]
    assert not Path("/dev/null.lock").exists()


# --- settings from the environment -----------------------------------------------------------------


BAD_SETTINGS = [
    ("MEMREFINE_MAX_FILE_BYTES", "0"), ("MEMREFINE_MAX_FILE_BYTES", "-1"), ("MEMREFINE_MAX_FILE_BYTES", "abc"),
    ("MEMREFINE_MAX_FILE_BYTES", "1.5"), ("MEMREFINE_MAX_FILE_BYTES", "1e6"), ("MEMREFINE_MAX_FILE_BYTES", "1_000"),
    ("MEMREFINE_SYNCHRONOUS", "sometimes"), ("MEMREFINE_SYNCHRONOUS", "OFF"),
]


@pytest.mark.parametrize(("name", "value"), BAD_SETTINGS)
def test_a_malformed_setting_is_one_error_line_and_writes_nothing(tmp_path, monkeypatch, name, value):
    db = tmp_path / "memory.db"
    with MemoryStore(db) as store:
        store.add(Entry(id="a", content="Ana likes green tea."))
    before = db.read_bytes()
    monkeypatch.setenv(name, value)
    runner = CliRunner()
    for args in (["stats"], ["import", "--format", "jsonl", str(sample_path())], ["budget", "set", "0.5"]):
        res = runner.invoke(cli, [*args, "--db", str(db)])
        assert res.exit_code == 1, (args, res.output)
        assert isinstance(res.exception, SystemExit) and "Traceback" not in res.output, res.output
        assert res.stderr.startswith(f"Error: {name} "), res.stderr
        assert repr(value) in res.stderr and res.stderr.count("\n") == 1, res.stderr
    new = tmp_path / "new.db"  # a command that would create a store creates none
    res = runner.invoke(cli, ["import", "--format", "jsonl", str(sample_path()), "--db", str(new)])
    assert res.exit_code == 1 and res.stderr.startswith(f"Error: {name} ")
    assert db.read_bytes() == before and _names(tmp_path) == ["memory.db"]


@pytest.mark.parametrize(("name", "value"), [("MEMREFINE_MAX_FILE_BYTES", " 4096000 "),
                                             ("MEMREFINE_MAX_FILE_BYTES", ""), ("MEMREFINE_SYNCHRONOUS", "full"),
                                             ("MEMREFINE_SYNCHRONOUS", "Normal")])
def test_well_formed_settings_are_taken(tmp_path, monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    res = CliRunner().invoke(cli, ["import", "--format", "jsonl", str(sample_path()), "--db", str(tmp_path / "m.db")])
    assert res.exit_code == 0, res.output


def test_the_library_refuses_malformed_settings_with_its_own_error(tmp_path):
    for kwargs in ({"max_file_bytes": 0}, {"max_file_bytes": -1}, {"max_file_bytes": 1.5}, {"max_file_bytes": True},
                   {"synchronous": "OFF"}, {"page_size": 1000}):
        with pytest.raises(ConfigurationError):
            MemoryStore(tmp_path / "m.db", **kwargs)
        with pytest.raises(ValueError):  # as it always was
            MemoryStore(tmp_path / "m.db", **kwargs)
    assert _names(tmp_path) == []
