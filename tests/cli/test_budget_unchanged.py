"""A compress command that fails or is refused leaves the standing budget as it was; one that runs records it
with the run's start."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from memrefine_edge.cli import cli
from memrefine_edge.core import ModelLoadError
from memrefine_edge.engine import Compressor
from memrefine_edge.store import MemoryStore, get_budget
from memrefine_edge.testing import FakeBackends, HashEncoder
from tests.support.fakes import ConcatMerger, ScriptedMethod
from tests.support.stores import make_store


class _BrokenMethod(ScriptedMethod):
    def load(self) -> None:
        raise ModelLoadError("cannot load the judge model broken.gguf (not a GGUF llama.cpp can read)")


class _BrokenMerger(ConcatMerger):
    def load(self) -> None:
        raise ModelLoadError("cannot load the merge model broken.gguf (not a GGUF llama.cpp can read)")


def _backends(*, method=None, merger=None) -> FakeBackends:
    return FakeBackends(encoder=HashEncoder(), method=method or ScriptedMethod(), merger=merger or ConcatMerger())


def _run(backends: FakeBackends, *args: str):
    return CliRunner().invoke(cli, list(args), obj=backends)


def _standing(db: Path) -> dict:
    return json.loads(_run(_backends(), "budget", "show", "--db", str(db), "--json").stdout)


def _store_with_budget(tmp_path: Path, spec: str = "0.8") -> Path:
    db = tmp_path / "s.db"
    make_store(db, n=60).close()
    assert _run(_backends(), "budget", "set", spec, "--db", str(db)).exit_code == 0
    return db


@pytest.mark.parametrize("broken", ["judge", "merger"])
def test_a_compress_whose_model_fails_to_load_keeps_the_standing_budget(tmp_path, broken):
    db = _store_with_budget(tmp_path)
    before = _standing(db)
    backends = _backends(method=_BrokenMethod()) if broken == "judge" else _backends(merger=_BrokenMerger())
    result = _run(backends, "compress", "--db", str(db), "--budget", "0.3")
    assert result.exit_code == 1 and result.stderr.startswith("Error: cannot load"), result.output
    assert "budget changed" not in result.output
    assert _standing(db) == before
    with MemoryStore(db, create=False) as store:
        assert store.journal.runs() == []
    # The cron job's plain command then compresses to the budget that was standing, not to 0.3.
    plain = json.loads(_run(_backends(), "compress", "--db", str(db), "--json").stdout)
    assert plain["target_bytes"] == before["bytes"]


def test_a_compress_refused_by_an_interrupted_run_keeps_the_standing_budget(tmp_path):
    db = _store_with_budget(tmp_path, "0.9")
    stopped = json.loads(_run(_backends(), "compress", "--db", str(db), "--budget", "0.5", "--max-decisions", "1",
                              "--json").stdout)
    assert stopped["stop_reason"].startswith("stopped")  # interrupted: it waits to be finished or undone
    before = _standing(db)
    assert before["spec"] == "0.5"
    result = _run(_backends(), "compress", "--db", str(db), "--budget", "0.3")
    assert result.exit_code == 1 and "was interrupted" in result.stderr, result.output
    assert "budget changed" not in result.output
    assert _standing(db) == before
    # The run it refused for is still there to finish, with the budget it started with.
    done = json.loads(_run(_backends(), "compress", "--db", str(db), "--json").stdout)
    assert done["run_id"] == stopped["run_id"] and done["budget_met"]


def test_a_compress_that_runs_records_its_budget_and_says_so(tmp_path):
    db = _store_with_budget(tmp_path)
    result = _run(_backends(), "compress", "--db", str(db), "--budget", "0.3", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert "budget changed: 0.8" in result.stderr and _standing(db)["bytes"] == report["target_bytes"]
    assert _standing(db)["spec"] == "0.3"


def test_the_budget_is_recorded_in_the_transaction_that_starts_the_run(tmp_path):
    """Written by on_accept, which a failure in the start's transaction takes back with the run."""
    db = tmp_path / "s.db"
    make_store(db, n=30).close()
    with MemoryStore(db, create=False) as store:
        comp = Compressor(store, encoder=HashEncoder(), method=ScriptedMethod(), merger=ConcatMerger())

        def record_then_fail() -> None:
            from memrefine_edge.store import set_budget

            set_budget(store, target_bytes=1000, metric="json", spec="1000")
            raise KeyboardInterrupt  # killed between the budget and the run's row

        with pytest.raises(KeyboardInterrupt):
            comp.run(budget=0.5, on_accept=record_then_fail)
        assert get_budget(store) is None and store.journal.runs() == []
        calls = []
        report = comp.run(budget=0.5, on_accept=lambda: calls.append(store.journal.runs()))
        assert calls == [[]] and report.run_id  # before the run's row, in its transaction


@pytest.mark.models
@pytest.mark.parametrize("option", ["--judge-model", "--merge-model"])
def test_a_broken_model_file_keeps_the_standing_budget(tmp_path, option):
    pytest.importorskip("llama_cpp")
    db = _store_with_budget(tmp_path)
    before = _standing(db)
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + bytes(range(256)) * 64)
    args = ["compress", "--db", str(db), "--budget", "0.3", option, str(broken)]
    if option == "--merge-model":
        args += ["--judge-model", "none"]
    result = CliRunner().invoke(cli, args)  # the real models
    assert result.exit_code == 1 and "broken.gguf" in result.stderr, result.output
    assert "budget changed" not in result.output
    assert _standing(db) == before
