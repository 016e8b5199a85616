"""Live mode: a pass judges the changed entries against their nearest neighbours, then evicts to the budget."""

from __future__ import annotations

import shutil

import pytest

from memrefine_edge.core import Entry, StopReason
from memrefine_edge.engine import Compressor
from memrefine_edge.store import MemoryStore
from memrefine_edge.testing import HashEncoder
from tests.support.fakes import ConcatMerger, ScriptedMethod
from tests.support.stores import export, make_store

NAMES = "Ana Ben Caro Dev Eli Fay Gus Hana Ivo Jae Kai Lea Mo Nia Oli Pia".split()
THINGS = "kayaking chess violin pottery climbing baking sailing tango origami fencing judo rowing".split()
CITIES = "Lisbon Oslo Porto Lima Quito Kyoto Hanoi Tunis Accra Perth Cork Riga".split()


def distinct_facts(n: int, start: int = 0) -> list[Entry]:
    """Short distinct facts: every pair of them preserved by a judge that keeps facts."""
    out = []
    for i in range(start, start + n):
        who, what, where = NAMES[i % 16], THINGS[(i // 16) % 12], CITIES[(i // 192) % 12]
        out.append(Entry(id=f"f{i:05d}", content=f"{who} took up {what} in {where} in {1950 + i % 70} (#{i})."))
    return out


def live(store: MemoryStore, method=None, neighbours: int = 4) -> Compressor:
    return Compressor(store, encoder=HashEncoder(), method=method or ScriptedMethod(policy="preserve"),
                      merger=ConcatMerger(), mode="live", neighbours=neighbours)


def judged(store: MemoryStore, run_id: str) -> int:
    report = next(r for r in store.journal.runs() if r.run_id == run_id).report
    assert report is not None
    return sum(n for action, n in report["actions"].items() if action != "evict")


def test_a_pass_judges_each_entry_against_its_nearest_neighbours_only(tmp_path):
    store = MemoryStore(tmp_path / "m.db")
    store.add_many(distinct_facts(120))
    report = live(store, neighbours=4).run(budget=0.6)
    assert report.budget_met and report.stop is StopReason.BUDGET_MET_BY_EVICTION_LIVE
    # every entry changed: at most 4 pairs each (a pair counts once), never the 7,140 pairs of the store
    assert judged(store, report.run_id) <= 4 * 120
    assert report.actions["evict"] > 0 and report.judged_through_seq is not None
    store.close()


def test_the_next_pass_judges_only_what_was_added_and_no_pair_twice(tmp_path):
    store = MemoryStore(tmp_path / "m.db")
    store.add_many(distinct_facts(100))
    method = ScriptedMethod(policy="preserve")
    first = live(store, method, neighbours=3).run(budget_bytes=store.json_bytes() - 10)
    pairs_before = {tuple(sorted(p[:2])) for p in method.seen}
    store.add_many(distinct_facts(10, start=100))
    method.seen.clear()
    second = live(store, method, neighbours=3).run(budget_bytes=store.json_bytes() - 10)
    assert first.budget_met and second.budget_met
    new = {e.id for e in distinct_facts(10, start=100)}
    # only the newcomers' pairs were judged (and any neighbour an eviction brought in), none judged before
    assert method.seen and all(a in new or b in new for a, b, _ in method.seen)
    assert len(method.seen) <= 3 * 10 + 3 * second.actions.get("evict", 0)
    assert not {tuple(sorted(p[:2])) for p in method.seen} & pairs_before
    store.close()


def test_an_interrupted_live_run_resumes_to_the_uninterrupted_store(tmp_path):
    ref = make_store(tmp_path / "ref.db", n=60, seed=5)
    ref.close()
    shutil.copy(tmp_path / "ref.db", tmp_path / "cut.db")
    with MemoryStore(tmp_path / "ref.db", create=False) as store:
        whole = live(store, ScriptedMethod()).run(budget=0.5)
        expected = export(store)
    with MemoryStore(tmp_path / "cut.db", create=False) as store:
        part = live(store, ScriptedMethod()).run(budget=0.5, max_decisions=7)
        assert part.stop is StopReason.MAX_DECISIONS
        resumed = live(store, ScriptedMethod()).run(budget=0.5)
        assert resumed.resumed and resumed.budget_met == whole.budget_met
        assert export(store) == expected


def test_live_mode_refuses_a_budget_no_entry_fits_and_never_empties_the_store(tmp_path):
    from memrefine_edge.core import BudgetError

    store = MemoryStore(tmp_path / "m.db")
    store.add_many(distinct_facts(5))
    before = export(store)
    with pytest.raises(BudgetError):
        live(store).run(budget_bytes=20)
    assert export(store) == before
    from memrefine_edge.core import json_size

    smallest = min(json_size(e) for e in store.entries())
    report = live(store).run(budget_bytes=smallest + 10)
    assert report.budget_met and len(store) >= 1
    store.close()


def test_the_command_line_takes_live_mode(tmp_path):
    import json

    from click.testing import CliRunner

    from memrefine_edge.cli import cli
    from memrefine_edge.testing import FakeBackends

    db = tmp_path / "m.db"
    store = MemoryStore(db)
    store.add_many(distinct_facts(40))
    store.close()
    backends = FakeBackends(encoder=HashEncoder(), method=ScriptedMethod(policy="preserve"), merger=ConcatMerger())
    out = CliRunner().invoke(cli, ["compress", "--db", str(db), "--budget", "0.5", "--mode", "live", "--json"],
                             catch_exceptions=False, obj=backends)
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    assert report["mode"] == "live" and report["budget_met"] and report["actions"]["evict"] > 0
