"""How a budget is written: read exactly, and what cannot be a budget refused, in every place one is given
(`--budget`, `--budget-bytes`, `budget set`, the Python API)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from memrefine_edge.cli import cli
from memrefine_edge.store import _budget as budgets
from memrefine_edge.core import BudgetError, Entry
from memrefine_edge.engine import Upkeep
from memrefine_edge.store import MemoryStore, get_budget, parse_budget, resolve_target, set_budget
from tests.cli.test_compress_cmds import fake
from tests.support.stores import compressor, make_store

#: The largest budget in bytes (budget.MAX_BUDGET_BYTES): exact in every JSON reader, within SQLite's integers.
MAX_BUDGET_BYTES = 2**53 - 1


@pytest.mark.parametrize("spec, expected", [
    ("0.5", (0.5, None)), (".25", (0.25, None)), ("1", (1.0, None)), ("1.0", (1.0, None)), ("0.001", (0.001, None)),
    ("50%", (0.5, None)), ("12.5 %", (0.125, None)), ("100%", (1.0, None)),
    ("2", (None, 2)), ("80000", (None, 80000)), ("80KB", (None, 80000)), ("80 kb", (None, 80000)),
    ("1.5MiB", (None, 1_572_864)), ("1.5KB", (None, 1500)), ("0.5KiB", (None, 512)), ("3GB", (None, 3 * 10**9)),
    ("1.005MB", (None, 1_005_000)),  # 1.005 * 1e6 is 1004999.9999999999 as floats
    ("1.001KB ", (None, 1001)), (str(MAX_BUDGET_BYTES), (None, MAX_BUDGET_BYTES)),
])
def test_budgets_are_read_exactly(spec, expected):
    assert parse_budget(spec) == expected


def test_the_largest_budget_fits_sqlite_and_json():
    assert budgets.MAX_BUDGET_BYTES == MAX_BUDGET_BYTES < 2**63 - 1
    assert float(MAX_BUDGET_BYTES) == MAX_BUDGET_BYTES


@pytest.mark.parametrize("spec, message", [
    ("1.5", "neither a ratio"),  # not 1 byte: a bare number above 1 is a whole byte count
    ("2.0000001", "neither a ratio"),
    ("99999999999999999999999B", "more than the largest budget"),
    (str(2**63), "more than the largest budget"),
    (str(MAX_BUDGET_BYTES + 1), "more than the largest budget"),
    ("0", "in (0, 1]"), ("0%", "in (0, 1]"), ("0.0", "in (0, 1]"), ("150%", "in (0, 1]"), ("0B", "more than 0 bytes"),
    ("0.5B", "whole number of bytes"), ("1.0005KB", "1000.5 bytes"),
    ("-0.5", "neither"), ("1e3", "neither"), ("nan", "neither"), ("inf", "neither"), ("", "neither"),
    ("80_000", "neither"), ("8,000", "neither"), ("\u0663\u0660", "neither"), ("80 TB", "neither"),
])
def test_what_cannot_be_a_budget_is_refused(spec, message):
    with pytest.raises(BudgetError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
                       .replace("]", r"\]")):
        parse_budget(spec)


def test_ratios_and_sizes_each_refuse_the_other():
    assert budgets.parse_ratio("50%") == budgets.parse_ratio("0.5") == 0.5
    assert budgets.parse_size("80KB") == budgets.parse_size("80000") == 80000
    with pytest.raises(BudgetError, match="is a size"):
        budgets.parse_ratio("80KB")
    with pytest.raises(BudgetError, match=r"in \(0, 1\]"):
        budgets.parse_ratio("1.5")
    with pytest.raises(BudgetError, match="is a percentage"):
        budgets.parse_size("50%")
    with pytest.raises(BudgetError, match="whole number of bytes"):
        budgets.parse_size("0.5")
    with pytest.raises(BudgetError, match="written as text"):
        parse_budget(0.5)  # type: ignore[arg-type]


def test_a_ratio_target_is_the_exact_product_rounded_down(tmp_path):
    with MemoryStore(tmp_path / "s.db") as store:
        store.add(Entry(id="a", content="x"))
        one = store.json_bytes()
        store.add(Entry(id="b", content="y" * (1 + 300 - 2 * one)))  # a store of exactly 300 bytes
        assert store.json_bytes() == 300
        # 0.57 * 300 is 171 bytes; as floats it is 170.99999999999997.
        assert int(0.57 * 300) == 170
        assert resolve_target(store, metric="json", budget=0.57) == 171
        assert resolve_target(store, metric="json", budget=budgets.parse_ratio("57%")) == 171


@pytest.mark.parametrize("too_big", [2**63, 2**63 - 1, MAX_BUDGET_BYTES + 1, 10**30])
def test_the_python_api_refuses_byte_budgets_out_of_range(tmp_path, too_big):
    with make_store(tmp_path / "s.db") as store:
        before = store.json_bytes()
        with pytest.raises(BudgetError, match="largest budget"):
            resolve_target(store, metric="json", budget_bytes=too_big)
        with pytest.raises(BudgetError, match="largest budget"):
            compressor(store).run(budget_bytes=too_big)
        with pytest.raises(BudgetError, match="largest budget"):
            set_budget(store, target_bytes=too_big, metric="json", spec=str(too_big))
        with pytest.raises(BudgetError, match="largest budget"):
            Upkeep(compressor(store), high_bytes=too_big, low_bytes=1000)
        with pytest.raises(BudgetError, match="whole number of bytes"):
            resolve_target(store, metric="json", budget_bytes=1000.0)  # type: ignore[arg-type]
        assert get_budget(store) is None and store.journal.runs() == [] and store.json_bytes() == before


def test_a_ratio_of_an_empty_store_is_no_standing_budget(tmp_path):
    with MemoryStore(tmp_path / "e.db") as store:
        with pytest.raises(BudgetError, match="0 bytes"):
            set_budget(store, target_bytes=resolve_target(store, metric="json", budget=0.5), metric="json",
                       spec="0.5")
        assert get_budget(store) is None


# --- through the command line ------------------------------------------------------------


def run(*args: str):
    return CliRunner().invoke(cli, list(args), obj=fake())


def shown(db) -> dict:
    return json.loads(run("budget", "show", "--db", str(db), "--json").stdout)


@pytest.mark.parametrize("spec, message", [
    ("1.5", "neither a ratio"), ("99999999999999999999999B", "largest budget"), (str(2**63), "largest budget"),
    ("1.0005KB", "whole number of bytes"), ("0%", "in (0, 1]"), ("lots", "neither"),
])
def test_budget_set_refuses_what_cannot_be_a_budget_and_keeps_the_old_one(tmp_path, spec, message):
    db = tmp_path / "s.db"
    make_store(db).close()
    assert run("budget", "set", "9KB", "--db", str(db)).exit_code == 0
    result = run("budget", "set", spec, "--db", str(db))
    assert result.exit_code == 1 and result.stderr.startswith("Error: ") and message in result.stderr, result.output
    assert "Traceback" not in result.output and shown(db)["bytes"] == 9000 and shown(db)["spec"] == "9KB"


def test_budget_set_reads_percentages_and_sizes_exactly(tmp_path):
    db = tmp_path / "s.db"
    make_store(db).close()
    with MemoryStore(db, create=False) as store:
        size = store.json_bytes()
    half = json.loads(run("budget", "set", "50%", "--db", str(db), "--json").stdout)
    assert half["bytes"] == size // 2
    assert json.loads(run("budget", "set", "1.005MB", "--db", str(db), "--json").stdout)["bytes"] == 1_005_000


@pytest.mark.parametrize("args, message", [
    (["--budget-bytes", str(2**63)], "largest budget"),
    (["--budget-bytes", "99999999999999999999999"], "largest budget"),
    (["--budget-bytes", "0.5"], "whole number of bytes"),
    (["--budget-bytes", "50%"], "is a percentage"),
    (["--budget", "80KB"], "is a size"),
    (["--budget", "1.5"], "in (0, 1]"),
    (["--budget", "nan"], "neither"),
    (["--budget", "1e-400"], "neither"),
])
def test_compress_refuses_what_cannot_be_a_budget_and_changes_nothing(tmp_path, args, message):
    db = tmp_path / "s.db"
    make_store(db).close()
    assert run("budget", "set", "9KB", "--db", str(db)).exit_code == 0
    raw = db.read_bytes()
    result = run("compress", "--db", str(db), *args)
    assert result.exit_code == 1 and result.stderr.startswith("Error: ") and message in result.stderr, result.output
    assert db.read_bytes() == raw and shown(db)["bytes"] == 9000


def test_compress_takes_a_percentage_as_its_ratio(tmp_path):
    db = tmp_path / "s.db"
    make_store(db).close()
    with MemoryStore(db, create=False) as store:
        size = store.json_bytes()
    report = json.loads(run("compress", "--db", str(db), "--budget", "50%", "--json").stdout)
    assert report["target_bytes"] == size // 2 and report["budget_met"]
    # The same budget written as a ratio is the one recorded: nothing more to do.
    again = json.loads(run("compress", "--db", str(db), "--budget", "0.5", "--json").stdout)
    assert again["run_id"] is None and again["target_bytes"] == size // 2
