"""`budget set` while a compression run has not finished: the run keeps its own target, and the command
says so (and, for a ratio, of which size it was taken)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from click.testing import CliRunner

from memrefine_edge.cli import cli
from memrefine_edge.store import MemoryStore, get_budget, set_budget
from memrefine_edge.testing import FakeBackends, HashEncoder
from tests.cli.test_compress_cmds import _fake_cli, fake
from tests.support.fakes import ConcatMerger, ScriptedMethod
from tests.support.stores import make_store


def run(*args: str, backends=None):
    return CliRunner().invoke(cli, list(args), obj=backends or fake())


def test_budget_set_names_the_interrupted_run_that_keeps_its_target(tmp_path):
    db = tmp_path / "s.db"
    make_store(db, n=60).close()
    with MemoryStore(db, create=False) as store:
        size_at_start = store.json_bytes()
    stopped = json.loads(run("compress", "--db", str(db), "--budget", "0.5", "--max-decisions", "3",
                             "--json").stdout)
    assert stopped["stop_reason"].startswith("stopped")
    with MemoryStore(db, create=False) as store:
        mid_run = store.json_bytes()
    assert mid_run < size_at_start

    as_json = run("budget", "set", "0.8", "--db", str(db), "--json")
    assert as_json.exit_code == 0, as_json.output
    data = json.loads(as_json.stdout)
    assert data["bytes"] == int(0.8 * mid_run) and data["current_bytes"] == mid_run  # a ratio of the size now
    assert data["unfinished_run"] == {"run_id": stopped["run_id"], "target_bytes": stopped["target_bytes"],
                                      "metric": "json", "size_at_start": size_at_start}
    human = run("budget", "set", "0.8", "--db", str(db)).stdout
    assert (f"note: run {stopped['run_id']} has not finished (it is running, or was interrupted): it keeps its own "
            f"target of {stopped['target_bytes']:,} B (json); this budget applies from the next run. The ratio 0.8 "
            f"is of the store's size now, part way through that run ({mid_run:,} B json), not of its size when "
            f"the run started ({size_at_start:,} B).") in human, human
    assert "run `memrefine compress` to reach it" not in human  # that would only continue the old run

    # What it said holds: the run finishes at its own target, the next run compresses to the new budget.
    finished = json.loads(run("compress", "--db", str(db), "--resume", "--json").stdout)
    assert finished["run_id"] == stopped["run_id"] and finished["target_bytes"] == stopped["target_bytes"]
    later = json.loads(run("compress", "--db", str(db), "--json").stdout)
    with MemoryStore(db, create=False) as store:
        assert later["target_bytes"] == get_budget(store).bytes == data["bytes"]


def test_budget_set_names_a_run_going_on_in_another_process(tmp_path):
    db = tmp_path / "s.db"
    make_store(db, n=60).close()
    env = {**os.environ, "MEMREFINE_TEST_SLEEP_MS": "40"}
    proc = _fake_cli("compress", "--db", str(db), "--budget", "0.3", "--json", env=env)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            with MemoryStore(db, create=False, read_only=True) as store:
                running = store.journal.unfinished_run()
            if running is not None:
                break
            time.sleep(0.05)
        result = run("budget", "set", "5KB", "--db", str(db))
        assert result.exit_code == 0, result.output
        assert f"note: run {running.run_id} has not finished" in result.stdout
        assert f"keeps its own target of {running.params['target_bytes']:,} B" in result.stdout
        assert "The ratio" not in result.stdout  # a size is no ratio of anything
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    report = json.loads(out)
    assert report["run_id"] == running.run_id and report["target_bytes"] == running.params["target_bytes"]
    with MemoryStore(db, create=False) as store:
        assert get_budget(store).bytes == 5000  # the run did not take it over with its own


def test_budget_set_without_a_run_says_nothing_of_one(tmp_path):
    db = tmp_path / "s.db"
    make_store(db).close()
    result = run("budget", "set", "0.5", "--db", str(db), "--json")
    assert result.exit_code == 0 and "unfinished_run" not in json.loads(result.stdout)
    assert "note:" not in run("budget", "set", "0.5", "--db", str(db)).stdout


class _BudgetSetterEncoder(HashEncoder):
    """While a compress embeds the store, someone sets another budget (another connection)."""

    def __init__(self, db: Path) -> None:
        super().__init__()
        self.db, self.done = db, False

    def embed_batch(self, texts):
        if not self.done:
            self.done = True
            with MemoryStore(self.db, create=False) as other:
                set_budget(other, target_bytes=5000, metric="json", spec="5KB")
        return super().embed_batch(texts)


def test_a_budget_set_while_a_compress_starts_is_not_overwritten_by_it(tmp_path):
    db = tmp_path / "s.db"
    make_store(db, n=60).close()
    assert run("budget", "set", "0.8", "--db", str(db)).exit_code == 0
    backends = FakeBackends(encoder=_BudgetSetterEncoder(db), method=ScriptedMethod(), merger=ConcatMerger())
    result = run("compress", "--db", str(db), "--budget", "0.5", "--json", backends=backends)
    assert result.exit_code == 0, result.output
    assert "budget kept: it was set to 5KB while this run started" in result.stderr
    with MemoryStore(db, create=False) as store:
        assert get_budget(store).spec == "5KB"
        assert json.loads(result.stdout)["target_bytes"] == store.journal.runs()[-1].params["target_bytes"]
