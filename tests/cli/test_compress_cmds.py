"""`memrefine compress|undo|log|purge-history|demo` through the CLI, with fakes for the models."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from memrefine_edge.cli import cli
from memrefine_edge.store import MemoryStore, export_jsonl
from memrefine_edge.testing import FakeBackends, HashEncoder
from tests.support.fakes import ConcatMerger, ScriptedMethod
from tests.support.stores import make_store


def fake() -> FakeBackends:
    """The models of these tests: hash encoder, scripted decisions, concatenating merger."""
    return FakeBackends(encoder=HashEncoder(), method=ScriptedMethod(), merger=ConcatMerger())


def run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False, obj=fake())


def dump(db: Path, tmp_path: Path, name: str) -> str:
    out = tmp_path / name
    with MemoryStore(db, create=False) as s:
        export_jsonl(s, out)
    return out.read_text()


def test_compress_prints_report_and_json(tmp_path):
    db = tmp_path / "s.db"
    make_store(db).close()
    result = run("compress", "--db", str(db), "--budget", "0.5", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["budget_met"] and report["realized_ratio_json"] <= 0.5
    assert report["after"]["json_bytes"] <= report["target_bytes"]
    human = run("compress", "--db", str(db), "--budget", "0.9")
    assert "json size" in human.stdout and "budget met" in human.stdout


def test_dry_run_leaves_the_file_byte_identical(tmp_path):
    db = tmp_path / "s.db"
    make_store(db).close()
    raw = db.read_bytes()
    result = run("compress", "--db", str(db), "--budget", "0.5", "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["dry_run"] and report["decisions"] > 0
    assert db.read_bytes() == raw
    assert not Path(str(db) + "-wal").exists() or Path(str(db) + "-wal").stat().st_size == 0


def test_undo_through_the_cli_restores_the_pre_run_export(tmp_path):
    db = tmp_path / "s.db"
    make_store(db).close()
    before = dump(db, tmp_path, "before.jsonl")
    report = json.loads(run("compress", "--db", str(db), "--budget", "0.5", "--json").stdout)
    assert dump(db, tmp_path, "mid.jsonl") != before
    log = json.loads(run("log", "--db", str(db), "--json").stdout)
    assert [r["run_id"] for r in log["runs"]] == [report["run_id"]]
    decisions = json.loads(run("log", report["run_id"], "--db", str(db), "--json").stdout)["decisions"]
    assert len(decisions) + report["actions"].get("preserve", 0) == report["decisions"]  # preserves: counted
    result = run("undo", report["run_id"], "--db", str(db))
    assert result.exit_code == 0 and "undid" in result.stdout
    assert dump(db, tmp_path, "after.jsonl") == before


def test_purge_history_then_undo_is_refused(tmp_path):
    db = tmp_path / "s.db"
    make_store(db).close()
    report = json.loads(run("compress", "--db", str(db), "--budget", "0.5", "--json").stdout)
    purge = json.loads(run("purge-history", "--db", str(db), "--yes", "--json").stdout)
    assert purge["purged_entries"] > 0
    result = CliRunner().invoke(cli, ["undo", report["run_id"], "--db", str(db)])
    assert result.exit_code == 1 and "purged" in result.stderr


@pytest.mark.parametrize("args, message", [
    (["--budget", "1.5"], "budget ratio must be in (0, 1]"),
    (["--budget-bytes", "1"], "below what is possible"),
    ([], "give --budget"),
])
def test_bad_budgets_are_clear_errors_and_change_nothing(tmp_path, args, message):
    db = tmp_path / "s.db"
    make_store(db).close()
    raw = db.read_bytes()
    result = CliRunner().invoke(cli, ["compress", "--db", str(db), *args], obj=fake())
    assert result.exit_code != 0 and message in result.output
    assert db.read_bytes() == raw


def test_missing_store_is_a_clear_error(tmp_path):
    result = CliRunner().invoke(cli, ["compress", "--db", str(tmp_path / "nope.db"), "--budget", "0.5"], obj=fake())
    assert result.exit_code == 1 and "no memory store" in result.stderr
    assert not (tmp_path / "nope.db").exists()


def test_demo_compresses_the_bundled_sample(tmp_path):
    result = run("demo", "--db", str(tmp_path / "demo.db"), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["before"]["entries"] > 50 and report["budget_met"]


def test_merge_min_similarity_out_of_range_is_a_usage_error(tmp_path):
    db = tmp_path / "s.db"
    make_store(db).close()
    raw = db.read_bytes()
    result = CliRunner().invoke(cli, ["compress", "--db", str(db), "--budget", "0.5", "--merge-min-similarity", "2"],
                                obj=fake())
    assert result.exit_code == 2 and "merge-min-similarity" in result.output
    assert db.read_bytes() == raw


def test_a_busy_store_is_reported_before_the_models_load(tmp_path):
    from memrefine_edge.store import RunLock

    db = tmp_path / "s.db"
    make_store(db).close()
    built = []

    class Recording(FakeBackends):
        def encoder(self, config):
            built.append(1)
            return super().encoder(config)

    with RunLock(db):  # another run holds the store
        result = CliRunner().invoke(cli, ["compress", "--db", str(db), "--budget", "0.5"], obj=Recording())
    assert result.exit_code == 1 and "another compression is running" in result.output
    assert built == []


@pytest.mark.models
@pytest.mark.parametrize("option", ["--judge-model", "--merge-model"])
def test_a_missing_model_file_fails_before_any_decision(tmp_path, option):
    # Before: the fast path committed decisions, then the first LLM call failed and left a run
    # that the corrected command could not continue.
    db = tmp_path / "s.db"
    make_store(db).close()
    raw = db.read_bytes()
    result = CliRunner().invoke(cli, ["compress", "--db", str(db), "--budget", "0.5",
                                      option, str(tmp_path / "nope.gguf")])
    assert result.exit_code == 1 and "nope.gguf" in result.stderr
    assert db.read_bytes() == raw
    with MemoryStore(db) as store:
        assert store.journal.runs() == []


@pytest.mark.models
@pytest.mark.parametrize("option", ["--judge-model", "--merge-model"])
def test_a_broken_model_file_leaves_no_run(tmp_path, option):
    # A file with a GGUF header that llama.cpp cannot load: it must fail before the run is recorded.
    pytest.importorskip("llama_cpp")
    db = tmp_path / "s.db"
    make_store(db).close()
    broken = tmp_path / "mine.gguf"
    broken.write_bytes(b"GGUF" + bytes(range(256)) * 64)
    args = ["compress", "--db", str(db), "--budget", "0.5", option, str(broken)]
    if option == "--merge-model":
        args += ["--judge-model", "none"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1 and "mine.gguf" in result.stderr, result.output
    assert "models fetch" not in result.stderr  # fetching the bundled models would not repair the user's file
    with MemoryStore(db) as store:
        assert store.journal.runs() == [] and store.journal.unfinished_run() is None


def _fake_cli(*args: str, env=None, **kw):
    import subprocess
    import sys

    here = Path(__file__).resolve().parents[1] / "support"
    return subprocess.Popen([sys.executable, str(here / "cli_fake_models.py"), *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def _dry_folders(tmp: Path) -> list[Path]:
    return sorted(tmp.glob("memrefine-dry-*"))


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT", "SIGKILL"])
def test_an_interrupted_dry_run_leaves_no_copy_of_the_store(tmp_path, sig):
    import os
    import signal
    import stat
    import time

    db = tmp_path / "s.db"
    make_store(db, n=60).close()
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "MEMREFINE_TEST_SLEEP_MS": "200"}
    proc = _fake_cli("compress", "--db", str(db), "--budget", "0.3", "--dry-run", env=env)
    deadline = time.monotonic() + 60
    while not list(tmp.glob("memrefine-dry-*/copy.db")):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    copy = next(tmp.glob("memrefine-dry-*/copy.db"))
    assert stat.S_IMODE(copy.stat().st_mode) == 0o600
    assert stat.S_IMODE(copy.parent.stat().st_mode) == 0o700
    time.sleep(0.5)  # inside the run
    proc.send_signal(getattr(signal, sig))
    proc.communicate(timeout=60)
    if sig == "SIGKILL":  # nothing can clean up at a SIGKILL: the next dry run does
        assert len(_dry_folders(tmp)) == 1
        env["MEMREFINE_TEST_SLEEP_MS"] = "0"
        nxt = _fake_cli("compress", "--db", str(db), "--budget", "0.9", "--dry-run", env=env)
        out, err = nxt.communicate(timeout=120)
        assert nxt.returncode == 0, err
    assert _dry_folders(tmp) == []


def test_a_store_reached_through_a_symlink_shares_the_run_lock(tmp_path):
    from memrefine_edge.store import RunLock

    db = tmp_path / "s.db"
    make_store(db).close()
    link = tmp_path / "link.db"
    link.symlink_to(db)
    with RunLock(db):
        result = CliRunner().invoke(cli, ["compress", "--db", str(link), "--budget", "0.5"], obj=fake())
    assert result.exit_code == 1 and "another compression is running" in result.output


# --- the standing budget ---------------------------------------------------------------


def _entries(db: Path) -> int:
    with MemoryStore(db, create=False) as s:
        return len(s)


def test_repeating_a_compress_command_changes_nothing(tmp_path):
    db = tmp_path / "s.db"
    make_store(db, n=60).close()
    first = json.loads(run("compress", "--db", str(db), "--budget", "0.5", "--json").stdout)
    assert first["budget_met"] and first["run_id"]
    after_first = dump(db, tmp_path, "1.jsonl")
    again = json.loads(run("compress", "--db", str(db), "--budget", "0.5", "--json").stdout)
    assert again["run_id"] is None and again["stop_reason"] == "already within budget"
    assert dump(db, tmp_path, "2.jsonl") == after_first
    plain = json.loads(run("compress", "--db", str(db), "--json").stdout)  # the standing budget
    assert plain["run_id"] is None and plain["target_bytes"] == first["target_bytes"]


def test_budget_set_show_clear_and_compress_without_arguments(tmp_path):
    db = tmp_path / "s.db"
    make_store(db, n=60).close()
    res = run("compress", "--db", str(db))
    assert res.exit_code == 1 and "has no budget" in res.stderr
    with MemoryStore(db, create=False) as s:
        size = s.json_bytes()
    shown = json.loads(run("budget", "set", "0.6", "--db", str(db), "--json").stdout)
    assert shown["bytes"] == int(size * 0.6) and shown["metric"] == "json"
    assert json.loads(run("budget", "show", "--db", str(db), "--json").stdout)["bytes"] == shown["bytes"]
    report = json.loads(run("compress", "--db", str(db), "--json").stdout)
    assert report["target_bytes"] == shown["bytes"] and report["budget_met"]
    n = _entries(db)
    assert json.loads(run("compress", "--db", str(db), "--json").stdout)["run_id"] is None
    assert _entries(db) == n
    kb = json.loads(run("budget", "set", "9KB", "--db", str(db), "--json").stdout)
    assert kb["bytes"] == 9000
    for bad in ("half", "0", "1.5.2", "2.5XB"):
        res = run("budget", "set", bad, "--db", str(db))
        assert res.exit_code == 1 and "Error:" in res.stderr
    tiny = run("budget", "set", "3", "--db", str(db))  # below one entry: refused, old budget kept
    assert tiny.exit_code == 1 and "below what is possible" in tiny.stderr
    assert json.loads(run("budget", "show", "--db", str(db), "--json").stdout)["bytes"] == 9000
    assert json.loads(run("budget", "clear", "--db", str(db), "--json").stdout)["cleared"] is True
    assert json.loads(run("budget", "show", "--db", str(db), "--json").stdout)["budget"] is None


def test_a_dry_run_does_not_record_a_budget(tmp_path):
    db = tmp_path / "s.db"
    make_store(db, n=40).close()
    raw = db.read_bytes()
    assert run("compress", "--db", str(db), "--budget", "0.5", "--dry-run").exit_code == 0
    assert db.read_bytes() == raw


@pytest.mark.parametrize("flag, option, value, refusals", [
    ("--no-last-copy-check", "keep_last_copies", False,
     [(["--method", "rulesim"], "(--no-last-copy-check) applies to --method memrefine, not rulesim")]),
    ("--defer-last-copies", "defer_last_copies", True,
     [(["--method", "rulesim"], "(--defer-last-copies) applies to --method memrefine, not rulesim"),
      (["--no-last-copy-check"], "(--defer-last-copies) needs the last-copy check")]),
])
def test_a_last_copy_option_is_recorded_with_the_run_and_refused_where_it_does_not_apply(tmp_path, flag, option,
                                                                                         value, refusals):
    db = tmp_path / "s.db"
    make_store(db).close()
    runner = CliRunner()
    result = runner.invoke(cli, ["compress", "--db", str(db), "--budget", "0.8", flag, "--json"],
                           catch_exceptions=False, obj=FakeBackends())
    assert result.exit_code == 0, result.output
    run_id = json.loads(result.stdout)["run_id"]
    with MemoryStore(db, create=False) as store:
        assert store.journal.run(run_id).params["options"][option] is value
    raw = db.read_bytes()
    for extra, message in refusals:
        refused = runner.invoke(cli, ["compress", "--db", str(db), "--budget", "0.5", flag, *extra],
                                obj=FakeBackends())
        assert refused.exit_code != 0 and message in refused.output, refused.output
    assert db.read_bytes() == raw


def test_compress_says_how_many_deletes_were_deferred_and_how_many_it_took(tmp_path):
    from tests.engine.test_deferred import Deferring

    db = tmp_path / "s.db"
    make_store(db, n=30, seed=1).close()
    backends = FakeBackends(encoder=HashEncoder(), method=Deferring(), merger=ConcatMerger())
    result = CliRunner().invoke(cli, ["compress", "--db", str(db), "--budget", "0.2"], catch_exceptions=False,
                                obj=backends)
    assert result.exit_code == 0, result.output
    deferred = [line for line in result.stdout.splitlines() if line.startswith("  deferred")]
    assert len(deferred) == 1 and deferred[0].endswith("taken to meet the budget"), result.stdout
    with MemoryStore(db, create=False) as store:
        report = store.journal.runs()[-1].report
    n, taken = report["sources"]["deferred"], report["deferred_taken"]
    assert taken > 0 and deferred[0] == f"  deferred    {n} last-copy delete(s) deferred, {taken} taken to meet the budget"
    assert "(budget met by deferred deletes)" in result.stdout
    # A run that defers nothing says nothing of it.
    make_store(tmp_path / "p.db").close()
    plain = run("compress", "--db", str(tmp_path / "p.db"), "--budget", "0.5")
    assert plain.exit_code == 0 and "  sources " in plain.stdout and "  deferred" not in plain.stdout



def test_a_paper_run_that_stops_above_budget_says_what_to_do_next(tmp_path):
    db = tmp_path / "s.db"
    make_store(db).close()
    keep_all = FakeBackends(encoder=HashEncoder(), method=ScriptedMethod(policy="preserve"), merger=ConcatMerger())
    paper = CliRunner().invoke(cli, ["compress", "--db", str(db), "--budget", "0.5", "--mode", "paper"],
                               catch_exceptions=False, obj=keep_all)
    assert paper.exit_code == 0, paper.output
    assert "budget met  NO (no candidate pair left)" in paper.stdout
    assert "  next        the judge kept what is left as distinct facts; --mode live (the default)" in paper.stdout
    strict = CliRunner().invoke(cli, ["compress", "--db", str(db), "--budget", "0.5", "--mode", "strict"],
                                catch_exceptions=False, obj=keep_all)
    assert strict.exit_code == 0 and "budget met  yes" in strict.stdout and "  next" not in strict.stdout
