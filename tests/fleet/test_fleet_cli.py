"""``memrefine fleet compress|report``: the result file, the summary, exit codes, Ctrl-C, and the extra."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from memrefine_edge.cli import cli
from memrefine_edge.fleet import Outcome, read_results
from tests.conftest import REPO
from tests.support.fleet_fakes import backends, compress_here, make_fleet, snapshot


def _cli(*args: str, obj=None):
    return CliRunner().invoke(cli, [str(a) for a in args], obj=obj or backends())


def test_without_ray_the_fleet_fails_with_one_line_naming_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails, as without the extra
    store = make_fleet(tmp_path / "stores", 1)[0]
    before = store.read_bytes()
    result = _cli("fleet", "compress", store, "--budget", "0.5", "--results", tmp_path / "r.jsonl")
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines() == ["Error: the fleet job runs on Ray, which is not installed: pip install "
                                          "'memrefine-edge[fleet]'"]
    assert not (tmp_path / "r.jsonl").exists() and store.read_bytes() == before


def test_nothing_but_the_fleet_job_imports_ray():
    code = ("import importlib, pkgutil, sys\n"
            "import memrefine_edge\n"
            "for m in pkgutil.walk_packages(memrefine_edge.__path__, 'memrefine_edge.'):\n"
            "    if not m.name.endswith('__main__'):  # runs the command line\n"
            "        importlib.import_module(m.name)\n"
            "from memrefine_edge.cli import main\n"
            "try:\n"
            "    main(['fleet', 'compress', '--help'])\n"
            "except SystemExit:\n"
            "    pass\n"
            "print('ray' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.splitlines()[-1] == "False"


def test_no_stores_named_is_a_usage_error():
    result = _cli("fleet", "compress", "--budget", "0.5")
    assert result.exit_code == 2 and "name the stores" in result.output


@pytest.mark.usefixtures("local_ray")
def test_a_bad_budget_or_an_existing_result_file_stops_before_any_store_is_touched(tmp_path):
    store = make_fleet(tmp_path / "stores", 1)[0]
    before = store.read_bytes()
    result = _cli("fleet", "compress", store, "--budget", "1.5", "--results", tmp_path / "r.jsonl")
    assert result.exit_code == 1 and result.stderr.startswith("Error: ") and len(result.stderr.splitlines()) == 1
    assert not (tmp_path / "r.jsonl").exists()
    (tmp_path / "old.jsonl").write_text("yesterday\n")
    result = _cli("fleet", "compress", store, "--budget", "0.5", "--results", tmp_path / "old.jsonl")
    assert result.exit_code == 1 and "never overwritten" in result.stderr
    assert (tmp_path / "old.jsonl").read_text() == "yesterday\n" and store.read_bytes() == before


@pytest.mark.usefixtures("local_ray")
def test_fleet_compress_writes_a_row_per_store_and_report_prints_the_summary_again(tmp_path):
    paths = make_fleet(tmp_path / "stores", 5)
    manifest = tmp_path / "stores" / "list.jsonl"
    manifest.write_text(f'{{"path": "{paths[3].name}", "budget": "0.8"}}\n{paths[4].name}\n', encoding="utf-8")
    results = tmp_path / "r.jsonl"
    result = _cli("fleet", "compress", paths[0], "--glob", tmp_path / "stores" / "user00[12].db", "--manifest",
                  manifest, "--budget", "0.6", "--results", results)
    assert result.exit_code == 0, result.output
    rows = {Path(r.path).name: r for r in read_results(results)}
    assert sorted(rows) == sorted(p.name for p in paths)
    assert all(r.outcome is Outcome.DONE and r.budget_met for r in rows.values())
    assert rows[paths[3].name].budget == "0.8" and rows[paths[4].name].budget == "0.6"
    assert "done 5, failed 0, skipped 0" in result.stdout and str(results) in result.stdout
    assert "fleet: writing one row per store" in result.stderr
    assert "fleet: 5 stores | done 5 failed 0 skipped 0 | saved " in result.stderr  # no terminal: lines

    again = _cli("fleet", "report", results)
    assert again.exit_code == 0 and again.stdout == result.stdout
    data = json.loads(_cli("fleet", "report", results, "--json").stdout)
    assert data["outcomes"] == {"done": 5} and data["budget_met"] == 5
    assert data["saved_bytes"] == sum(r.before_bytes - r.after_bytes for r in rows.values())
    assert set(data["ratio"]) == {"p50", "p90", "p99", "min", "max"}


@pytest.mark.usefixtures("local_ray")
def test_the_pipeline_options_are_compress_s_and_reach_every_task(tmp_path):
    from memrefine_edge.store import MemoryStore
    from memrefine_edge.testing import FakeBackends, HashEncoder

    paths = make_fleet(tmp_path / "stores", 2)
    plain = FakeBackends(encoder=HashEncoder())  # the method comes from the options
    bad = _cli("fleet", "compress", *paths, "--method", "rulesim", "--method-option", "nope=1", "--budget", "0.6",
               "--results", tmp_path / "bad.jsonl", obj=plain)
    assert bad.exit_code == 2 and "nope" in bad.output and not (tmp_path / "bad.jsonl").exists()
    result = _cli("fleet", "compress", *paths, "--method", "rulesim", "--method-option", "tau=0.3", "--budget",
                  "0.6", "--results", tmp_path / "r.jsonl", obj=plain)
    assert result.exit_code == 0, result.output
    for path in paths:
        with MemoryStore(path, create=False) as store:
            (run,) = store.journal.runs()
        assert run.method == "rulesim" and run.params["options"]["tau"] == 0.3


@pytest.mark.usefixtures("local_ray")
def test_a_store_that_fails_makes_the_job_exit_1_after_the_others_are_done(tmp_path):
    paths = make_fleet(tmp_path / "stores", 2)
    results = tmp_path / "r.jsonl"
    result = _cli("fleet", "compress", paths[0], tmp_path / "gone.db", paths[1], "--budget", "0.6", "--results",
                  results)
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == f"Error: 1 of 3 stores failed; their rows in {results} say why"
    rows = {Path(r.path).name: r.outcome for r in read_results(results)}
    assert rows == {paths[0].name: Outcome.DONE, "gone.db": Outcome.FAILED, paths[1].name: Outcome.DONE}


def test_address_runs_the_job_on_a_running_cluster(tmp_path, local_ray):
    paths = make_fleet(tmp_path / "stores", 2)
    address = local_ray.get_runtime_context().gcs_address  # this session's Ray, as a cluster to join
    argv = [sys.executable, str(REPO / "tests/support/cli_fake_models.py"), "fleet", "compress", *map(str, paths),
            "--budget", "0.6", "--address", address, "--results", str(tmp_path / "r.jsonl")]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = list(read_results(tmp_path / "r.jsonl"))
    assert [r.outcome for r in rows] == [Outcome.DONE] * 2 and all(r.budget_met for r in rows)


def test_an_address_nothing_answers_at_fails_at_once_and_writes_nothing(tmp_path, local_ray):
    store = make_fleet(tmp_path / "stores", 1)[0]
    before = store.read_bytes()
    argv = [sys.executable, str(REPO / "tests/support/cli_fake_models.py"), "fleet", "compress", str(store),
            "--budget", "0.6", "--address", "127.0.0.1:9", "--results", str(tmp_path / "r.jsonl")]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [proc.stderr.splitlines()[0]] and proc.stderr.startswith(
        "Error: no Ray cluster answers at 127.0.0.1:9")
    assert not (tmp_path / "r.jsonl").exists() and store.read_bytes() == before


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_the_progress_is_a_bar_with_the_counts_and_the_rate(monkeypatch):
    pytest.importorskip("tqdm", reason="the fleet extra (tqdm) is not installed")
    from memrefine_edge.cli._fleet_cmds import _Progress
    from memrefine_edge.fleet import StoreResult

    screen = _Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    progress = _Progress(3)
    for outcome, before in ((Outcome.DONE, 1000), (Outcome.FAILED, None), (Outcome.SKIPPED, None)):
        progress.add(StoreResult(path="s.db", outcome=outcome, before_bytes=before, after_bytes=before and 400))
    progress.close()
    shown = screen.getvalue().split("\r")[-1]
    assert "3/3" in shown and "done 1 failed 1 skipped 1 | saved 600 B" in shown and "store/s" in shown


def test_report_refuses_a_file_that_is_not_a_result_file(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text("hello\n")
    result = _cli("fleet", "report", path)
    assert result.exit_code == 1 and result.stderr.startswith("Error: line 1: ") and "not a fleet result" in \
        result.stderr


# --- Ctrl-C, in a process of its own with its own Ray, as a terminal sends it ------------------------------


def _start(tmp_path: Path, paths: list[Path], results: Path, sleep_ms: int) -> subprocess.Popen:
    env = {**os.environ, "MEMREFINE_TEST_SLEEP_MS": str(sleep_ms)}
    argv = [sys.executable, str(REPO / "tests/support/cli_fake_models.py"), "fleet", "compress", *map(str, paths),
            "--budget", "0.6", "--num-cpus", "2", "--window", "2", "--results", str(results)]
    # a session of its own: SIGINT to its process group is what a terminal's Ctrl-C is
    return subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _wait_for_rows(results: Path, proc: subprocess.Popen, n: int, timeout: float = 120) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end and proc.poll() is None:
        if results.exists() and len(results.read_text().splitlines()) >= n:
            return
        time.sleep(0.05)
    raise AssertionError(f"no {n} row(s) in {results}: {proc.poll()} {proc.stderr.read() if proc.poll() else ''}")


def _wait_for_decisions(path: Path, proc: subprocess.Popen, timeout: float = 120) -> None:
    from memrefine_edge.store import MemoryStore

    end = time.monotonic() + timeout
    while time.monotonic() < end and proc.poll() is None:
        try:
            with MemoryStore(path, create=False, read_only=True) as store:
                if store.journal.decisions():
                    return
        except Exception:  # noqa: BLE001 - not created or busy yet: look again
            pass
        time.sleep(0.05)
    raise AssertionError(f"no decision in {path}")


@pytest.mark.slow
def test_ctrl_c_stops_submitting_lets_the_running_stores_finish_and_prints_what_was_done(tmp_path, local_ray):
    paths = make_fleet(tmp_path / "stores", 8)
    results = tmp_path / "r.jsonl"
    proc = _start(tmp_path, paths, results, sleep_ms=40)
    _wait_for_rows(results, proc, 1)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    rows = list(read_results(results))
    assert 1 <= len(rows) < len(paths)
    assert all(r.outcome is Outcome.DONE and r.budget_met for r in rows)  # the running ones finished
    assert f"done {len(rows)}, failed 0" in out and "Interrupted after" in err
    done = {r.path for r in rows}
    for path in paths:  # a store never submitted was not touched
        assert (snapshot(path)[2] == 1) == (str(path) in done)
    rerun = _cli("fleet", "compress", *paths, "--budget", "0.6", "--results", tmp_path / "r2.jsonl")
    assert rerun.exit_code == 0
    again = {r.path: r for r in read_results(tmp_path / "r2.jsonl")}
    assert all(again[p].stop_reason == "already within budget" for p in done)
    assert all(r.budget_met for r in again.values())


@pytest.mark.slow
def test_a_second_ctrl_c_stops_the_running_stores_safely_and_the_next_job_resumes_them(tmp_path, local_ray):
    paths = make_fleet(tmp_path / "stores", 2)
    reference = {}
    for path in paths:
        copy = tmp_path / "ref" / path.name
        copy.parent.mkdir(exist_ok=True)
        copy.write_bytes(path.read_bytes())
        compress_here(copy, "0.6")
        reference[path.name] = snapshot(copy)
    results = tmp_path / "r.jsonl"
    proc = _start(tmp_path, paths, results, sleep_ms=300)
    for path in paths:
        _wait_for_decisions(path, proc)
    os.killpg(proc.pid, signal.SIGINT)
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    rows = list(read_results(results))
    assert [r.outcome for r in rows] == [Outcome.INTERRUPTED] * 2, rows
    assert "interrupted 2" in out
    rerun = _cli("fleet", "compress", *paths, "--budget", "0.6", "--results", tmp_path / "r2.jsonl")
    assert rerun.exit_code == 0, rerun.output
    assert all(r.resumed and r.budget_met for r in read_results(tmp_path / "r2.jsonl"))
    for path in paths:
        assert snapshot(path) == reference[path.name]
