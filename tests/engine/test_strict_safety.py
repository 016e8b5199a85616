"""Strict mode never empties the store to meet a budget: a budget no entry it can keep fits is refused before
anything changes, and no decision (judge, identical pair, deferred delete, eviction) takes the last entry that fits."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from memrefine_edge.cli import cli
from memrefine_edge.core import BudgetError, Decision, Entry, json_size
from memrefine_edge.engine import Compressor, PipelineConfig, build
from memrefine_edge.methods import Method, PairContext
from memrefine_edge.store import MemoryStore, stored_embedding_bytes
from memrefine_edge.testing import FakeBackends, HashEncoder
from tests.support.fakes import ConcatMerger, ScriptedMethod
from tests.support.stores import export

# A store of two facts and a goodbye: the goodbye is the smallest entry, and the only one under 200 bytes.
W3 = [Entry(id="a", content="Gotta run, bye!"),
      Entry(id="b", content="Ana adopted a grey cat named Pixel in Lisbon on 3 May 2023 after visiting the shelter "
                            "twice with her brother Tomas."),
      Entry(id="c", content="Ben bought a red kayak in Oslo for 450 euros on 9 June 2023 and paddled across the fjord "
                            "with his friend Marit.")]


def solo(entry: Entry) -> int:
    return json_size(replace(entry, links=()))


def default_compressor(store: MemoryStore, **kw) -> Compressor:
    """The default pipeline (fast path, redundancy scorer, deterministic merge) with the hash encoder."""
    parts = build(PipelineConfig(), backends=FakeBackends())
    return Compressor(store, encoder=parts.encoder, method=parts.method, merger=parts.merger, mode="strict", **kw)


def cli_compress(db: Path, budget_bytes: int, obj=None):
    return CliRunner().invoke(cli, ["compress", "--db", str(db), "--budget-bytes", str(budget_bytes), "--mode",
                                    "strict", "--json"], obj=FakeBackends() if obj is None else obj)


def evicted_or_removed(store: MemoryStore) -> set[str]:
    return {i for d in store.journal.decisions() for i in d.removed_ids}


# --- a budget only small talk fits: refused before anything changes ------------------------------------------


def test_cli_refuses_a_strict_budget_that_only_small_talk_fits_and_changes_nothing(tmp_path):
    db = tmp_path / "w3.db"
    with MemoryStore(db) as store:
        store.add_many(W3)
        before = export(store)
    assert min(solo(e) for e in W3) == solo(W3[0]) < 200 < min(solo(W3[1]), solo(W3[2]))
    result = cli_compress(db, 200)
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "Traceback" not in result.output
    assert "without emptying the store" in lines[0]
    assert f"{min(solo(W3[1]), solo(W3[2])):,} bytes" in lines[0]  # the smallest entry it can keep
    with MemoryStore(db, create=False) as store:
        assert export(store) == before and store.journal.runs() == []


def test_api_refuses_a_strict_budget_that_only_small_talk_fits_and_changes_nothing(tmp_path):
    with MemoryStore(tmp_path / "w3.db") as store:
        store.add_many(W3)
        before = export(store)
        comp = default_compressor(store)
        keepable = min(solo(W3[1]), solo(W3[2]))
        with pytest.raises(BudgetError, match=f"smallest entry it can keep takes {keepable:,} bytes"):
            comp.target_bytes(budget_bytes=200)
        with pytest.raises(BudgetError, match="without emptying the store"):
            comp.run(budget_bytes=200)
        assert export(store) == before and store.journal.runs() == []
        # The same budget in paper mode is not refused: paper never evicts.
        paper = Compressor(store, encoder=HashEncoder(), method=comp.method, merger=comp.merger, mode="paper")
        assert paper.target_bytes(budget_bytes=200) == 200
        # At the smallest size that can be kept, strict mode keeps it and meets the budget.
        report = default_compressor(store).run(budget_bytes=keepable)
        assert report.budget_met and len(store) >= 1 and store.json_bytes() <= keepable


def test_cli_strict_budget_at_the_smallest_keepable_entry_keeps_that_entry(tmp_path):
    db = tmp_path / "w3.db"
    with MemoryStore(db) as store:
        store.add_many(W3)
    keepable = min(W3[1:], key=solo)
    result = cli_compress(db, solo(keepable))
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["budget_met"] and report["after"]["entries"] == 1
    with MemoryStore(db, create=False) as store:
        assert store.ids() == [keepable.id]


# --- no decision takes the last entry that fits ----------------------------------------------------------------

# X is the only entry that fits the budget alone; Y states everything X does (the fast path deletes X as
# contained in Y); Z is another fact. Both Y and Z are larger than the budget.
X = Entry(id="x", content="Ana adopted a grey cat.")
Y = Entry(id="y", content="Ana adopted a grey cat named Pixel in Lisbon on 3 May 2023 after two visits.")
Z = Entry(id="z", content="Ben bought a red kayak in Oslo for 450 euros on 9 June 2023 with Marit.")


def test_strict_run_keeps_the_only_entry_that_fits_when_the_fast_path_would_delete_it(tmp_path):
    with MemoryStore(tmp_path / "k.db") as store:
        store.add_many([X, Y, Z])
        target = solo(X)
        assert target < min(solo(Y), solo(Z))
        report = default_compressor(store).run(budget_bytes=target)
        assert report.budget_met and report.stop_reason == "budget met by eviction (strict mode)"
        assert store.ids() == ["x"] and store.json_bytes() <= target
        assert "x" not in evicted_or_removed(store)
        assert all("x" not in (d.a_id, d.b_id) for d in store.journal.decisions())  # (x, y) was not proposed


def test_cli_strict_run_keeps_the_only_entry_that_fits_when_the_fast_path_would_delete_it(tmp_path):
    db = tmp_path / "k.db"
    with MemoryStore(db) as store:
        store.add_many([X, Y, Z])
    result = cli_compress(db, solo(X))
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["budget_met"] and report["after"]["entries"] == 1
    with MemoryStore(db, create=False) as store:
        assert store.ids() == ["x"]


class MergeAll(Method):
    """Merges every pair it is shown."""

    name = "merge-all"

    def decide(self, pair: PairContext) -> Decision:
        return Decision("merge", None, merge_instruction="keep all", reason="scripted", source="llm")


def test_strict_run_does_not_merge_away_the_only_entry_that_fits(tmp_path):
    others = [Entry(id=f"o{i}", content=f"Ana adopted a grey cat and visited the shelter in Lisbon {i} times with "
                                         f"her brother Tomas in May") for i in range(4)]
    with MemoryStore(tmp_path / "m.db") as store:
        store.add_many([X, *others])
        target = solo(X)
        assert target < min(solo(e) for e in others)
        comp = Compressor(store, encoder=HashEncoder(), method=MergeAll(), merger=ConcatMerger(), mode="strict", k=4)
        report = comp.run(budget_bytes=target)
        assert report.budget_met and store.ids() == ["x"]
        assert report.actions.get("merge", 0) >= 1  # the others merged; x in no merge
        assert all("x" not in (d.a_id, d.b_id) for d in store.journal.decisions() if d.action == "merge")


def test_strict_run_does_not_delete_the_only_entry_that_fits_as_an_identical_copy(tmp_path):
    # The same text twice: the earlier copy carries metadata that makes it too large alone, the later fits.
    # The fast path deletes the later of two exact duplicates.
    big_copy = Entry(id="x-original", content=X.content, metadata={"note": "imported from the old assistant " * 4})
    with MemoryStore(tmp_path / "i.db") as store:
        store.add_many([big_copy, Y, Z, X])
        target = solo(X)
        assert target < min(solo(big_copy), solo(Y), solo(Z))
        report = default_compressor(store).run(budget_bytes=target)
        assert report.budget_met and store.ids() == ["x"]


class DeferAll(Method):
    """Preserves every pair for now (a deferred delete of its entry ``a``), and takes that delete when asked."""

    name = "defer-all"

    def decide(self, pair: PairContext) -> Decision:
        return Decision("preserve", None, reason="scripted", source="deferred")

    def deferred(self, pair: PairContext) -> Decision | None:
        return Decision("delete", "a", reason="scripted, deferred", source="guard")


def test_strict_run_does_not_take_a_deferred_delete_of_the_only_entry_that_fits(tmp_path):
    with MemoryStore(tmp_path / "d.db") as store:
        store.add_many([X, Y, Z])
        target = solo(X)
        comp = Compressor(store, encoder=HashEncoder(), method=DeferAll(), merger=ConcatMerger(), mode="strict", k=4)
        report = comp.run(budget_bytes=target)
        assert report.budget_met and store.ids() == ["x"]
        assert "x" not in evicted_or_removed(store)


def test_strict_eviction_takes_nothing_when_no_entry_left_fits_the_budget(tmp_path):
    # The entry that fits is removed by someone else while the run is interrupted: the resumed run cannot
    # meet the budget without emptying the store, so it evicts nothing and says the budget is not met.
    with MemoryStore(tmp_path / "g.db") as store:
        store.add_many([X, Y, Z])
        comp = Compressor(store, encoder=HashEncoder(), method=ScriptedMethod(policy="preserve"),
                          merger=ConcatMerger(), mode="strict", k=4)
        stopped = comp.run(budget_bytes=solo(X), max_decisions=1)
        assert stopped.stop_reason.startswith("stopped") and store.journal.unfinished_run() is not None
        store.remove("x")
        report = comp.run(budget_bytes=solo(X))
        assert not report.budget_met and report.stop_reason.startswith("budget not met")
        assert sorted(store.ids()) == ["y", "z"] and report.actions.get("evict", 0) == 0


@pytest.mark.parametrize("metric", ["json", "disk"])
def test_strict_runs_at_the_floor_keep_an_entry_whatever_the_judge_does(tmp_path, metric):
    # Budgets at and just above the smallest entry that states something, with a judge that deletes and
    # merges: every run ends within the budget with an entry left, or is refused before any change.
    from tests.support.stores import synthetic_entries

    for seed in range(6):
        entries = synthetic_entries(24, seed)
        entries[3] = Entry(id=entries[3].id, content="Thanks, bye!")  # small talk, the smallest entry
        with MemoryStore(tmp_path / f"f{metric}{seed}.db") as store:
            store.add_many(entries)
            comp = Compressor(store, encoder=HashEncoder(), method=ScriptedMethod(), merger=ConcatMerger(),
                              mode="strict", metric=metric, k=4)
            sizes = sorted(store.solo_size(e.id, metric, embedding_bytes=stored_embedding_bytes(384))
                           for e in entries[4:])
            target = sizes[0] + seed
            try:
                comp.target_bytes(budget_bytes=target)
            except BudgetError:
                assert store.journal.runs() == []
                continue
            report = comp.run(budget_bytes=target)
            assert report.budget_met and len(store) >= 1 and store.size(metric) <= target


# --- the reproduction with the real encoder and the default judge ----------------------------------------------


@pytest.mark.models
def test_real_models_strict_budget_only_small_talk_fits_is_refused(tmp_path):
    jsonl = tmp_path / "w3.jsonl"
    jsonl.write_text("".join(json.dumps({"id": e.id, "content": e.content}) + "\n" for e in W3))
    db = tmp_path / "w3.db"
    runner = CliRunner()
    assert runner.invoke(cli, ["import", "--format", "jsonl", str(jsonl), "--db", str(db)]).exit_code == 0
    result = runner.invoke(cli, ["compress", "--db", str(db), "--budget-bytes", "200", "--mode", "strict"])
    assert result.exit_code == 1 and result.stderr.startswith("Error: ") and "without emptying" in result.stderr
    with MemoryStore(db, create=False) as store:
        assert sorted(store.ids()) == ["a", "b", "c"] and store.journal.runs() == []


@pytest.mark.locomo
@pytest.mark.models
@pytest.mark.parametrize("sample,start", [("conv-26", 20), ("conv-30", 100)])
def test_real_models_twenty_locomo_turns_at_300_bytes_keep_an_entry(locomo_dir, tmp_path, sample, start):
    from memrefine_edge.store import parse_file

    entries, _ = parse_file(locomo_dir / "locomo-dev.json", format="locomo-turns", sample_id=sample)
    db = tmp_path / "t.db"
    with MemoryStore(db) as store:
        store.add_many([replace(e, links=()) for e in entries[start:start + 20]])
    result = CliRunner().invoke(cli, ["compress", "--db", str(db), "--budget-bytes", "300", "--mode", "strict",
                                      "--json"])
    if result.exit_code == 1:  # refused up front: then nothing changed
        assert "without emptying" in result.stderr
        with MemoryStore(db, create=False) as store:
            assert len(store) == 20 and store.journal.runs() == []
        return
    report = json.loads(result.stdout)
    assert report["budget_met"] and report["after"]["entries"] >= 1 and report["after"]["json_bytes"] <= 300


@pytest.mark.parametrize("stop_after", [1, 3, 6])
def test_a_strict_run_at_the_floor_resumed_halfway_equals_the_uninterrupted_run(tmp_path, stop_after):
    from tests.support.stores import synthetic_entries

    def fresh(name: str) -> MemoryStore:
        store = MemoryStore(tmp_path / name)
        entries = synthetic_entries(24, 2)
        store.add_many(entries)
        return store

    def run(store: MemoryStore, **kw):
        comp = Compressor(store, encoder=HashEncoder(), method=ScriptedMethod(), merger=ConcatMerger(),
                          mode="strict", k=4)
        target = min(store.solo_size(i, "json") for i in store.ids())
        return comp.run(budget_bytes=target, **kw)

    with fresh("whole.db") as store:
        whole = run(store)
        want = [(d.action, d.a_id, d.b_id, d.target) for d in store.journal.decisions()]
        want_entries = export(store)
        assert whole.budget_met and len(store) >= 1
    with fresh("cut.db") as store:
        assert run(store, max_decisions=stop_after).stop_reason.startswith("stopped")
        assert run(store).budget_met
        assert [(d.action, d.a_id, d.b_id, d.target) for d in store.journal.decisions()] == want
        assert export(store) == want_entries
