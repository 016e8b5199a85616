"""The identical phase: pairs of entries with the same text, decided before the similarity order."""

from __future__ import annotations

from pathlib import Path

from memrefine_edge.core import Entry
from memrefine_edge.engine import Compressor
from memrefine_edge.engine._identical import IDENTICAL_SIMILARITY, identical_pairs
from memrefine_edge.store import MemoryStore
from memrefine_edge.testing import HashEncoder
from tests.support.fakes import ConcatMerger, ScriptedMethod

TOPICS = ("tea in Paris", "a guitar lesson", "the dog's birthday", "yoga on Sunday", "a museum in Berlin",
          "camping at the beach", "a job interview", "soup recipes", "the sister's concert", "running shoes")


def entries_with_copies() -> list[Entry]:
    """Ten distinct entries; three of them copied once, one twice, the copies scattered among them."""
    out = [Entry(id=f"e{i}", content=f"Ana: I talked about {t} with Ben.") for i, t in enumerate(TOPICS)]
    for pos, (src, copy) in enumerate([(1, "c1"), (4, "c4"), (4, "c4b"), (7, "c7"), (9, "c9")]):
        out.insert(3 + 2 * pos, Entry(id=copy, content=out[[e.id for e in out].index(f"e{src}")].content))
    return out


def make(path: Path) -> MemoryStore:
    store = MemoryStore(path)
    store.add_many(entries_with_copies())
    return store


def run(store: MemoryStore, method: ScriptedMethod, **kw):
    return Compressor(store, encoder=HashEncoder(), method=method, merger=ConcatMerger(), k=4, mode="paper").run(**kw)


def test_pairs_come_by_the_earlier_entry_then_the_later_across_groups():
    groups = [[(1, "a"), (4, "b"), (6, "c")], [(2, "d"), (3, "e")], [(5, "f"), (9, "g")]]
    assert list(identical_pairs(groups)) == [("a", "b"), ("a", "c"), ("d", "e"), ("b", "c"), ("f", "g")]
    assert list(identical_pairs([])) == []
    gone: set[str] = set()
    drawn = []
    for a, b in identical_pairs(groups, gone=gone):  # the set may grow while pairs are drawn
        drawn.append((a, b))
        gone.add(b)
    # b went with the first pair, so (b, c) is never drawn; its later entry is the caller's to skip
    assert drawn == [("a", "b"), ("a", "c"), ("d", "e"), ("f", "g")]


def test_identical_pairs_are_decided_first_at_similarity_one(tmp_path):
    with make(tmp_path / "s.db") as store:
        method = ScriptedMethod()
        report = run(store, method, budget=0.3)
        shown = method.seen
        first = [(a, b) for a, b, sim in shown if sim == IDENTICAL_SIMILARITY]
        assert first == [(a, b) for a, b, _ in shown[:len(first)]]  # all of them before any other pair
        # Each group's first pair, in insertion order (c4 was inserted before e4); a delete or a merge
        # of that pair leaves c4b its only other pair in its group.
        pairs = {frozenset(p) for p in first}
        assert first[0] == ("e1", "c1") and {frozenset(p) for p in (("c4", "e4"), ("c7", "e7"), ("c9", "e9"))} <= pairs
        assert report.decisions == len(shown)
        audit = store.journal.decisions(report.run_id)
        assert [(d.a_id, d.b_id) for d in audit[:len(first)]] == first
        totals = store.recount()
        assert all(v["total"] == v["recount"] for v in totals.values())


def test_a_budget_met_by_identical_pairs_ends_the_run_there(tmp_path):
    with make(tmp_path / "s.db") as store:
        before = store.json_bytes()
        method = ScriptedMethod()
        report = run(store, method, budget=(before - 1) / before)  # one delete is enough
        assert report.stop_reason == "budget met"
        assert method.seen and all(sim == IDENTICAL_SIMILARITY for _, _, sim in method.seen)


def test_a_run_stopped_in_the_identical_phase_resumes_to_the_same_store(tmp_path):
    with make(tmp_path / "whole.db") as store:
        run(store, ScriptedMethod(), budget=0.4)
        expected = [e.counted_fields() for e in store.entries()]
        expected_steps = [(d.a_id, d.b_id, d.action) for d in store.journal.decisions()]
    with make(tmp_path / "parts.db") as store:
        partial = run(store, ScriptedMethod(), budget=0.4, max_decisions=2)
        assert partial.stop_reason.startswith("stopped") and partial.decisions == 2
        resumed = run(store, ScriptedMethod(), budget=0.4)
        assert resumed.resumed and resumed.run_id == partial.run_id
        assert [e.counted_fields() for e in store.entries()] == expected
        assert [(d.a_id, d.b_id, d.action) for d in store.journal.decisions()] == expected_steps


def test_preserved_identical_pairs_are_never_proposed_again(tmp_path):
    with make(tmp_path / "s.db") as store:
        first = ScriptedMethod(policy="preserve")
        report = run(store, first, budget=0.5)
        assert report.stop_reason == "no candidate pair left"
        identical = {(a, b) for a, b, sim in first.seen if sim == IDENTICAL_SIMILARITY}
        assert len(identical) == 6  # e1/c1, e4/c4, e4/c4b, c4/c4b, e7/c7, e9/c9
        again = ScriptedMethod(policy="preserve")
        run(store, again, budget=0.5)
        assert again.seen == []  # every pair was preserved: nothing is asked twice
        assert len(store) == len(entries_with_copies())


def test_entries_added_after_the_run_started_are_not_in_the_phase(tmp_path):
    with make(tmp_path / "s.db") as store:
        start = store.max_seq()
        store.add(Entry(id="late", content=entries_with_copies()[0].content))
        groups = store.identical_groups(max_seq=start)
        assert all(entry_id != "late" for group in groups for _, entry_id in group)
        assert any(entry_id == "late" for group in store.identical_groups(max_seq=store.max_seq())
                   for _, entry_id in group)
