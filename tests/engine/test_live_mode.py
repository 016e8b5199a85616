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


def compress_cli(tmp_path, *args: str, method: ScriptedMethod | None = None):
    """``memrefine compress --db DB ARGS`` on a store of 40 distinct facts, with model-free fakes."""
    from click.testing import CliRunner

    from memrefine_edge.cli import cli
    from memrefine_edge.testing import FakeBackends

    db = tmp_path / "m.db"
    if not db.exists():
        with MemoryStore(db) as store:
            store.add_many(distinct_facts(40))
    backends = FakeBackends(encoder=HashEncoder(), method=method or ScriptedMethod(policy="preserve"),
                            merger=ConcatMerger())
    return CliRunner().invoke(cli, ["compress", "--db", str(db), *args], obj=backends)


def test_the_command_line_takes_live_mode(tmp_path):
    import json

    out = compress_cli(tmp_path, "--budget", "0.5", "--mode", "live", "--json")
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    assert report["mode"] == "live" and report["budget_met"] and report["actions"]["evict"] > 0


class MergeAll(ScriptedMethod):
    """Merges every pair it is shown."""

    def decide(self, pair):
        from memrefine_edge.core import Decision

        self.seen.append((pair.a.id, pair.b.id, pair.similarity))
        return Decision(action="merge", target=None, merge_instruction="keep all", reason="merge all", source="llm")


def test_a_live_merge_that_frees_too_little_text_is_a_preserve(tmp_path):
    # Two distinct facts share few words: the fact-keeping merge is almost their concatenation.
    store = MemoryStore(tmp_path / "m.db")
    store.add_many([Entry(id="a", content="Ana took up kayaking in Lisbon in 1990."),
                    Entry(id="b", content="Ben met his chess teacher at Oslo during 2004."),
                    Entry(id="c", content="Ana took up kayaking in Lisbon in 1990, twice a week."),
                    Entry(id="d", content="Zoe sails yachts around Perth since 1999."),
                    Entry(id="e", content="Grandpa Hugo bakes sourdough every Sunday morning."),
                    Entry(id="f", content="Our neighbour's dog Rex hates thunderstorms.")])
    report = live(store, MergeAll(), neighbours=2).run(budget_bytes=store.json_bytes() - 150)
    merged = [d for d in store.journal.decisions(report.run_id) if d.action == "merge"]
    # a and c overlap: their merge frees the shorter text almost whole; the others share no word, so a
    # merge of any of them would free nothing
    assert [sorted(d.removed_ids) for d in merged] == [["a", "c"]]
    assert report.sources.get("saving", 0) >= 1 and report.budget_met and report.actions.get("evict", 0) >= 1
    store.close()


def test_paper_mode_takes_every_merge_and_the_share_is_a_setting(tmp_path):
    from memrefine_edge.core import ConfigurationError

    store = MemoryStore(tmp_path / "m.db")
    store.add_many([Entry(id="a", content="Ana took up kayaking in Lisbon in 1990."),
                    Entry(id="b", content="Ben met a chess teacher in Oslo in 2004.")])
    comp = Compressor(store, encoder=HashEncoder(), method=MergeAll(), merger=ConcatMerger(), mode="paper")
    assert comp.min_merge_saving == 0.0
    report = comp.run(budget_bytes=store.json_bytes() - 1)
    assert report.actions == {"merge": 1} and "saving" not in report.sources
    for bad in (-0.1, 1.5, True, "0.1"):
        with pytest.raises(ConfigurationError, match="min_merge_saving"):
            Compressor(store, encoder=HashEncoder(), method=MergeAll(), merger=ConcatMerger(), min_merge_saving=bad)
    assert Compressor(store, encoder=HashEncoder(), method=MergeAll(), merger=ConcatMerger()).min_merge_saving == 0.1
    store.close()


def test_the_report_says_what_each_route_removed(tmp_path):
    store = MemoryStore(tmp_path / "m.db")
    store.add_many(distinct_facts(60))
    before = store.json_bytes()
    report = live(store, ScriptedMethod(), neighbours=2).run(budget=0.05)
    removed = report.removed_bytes
    assert report.budget_met and removed.get("evict", 0) > 0
    assert set(removed) <= {"delete", "merge", "evict"}
    # every byte the run removed went by one route or another
    assert sum(removed.values()) == before - report.after["json_bytes"]
    assert report.as_dict()["removed_bytes"] == removed
    store.close()


def test_compress_is_live_by_default_and_says_what_eviction_removed(tmp_path):
    method = ScriptedMethod(policy="preserve")
    out = compress_cli(tmp_path, "--budget", "0.5", "--neighbours", "2", method=method)
    assert out.exit_code == 0, out.output
    assert "mode live" in out.stdout and "B by eviction" in out.stdout
    assert 0 < len(method.seen) <= 2 * 40
    with MemoryStore(tmp_path / "m.db", create=False) as store:
        report = store.journal.runs()[-1].report
    assert report is not None and report["mode"] == "live" and report["removed_bytes"]["evict"] > 0
    bad = compress_cli(tmp_path, "--budget", "0.5", "--neighbours", "0")
    assert bad.exit_code == 2 and "--neighbours" in bad.output


def test_a_merge_that_cannot_free_enough_is_never_written(tmp_path):
    from memrefine_edge.judging import GuardedMerger

    store = MemoryStore(tmp_path / "m.db")
    store.add_many([Entry(id="a", content="Ana took up kayaking in Lisbon in 1990."),
                    Entry(id="b", content="Ben met his chess teacher at Oslo during 2004."),
                    Entry(id="c", content="Zoe sails yachts around Perth since 1999.")])
    merger = GuardedMerger(None)
    comp = Compressor(store, encoder=HashEncoder(), method=MergeAll(), merger=merger, neighbours=2)
    report = comp.run(budget_bytes=store.json_bytes() - 1)
    # the deterministic merge's length is known first: no pair of distinct facts was merged, or even written
    assert report.sources.get("saving", 0) == 3 and merger.stats["merges"] == 0
    assert report.actions["evict"] == 1 and report.budget_met
    store.close()


def test_a_hurried_pass_evicts_at_once_and_the_next_pass_judges_what_it_left(tmp_path):
    store = MemoryStore(tmp_path / "m.db")
    store.add_many(distinct_facts(80))
    method = ScriptedMethod(policy="preserve")
    calls = []

    def hurry() -> bool:  # writers start waiting after the fifth decision
        calls.append(len(method.seen))
        return len(method.seen) >= 5

    comp = live(store, method, neighbours=3)
    comp.hurry = hurry
    first = comp.run(budget=0.6)
    assert first.budget_met and first.stop is StopReason.BUDGET_MET_BY_EVICTION_LIVE
    assert len(method.seen) == 5 and first.actions["preserve"] == 5 and first.actions["evict"] > 0
    # The mark stops before the first entry left not fully judged: not at the run's last entry.
    assert first.judged_through_seq is not None and first.judged_through_seq < max(store.seq_of(e.id) for e in
                                                                                   store.entries())
    pairs_first = {tuple(sorted(p[:2])) for p in method.seen}
    method.seen.clear()
    store.add(distinct_facts(1, start=500)[0])
    second = live(store, method, neighbours=3).run(budget_bytes=store.json_bytes() - 10)
    assert second.budget_met
    judged_again = {tuple(sorted(p[:2])) for p in method.seen}
    assert not judged_again & pairs_first  # no pair judged twice
    # the entries the first pass left are judged now: more than the one newcomer's pairs
    assert len(method.seen) > 3
    assert second.judged_through_seq is not None and second.judged_through_seq >= store.seq_of("f00500")
    store.close()


def test_hurry_is_not_asked_in_paper_mode(tmp_path):
    store = MemoryStore(tmp_path / "m.db")
    store.add_many(distinct_facts(30))
    comp = Compressor(store, encoder=HashEncoder(), method=ScriptedMethod(policy="preserve"),
                      merger=ConcatMerger(), mode="paper", hurry=lambda: pytest.fail("asked in paper mode"))
    report = comp.run(budget=0.6)
    assert report.stop is StopReason.NO_CANDIDATE and report.actions["preserve"] == 30 * 29 // 2
    store.close()


class Halt(Exception):
    pass


def test_pause_points_change_nothing_and_a_pause_that_raises_leaves_the_run_resumable(tmp_path):
    ref = make_store(tmp_path / "ref.db", n=300, seed=9)
    ref.close()
    shutil.copy(tmp_path / "ref.db", tmp_path / "paused.db")
    shutil.copy(tmp_path / "ref.db", tmp_path / "halted.db")
    with MemoryStore(tmp_path / "ref.db", create=False) as store:
        whole = live(store, ScriptedMethod()).run(budget=0.4)
        expected = export(store)
    calls = []
    with MemoryStore(tmp_path / "paused.db", create=False) as store:
        comp = live(store, ScriptedMethod())
        comp.pause = lambda: calls.append(1)
        paused = comp.run(budget=0.4)
        assert export(store) == expected and paused.actions == whole.actions
    assert len(calls) >= 3  # between blocks of rescanned rows and the eviction's neighbour-list build

    def halt() -> None:
        raise Halt

    with MemoryStore(tmp_path / "halted.db", create=False) as store:
        comp = live(store, ScriptedMethod())
        comp.pause = halt
        with pytest.raises(Halt):
            comp.run(budget=0.4)
        assert store.journal.unfinished_run() is not None
        resumed = live(store, ScriptedMethod()).run(budget=0.4)
        assert resumed.resumed and export(store) == expected


def test_a_merge_longer_than_max_merged_bytes_is_a_preserve(tmp_path):
    from memrefine_edge.core import ConfigurationError

    store = MemoryStore(tmp_path / "m.db")
    store.add_many([Entry(id="a", content="Ana took up kayaking in Lisbon in 1990."),
                    Entry(id="b", content="Ben met a chess teacher in Oslo in 2004."),
                    Entry(id="c", content="Caro has sailed around Perth since 1999.")])
    longest = max(len(e.content.encode()) for e in store.entries())
    comp = Compressor(store, encoder=HashEncoder(), method=MergeAll(), merger=ConcatMerger(), mode="paper",
                      max_merged_bytes=longest + 10)
    report = comp.run(budget_bytes=store.json_bytes() - 1)
    # every merge of two of them is longer than the longest entry by more than 10 bytes: all preserved
    assert report.actions == {"preserve": 3} and report.sources == {"length": 3}
    assert sorted(e.id for e in store.entries()) == ["a", "b", "c"]
    assert store.journal.run(report.run_id).params["max_merged_bytes"] == longest + 10
    # paper mode reproduces the paper: no limit; live and strict: 1,000 bytes; 0 asks for none
    assert Compressor(store, encoder=HashEncoder(), method=MergeAll(), merger=ConcatMerger(),
                      mode="paper").max_merged_bytes is None
    for mode in ("live", "strict"):
        assert Compressor(store, encoder=HashEncoder(), method=MergeAll(), merger=ConcatMerger(),
                          mode=mode).max_merged_bytes == 1000
        assert Compressor(store, encoder=HashEncoder(), method=MergeAll(), merger=ConcatMerger(), mode=mode,
                          max_merged_bytes=0).max_merged_bytes is None
    for bad in (-5, True, 1.5, "900"):
        with pytest.raises(ConfigurationError, match="max_merged_bytes"):
            Compressor(store, encoder=HashEncoder(), method=MergeAll(), merger=ConcatMerger(), max_merged_bytes=bad)
    store.close()


def test_the_command_line_takes_max_merged_bytes(tmp_path):
    import json

    out = compress_cli(tmp_path, "--budget", "0.5", "--max-merged-bytes", "0", "--json")
    assert out.exit_code == 0, out.output
    with MemoryStore(tmp_path / "m.db") as store:
        run = store.journal.run(json.loads(out.stdout)["run_id"])
        assert run.params["max_merged_bytes"] is None  # 0: no limit
    bad = compress_cli(tmp_path, "--budget", "0.5", "--max-merged-bytes", "-1")
    assert bad.exit_code == 2 and "max-merged-bytes" in bad.output
