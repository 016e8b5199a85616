"""The operating system says no: a file-size limit, a full file system, a read-only file system.

Real refusals, not mocks: ``RLIMIT_FSIZE`` set in a subprocess (the process
cannot grow any file past it), and, where this machine lets the tests mount
one, a tiny tmpfs filled to the brim or remounted read-only. Every write
path must end in one ``Error:`` line (exit 1, no traceback), leave the store
intact, and finish when it is rerun without the limit.
"""

from __future__ import annotations

import io
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from memrefine_edge.core import Entry
from memrefine_edge.store import MemoryStore, export_jsonl, sample_path

HERE = Path(__file__).resolve().parents[1] / "support"  # the workers and fakes run in subprocesses
FAKE_CLI = HERE / "cli_fake_models.py"  # the real command line with the model-free fakes


def _cli(*args: str, limit: int | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    def set_limit() -> None:
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run([sys.executable, str(FAKE_CLI), *args], capture_output=True, text=True, timeout=300,
                          preexec_fn=set_limit, cwd=cwd)


def _python(code: str, *, limit: int) -> subprocess.CompletedProcess:
    def set_limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          preexec_fn=set_limit)


def _one_error_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 1, (proc.returncode, proc.stdout[-500:], proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, proc.stderr[-2000:]
    return errors[0]


def _export(db: Path) -> str:
    with MemoryStore(db, create=False, read_only=True) as store:
        assert store.integrity_check() == "ok"
        buffer = io.StringIO()
        export_jsonl(store, buffer)
    return buffer.getvalue()


def _sample_store(db: Path) -> None:
    proc = _cli("import", "--db", str(db), "--format", "jsonl", str(sample_path()))
    assert proc.returncode == 0, proc.stderr


def _limit_for(db: Path) -> int:
    # The main file may keep its size; the WAL (and any growth) is what the limit stops.
    return max(db.stat().st_size, 64 * 1024)


# --- a file-size limit (RLIMIT_FSIZE) on every write path ------------------------------------------


def test_compress_past_the_file_size_limit_stops_cleanly_and_resumes(tmp_path):
    db = tmp_path / "s.db"
    _sample_store(db)
    before = _export(db)
    line = _one_error_line(_cli("compress", "--db", str(db), "--budget", "0.3", limit=16 * 1024))
    assert str(db.name) in line and "Nothing was lost" in line
    assert _export(db) is not None  # intact: integrity ok, readable
    with MemoryStore(db, create=False) as store:
        runs = store.journal.runs()
    done = _cli("compress", "--db", str(db), "--budget", "0.3", "--json")  # the same command, no limit
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["budget_met"] or report["stop_reason"].startswith("no candidate")
    if runs:  # the limit struck after the run was recorded: the rerun continued it
        assert report["resumed"] and report["run_id"] == runs[-1].run_id
    assert _export(db) != before


def test_import_past_the_file_size_limit_writes_nothing(tmp_path):
    db = tmp_path / "s.db"
    _sample_store(db)
    before = _export(db)
    big = tmp_path / "big.jsonl"
    big.write_text("".join(json.dumps({"id": f"n{i}", "content": f"note {i} " + "word " * 60}) + "\n"
                           for i in range(2000)))
    _one_error_line(_cli("import", "--db", str(db), "--format", "jsonl", str(big), limit=_limit_for(db)))
    assert _export(db) == before


def test_import_into_a_new_file_past_the_limit_leaves_no_file(tmp_path):
    big = tmp_path / "big.jsonl"
    big.write_text("".join(json.dumps({"id": f"n{i}", "content": "word " * 60}) + "\n" for i in range(2000)))
    _one_error_line(_cli("import", "--db", str(tmp_path / "new.db"), "--format", "jsonl", str(big),
                         limit=64 * 1024))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.jsonl"]


def test_undo_and_purge_past_the_limit_change_nothing(tmp_path):
    db = tmp_path / "s.db"
    _sample_store(db)
    run = json.loads(_cli("compress", "--db", str(db), "--budget", "0.5", "--json").stdout)
    after = _export(db)
    # Undo writes every removed entry back through the WAL: past an 8 KiB limit it fails whole.
    _one_error_line(_cli("undo", "--db", str(db), run["run_id"], limit=8 * 1024))
    assert _export(db) == after
    _one_error_line(_cli("purge-history", "--db", str(db), "--yes", limit=8 * 1024))
    assert _export(db) == after
    with MemoryStore(db, create=False) as store:
        assert store.stats().history_entries > 0  # the history is still there: undo still works
    assert _cli("undo", "--db", str(db), run["run_id"]).returncode == 0


def test_library_add_vacuum_and_embedding_past_the_limit_raise_typed_errors(tmp_path):
    db = tmp_path / "s.db"
    _sample_store(db)
    before = _export(db)
    code = f"""
import sys
from memrefine_edge.core._errors import StoreError
from memrefine_edge.core import Entry
from memrefine_edge.store import MemoryStore
from memrefine_edge.testing import HashEncoder
with MemoryStore({str(db)!r}, create=False) as store:
    for step, action in (("add", lambda: store.add_many(Entry(id=f"x{{i}}", content="word " * 300)
                                                        for i in range(400))),
                         # dim 1536: as many bytes a vector (int8) as 384 float32 dimensions were
                         ("embed", lambda: store.ensure_embeddings(HashEncoder(dim=1536), batch_size=1000)),
                         ("vacuum", store.vacuum)):
        try:
            action()
            print(step, "ok")
        except StoreError as exc:
            print(step, type(exc).__name__)
"""
    out = _python(code, limit=db.stat().st_size + 8192)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = dict(line.split() for line in out.stdout.splitlines())
    assert lines["add"] in ("StoreIOError", "StoreFullError") and lines["embed"] in ("StoreIOError", "StoreFullError")
    assert lines["vacuum"] in ("ok", "StoreIOError", "StoreFullError")
    assert _export(db) == before


# --- a real file system: full, or read-only ------------------------------------------------------------


@pytest.fixture
def tiny_fs(tmp_path):
    """An 8 MiB tmpfs mounted for the test (skips where mounting is not allowed)."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mnt)], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({proc.stderr.strip() or 'not permitted'})")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _fill(folder: Path, leave: int) -> None:
    """Write a filler file until about ``leave`` bytes are free."""
    free = shutil.disk_usage(folder).free
    with open(folder / "filler", "wb") as fh:
        remaining = max(0, free - leave)
        while remaining > 0:
            chunk = min(remaining, 1 << 16)
            try:
                fh.write(b"\0" * chunk)
                fh.flush()
            except OSError:
                break
            remaining -= chunk


def test_a_full_file_system_stops_compress_with_one_line(tiny_fs):
    db = tiny_fs / "s.db"
    _sample_store(db)
    before = _export(db)
    _fill(tiny_fs, leave=8 * 1024)
    line = _one_error_line(_cli("compress", "--db", str(db), "--budget", "0.3"))
    assert "full" in line or "failed" in line
    (tiny_fs / "filler").unlink()
    assert _export(db) is not None  # intact
    assert _cli("compress", "--db", str(db), "--budget", "0.3").returncode == 0
    assert _export(db) != before


def test_purge_history_says_how_much_space_its_vacuum_lacks(tiny_fs):
    db = tiny_fs / "s.db"
    _sample_store(db)
    assert _cli("compress", "--db", str(db), "--budget", "0.5").returncode == 0
    after = _export(db)
    size = db.stat().st_size
    assert size > 64 * 1024
    _fill(tiny_fs, leave=size // 2)  # room to open the store, not to VACUUM it
    line = _one_error_line(_cli("purge-history", "--db", str(db), "--yes"))
    assert "needs about" in line and "free" in line and "Nothing was changed" in line
    assert _export(db) == after


def test_read_only_commands_work_on_a_read_only_file_system(tiny_fs, tmp_path):
    db = tiny_fs / "s.db"
    _sample_store(db)
    before = _export(db)
    proc = subprocess.run(["mount", "-o", "remount,ro", str(tiny_fs)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot remount read-only here ({proc.stderr.strip()})")
    for args in (("stats",), ("log",), ("export", str(tmp_path / "out.jsonl")), ("search", "marathon", "-k", "3"),
                 ("budget", "show")):
        res = _cli(*args, "--db", str(db))
        assert res.returncode == 0, (args, res.stderr[-2000:])
    assert (tmp_path / "out.jsonl").read_text() == before
    for args in (("compress", "--budget", "0.5"), ("import", "--format", "jsonl", str(sample_path())),
                 ("budget", "set", "0.5")):
        line = _one_error_line(_cli(*args, "--db", str(db)))
        assert "read-only" in line, line
    assert _export(db) == before


def _remount_read_only(mnt: Path) -> None:
    proc = subprocess.run(["mount", "-o", "remount,ro", str(mnt)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot remount read-only here ({proc.stderr.strip()})")


def _dry_run(db: Path) -> dict:
    res = _cli("compress", "--db", str(db), "--budget", "0.5", "--dry-run", "--json")
    assert res.returncode == 0, res.stderr[-2000:]
    report = json.loads(res.stdout)
    assert report["dry_run"] and report["decisions"] > 0 and report["budget_met"]
    return report


def test_a_dry_run_works_on_a_read_only_file_system(tiny_fs):
    db = tiny_fs / "s.db"
    _sample_store(db)
    before = _export(db)
    entries = len(before.splitlines())
    _remount_read_only(tiny_fs)
    report = _dry_run(db)  # it only reads the store, and compresses a copy elsewhere
    assert report["before"]["entries"] == entries and report["after"]["entries"] < entries
    assert _export(db) == before and sorted(p.name for p in tiny_fs.iterdir()) == ["s.db"]


def test_a_dry_run_on_a_read_only_file_system_reads_what_a_killed_writer_left_in_the_log(tiny_fs):
    db = tiny_fs / "s.db"
    _sample_store(db)
    entries = len(_export(db).splitlines())
    code = ("import os, sys\nfrom memrefine_edge.core import Entry\nfrom memrefine_edge.store import MemoryStore\n"
            "s = MemoryStore(sys.argv[1], create=False)\n"
            "s.add_many([Entry(id=f'late{i}', content=f'late note {i}: Ana moved to Porto.') for i in range(3)])\n"
            "os.kill(os.getpid(), 9)\n")
    killed = subprocess.run([sys.executable, "-c", code, str(db)], capture_output=True, text=True, timeout=300)
    assert killed.returncode == -9, killed.stderr
    assert (tiny_fs / "s.db-wal").stat().st_size > 0
    raw = {p.name: p.read_bytes() for p in tiny_fs.iterdir()}
    _remount_read_only(tiny_fs)
    assert _dry_run(db)["before"]["entries"] == entries + 3
    assert {p.name: p.read_bytes() for p in tiny_fs.iterdir()} == raw


def test_a_dry_run_works_in_a_read_only_folder(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root writes into a read-only folder all the same: the read-only mount tests cover this")
    folder = tmp_path / "ro"
    folder.mkdir()
    db = folder / "s.db"
    _sample_store(db)
    before = _export(db)
    folder.chmod(0o555)
    try:
        _dry_run(db)
        assert _export(db) == before and sorted(p.name for p in folder.iterdir()) == ["s.db"]
    finally:
        folder.chmod(0o755)


def test_a_store_held_by_another_writer_past_the_timeout_is_a_clear_error(tmp_path):
    db = tmp_path / "s.db"
    MemoryStore(db).close()
    holder = sqlite3.connect(db, timeout=0)
    holder.execute("BEGIN IMMEDIATE")  # another process's write transaction, never finished
    try:
        with MemoryStore(db, create=False, busy_timeout_ms=200) as store:
            with pytest.raises(Exception) as info:
                store.add(Entry(id="a", content="Ana likes tea."))
        from memrefine_edge.core import StoreBusyError

        assert isinstance(info.value, StoreBusyError) and "locked by another process" in str(info.value)
    finally:
        holder.rollback()
        holder.close()
    assert os.path.exists(db)
