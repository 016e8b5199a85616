"""Methods through the command line: --method-option, --judge, `memrefine methods`, and a third-party plugin."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from memrefine_edge.cli import cli
from memrefine_edge.store import MemoryStore
from memrefine_edge.testing import FakeBackends
from tests.support.plugins import THRESHOLD_SOURCE, write_plugin
from tests.support.stores import make_store

ROOT = Path(__file__).resolve().parents[2]
HASH_CLI = ROOT / "tests" / "support" / "cli_hash_encoder.py"


def _invoke(*args: str):
    return CliRunner().invoke(cli, list(args), obj=FakeBackends())


def _store(tmp_path: Path, name: str = "s.db") -> Path:
    db = tmp_path / name
    make_store(db).close()
    return db


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("Error:")]


def _decisions(db: Path) -> list[tuple[str, str, str]]:
    """The audited decisions, then the pairs preserved (a preserve is counted, not audited)."""
    with MemoryStore(db, create=False) as store:
        return ([(d.action, d.target or "", d.reason) for d in store.journal.decisions()]
                + [("preserve", a, b) for a, b in store.journal.preserved_pairs()])


# --- built-in methods ------------------------------------------------------------------------------


def test_a_method_option_sets_what_the_dedicated_flag_sets(tmp_path):
    flag, option = _store(tmp_path, "flag.db"), _store(tmp_path, "option.db")
    by_flag = _invoke("compress", "--db", str(flag), "--budget", "0.6", "--method", "rulepr", "--tau", "0.9")
    by_option = _invoke("compress", "--db", str(option), "--budget", "0.6", "--method", "rulepr",
                        "--method-option", "tau=0.9", "--method-option", "knn=3")
    assert by_flag.exit_code == 0 and by_option.exit_code == 0, by_flag.output + by_option.output
    with MemoryStore(option, create=False) as store:
        assert store.journal.runs()[0].params["options"] == {"tau": 0.9, "protect": 0.9, "damping": 0.85, "knn": 3,
                                                             "tol": 1e-12}
    refused = _invoke("compress", "--db", str(option), "--budget", "0.5", "--method", "rulesim", "--tau", "0.9",
                      "--method-option", "tau=0.8")
    assert refused.exit_code == 2 and "give --tau or --method-option tau=..., not both" in refused.output


def test_a_last_copy_option_given_as_a_method_option_is_recorded(tmp_path):
    db = _store(tmp_path)
    result = _invoke("compress", "--db", str(db), "--budget", "0.8", "--method-option", "keep_last_copies=false",
                     "--json")
    assert result.exit_code == 0, result.output
    with MemoryStore(db, create=False) as store:
        assert store.journal.run(json.loads(result.stdout)["run_id"]).params["options"]["keep_last_copies"] is False


@pytest.mark.parametrize("args, code, message", [
    (["--method", "rulesim", "--method-option", "tau=high"], 1, "Error: tau must be a number, got 'high'"),
    (["--method", "rulesim", "--method-option", "tau=1.5"], 1, r"Error: tau must be in [-1.0, 1.0], got 1.5"),
    (["--method", "rulepr", "--method-option", "knn=0"], 1, "Error: knn must be an integer >= 1, got 0"),
    (["--method-option", "keep_last_copies=perhaps"], 1, "Error: keep_last_copies must be true or false"),
    (["--method", "rulesim", "--method-option", "size=3"], 2,
     "Error: method 'rulesim' has no option 'size' (its options: tau)"),
    (["--method", "rulesim", "--method-option", "protect=0.5"], 2,
     "Error: protect (--protect) applies to --method rulepr, not rulesim"),
    (["--method-option", "tau"], 2, "'tau' is not NAME=VALUE"),
    (["--method", "rulesim", "--method-option", "tau=0.9", "--method-option", "tau=0.8"], 2, "tau is given twice"),
    (["--method", "nope"], 1, "Error: unknown method 'nope'; known: "),
    (["--judge", "fact", "--judge-model", "my.gguf"], 2, "--judge fact and --judge-model my.gguf name two judges"),
])
def test_a_bad_method_option_is_one_error_and_writes_nothing(tmp_path, args, code, message):
    db = _store(tmp_path)
    raw = db.read_bytes()
    result = _invoke("compress", "--db", str(db), "--budget", "0.5", *args)
    assert result.exit_code == code, result.output
    assert message in result.stderr and len(_error_lines(result.stderr)) == 1, result.stderr
    assert "Traceback" not in result.output
    assert db.read_bytes() == raw and not list(tmp_path.glob("memrefine-dry-*"))


@pytest.mark.parametrize("words, kind", [(["--judge", "fact"], ["--judge-model", "fact"]),
                                         (["--judge", "scorer"], ["--judge-model", "none"])])
def test_the_judge_kind_and_the_old_judge_model_words_compress_alike(tmp_path, words, kind):
    new, old = _store(tmp_path, "new.db"), _store(tmp_path, "old.db")
    assert _invoke("compress", "--db", str(new), "--budget", "0.6", *words).exit_code == 0
    assert _invoke("compress", "--db", str(old), "--budget", "0.6", *kind).exit_code == 0
    assert _decisions(new) == _decisions(old) and _decisions(new)


def test_methods_lists_each_method_with_its_options():
    result = _invoke("methods", "--json")
    assert result.exit_code == 0, result.output
    rows = {row["name"]: row for row in json.loads(result.stdout)["methods"]}
    assert {"memrefine", "rulesim", "rulepr"} <= set(rows)
    assert rows["memrefine"]["uses_judge"] and not rows["rulepr"]["uses_judge"]
    assert [o["name"] for o in rows["rulepr"]["options"]] == ["tau", "protect", "damping", "knn", "tol"]
    tau = rows["rulesim"]["options"][0]
    assert (tau["type"], tau["default"], tau["flag"], tau["accepts"]) == ("float", 0.8, "--tau",
                                                                         "number in [-1.0, 1.0], default 0.8")
    human = _invoke("methods").stdout
    assert "rulepr  memrefine_edge.methods.RulePR" in human and "  knn: integer >= 1, default 5" in human


def test_the_judge_choices_of_the_command_line_are_the_judge_kinds():
    from memrefine_edge.cli._compress_cmds import JUDGE_KINDS
    from memrefine_edge.judging import JudgeKind

    assert JUDGE_KINDS == tuple(k.value for k in JudgeKind)


# --- a third-party method, installed as a plugin -----------------------------------------------------


def _plugin_site(tmp_path: Path, source: str = THRESHOLD_SOURCE.format(name="acme-cut")) -> Path:
    return write_plugin(tmp_path / "site", dist="acme-memory-methods", module="acme_cut",
                        entry_points={"acme-cut": "acme_cut:CutMethod"}, source=source)


def _cli(site: Path, *args: str, script: Path = HASH_CLI) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    command = [sys.executable, str(script), *args] if script else [sys.executable, "-m", "memrefine_edge", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


def test_a_plugin_method_compresses_through_the_command_line(tmp_path):
    site, db = _plugin_site(tmp_path), _store(tmp_path)
    listed = _cli(site, "methods", "--json")
    assert listed.returncode == 0, listed.stderr
    row = next(r for r in json.loads(listed.stdout)["methods"] if r["name"] == "acme-cut")
    assert row["class"] == "acme_cut.CutMethod" and [o["name"] for o in row["options"]] == ["cut", "label"]

    done = _cli(site, "compress", "--db", str(db), "--budget", "0.7", "--method", "acme-cut",
                "--method-option", "cut=0.3", "--method-option", "label=acme-test", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["method"] == "acme-cut" and report["budget_met"] and report["decisions"] > 0
    with MemoryStore(db, create=False) as store:
        run = store.journal.run(report["run_id"])
        assert run.method == "acme-cut" and run.params["options"] == {"cut": 0.3, "label": "acme-test"}
        decisions = store.journal.decisions(report["run_id"])
    assert decisions and all(d.reason.startswith("acme-test: ") for d in decisions)  # its decisions, audited
    assert {d.action for d in decisions} <= {"delete", "preserve"}


@pytest.mark.parametrize("args, code, message", [
    (["--method-option", "cut=2"], 1, "Error: cut must be in [0.0, 1.0], got 2.0"),
    (["--method-option", "cut=most"], 1, "Error: cut must be a number, got 'most'"),
    (["--method-option", "size=3"], 2, "Error: method 'acme-cut' has no option 'size' (its options: cut, label)"),
    (["--tau", "0.9"], 2, "Error: tau (--tau) applies to --method rulepr or rulesim, not acme-cut"),
    (["--merge-min-similarity", "0.5"], 2, "Error: --merge-min-similarity applies to a method that decides with"),
])
def test_a_plugin_s_declared_options_are_checked_by_the_command_line(tmp_path, args, code, message):
    site, db = _plugin_site(tmp_path), _store(tmp_path)
    raw = db.read_bytes()
    refused = _cli(site, "compress", "--db", str(db), "--budget", "0.5", "--method", "acme-cut", *args)
    assert refused.returncode == code, refused.stderr
    errors = _error_lines(refused.stderr)
    assert len(errors) == 1 and message in errors[0] and "Traceback" not in refused.stderr, refused.stderr
    assert db.read_bytes() == raw


def test_a_broken_plugin_is_one_error_line_naming_it_and_writes_nothing(tmp_path):
    site = _plugin_site(tmp_path, source="import acme_dependency_that_is_not_installed\n")
    db = _store(tmp_path)
    raw = db.read_bytes()
    refused = _cli(site, "compress", "--db", str(db), "--budget", "0.5", "--method", "acme-cut")
    assert refused.returncode == 1
    assert _error_lines(refused.stderr) == [
        "Error: method plugin 'acme-cut' (acme_cut:CutMethod from acme-memory-methods 1.0) failed to load: "
        "ModuleNotFoundError: No module named 'acme_dependency_that_is_not_installed'"], refused.stderr
    assert "Traceback" not in refused.stderr and db.read_bytes() == raw
    other = _cli(site, "compress", "--db", str(db), "--budget", "0.9", "--method", "rulesim")
    assert other.returncode == 0, other.stderr  # a broken plugin is loaded only when its name is asked for
    listed = _cli(site, "methods")
    assert listed.returncode == 1 and "rulesim" in listed.stdout and len(_error_lines(listed.stderr)) == 1


@pytest.mark.models
def test_a_plugin_method_runs_from_the_installed_command(tmp_path):
    """The real console entry point and the real encoder, with the plugin on the module path."""
    site, db = _plugin_site(tmp_path), _store(tmp_path)
    done = _cli(site, "compress", "--db", str(db), "--budget", "0.8", "--method", "acme-cut", "--json",
                script=None)  # type: ignore[arg-type]
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["method"] == "acme-cut" and report["decisions"] > 0
    assert all(reason.startswith("acme: ") for _, _, reason in _decisions(db))
