"""What a preserve decision costs the file: a row of two entry numbers, counted with its run, no audit row."""

from __future__ import annotations

import itertools
import shutil

from memrefine_edge.core import Decision, Entry
from memrefine_edge.engine import Compressor
from memrefine_edge.methods import MemRefineMethod, Method, PairContext
from memrefine_edge.store import MemoryStore
from memrefine_edge.testing import AlwaysJudge, FakeMerger, HashEncoder
from tests.support.fakes import ScriptedMethod
from tests.support.stores import compressor, make_store

KEEP = Decision("preserve", None, reason="each entry holds facts of its own", source="scorer")


def distinct_facts(n: int) -> list[Entry]:
    """``n`` short facts, no two alike (what an assistant mostly accumulates)."""
    names = "Ana Ben Carla Dev Eli Fay Gus Hana".split()
    hobbies = "kayaking pottery chess climbing baking birding fencing judo".split()
    cities = "Lisbon Oslo Quito Lima Cairo Hanoi Dakar Perth".split()
    facts = (f"{name} took up {hobby} in {city} in {1990 + (i * 7) % 30}."
             for i, (name, hobby, city) in enumerate(itertools.product(names, hobbies, cities)))
    return [Entry(id=f"f{i:03d}", content=text) for i, text in zip(range(n), facts, strict=False)]


class Recording(Method):
    """Preserves every pair it is shown and remembers which."""

    name = "recording"

    def __init__(self) -> None:
        self.seen: list[frozenset[str]] = []

    def decide(self, pair: PairContext) -> Decision:
        self.seen.append(frozenset((pair.a.id, pair.b.id)))
        return KEEP


def _judge_every_pair(store: MemoryStore, method: Method | None = None):
    return Compressor(store, encoder=HashEncoder(), method=method or MemRefineMethod(judge=AlwaysJudge(KEEP)),
                      merger=FakeMerger(), mode="paper").run(budget=0.5)


def test_a_store_of_distinct_facts_grows_by_a_small_row_per_preserved_pair_not_an_audit_row(tmp_path):
    with MemoryStore(tmp_path / "facts.db") as store:
        store.add_many(distinct_facts(60))
        store.ensure_embeddings(HashEncoder())
        before = store.file_bytes()
        report = _judge_every_pair(store)
        pairs = 60 * 59 // 2
        assert report.actions == {"preserve": pairs} and report.stop_reason == "no candidate pair left"
        # A row of two entry numbers and its run, and its row in the index that finds an entry's pairs
        # when the entry is removed; an audit row per pair took about 60 bytes more than this.
        assert (store.file_bytes() - before) / pairs < 24
        assert store.journal.decisions() == [] and len(store.journal.preserved_pairs()) == pairs
        assert store.journal.preserve_counts(report.run_id) == {"scorer": pairs}


def test_a_resumed_run_reports_the_preserves_of_the_uninterrupted_run(tmp_path):
    with make_store(tmp_path / "a.db", n=40) as store:
        store.ensure_embeddings(HashEncoder())
    shutil.copy(tmp_path / "a.db", tmp_path / "b.db")
    with MemoryStore(tmp_path / "a.db") as store:
        whole = compressor(store).run(budget=0.5)
        pairs = store.journal.preserved_pairs()
    with MemoryStore(tmp_path / "b.db") as store:
        first = compressor(store).run(budget=0.5, max_decisions=7)
        assert first.stop_reason.startswith("stopped") and store.journal.run(first.run_id).cursor == 7
        resumed = compressor(store).run(budget=0.5)
        assert resumed.run_id == first.run_id
        assert (resumed.actions, resumed.sources, resumed.decisions) == (whole.actions, whole.sources,
                                                                         whole.decisions)
        assert whole.actions["preserve"] and store.journal.preserved_pairs() == pairs
        assert store.journal.run(resumed.run_id).report["actions"] == whole.actions


def test_pairs_of_an_entry_a_run_removed_stay_with_its_history_and_undo_keeps_them_judged(tmp_path):
    with MemoryStore(tmp_path / "u.db") as store:
        store.add_many(distinct_facts(8))
        _judge_every_pair(store)
        judged = store.journal.preserved_pairs()
        assert len(judged) == 28
        evict = compressor(store, mode="strict", method=ScriptedMethod(policy="preserve")).run(budget=0.6)
        gone = [d.target for d in store.journal.decisions(evict.run_id)]
        assert gone and all(d.action == "evict" for d in store.journal.decisions(evict.run_id))
        # The evicted entries' pairs are kept with their undo history ...
        assert store.journal.preserved_pairs() == judged
        store.journal.undo(evict.run_id)
        # ... so the entries undo brings back are not judged again against the same entries.
        again = Recording()
        _judge_every_pair(store, again)
        assert again.seen == []


def test_purge_history_drops_the_pairs_of_entries_that_left_and_keeps_the_others(tmp_path):
    with MemoryStore(tmp_path / "p.db") as store:
        store.add_many(distinct_facts(10))
        _judge_every_pair(store)
        store.remove("f003")  # outside any run: no history keeps it
        evict = compressor(store, mode="strict", method=ScriptedMethod(policy="preserve")).run(budget=0.7)
        evicted = {d.target for d in store.journal.decisions(evict.run_id)}
        gone = evicted | {"f003"}
        assert len(gone) > 1
        # Until the purge every pair stays, the evicted entries' with them in the undo history (undo
        # may bring them back); f003's in `preserves`, as it left outside a run.
        rows = store._db.conn.execute("SELECT COUNT(*) FROM preserves").fetchone()[0]
        assert rows == (10 - len(evicted)) * (9 - len(evicted)) // 2
        assert len(store.journal.preserved_pairs()) == 9 * 8 // 2  # f003 is neither live nor kept
        store.journal.purge_history()
        live = store.ids()
        assert store.journal.preserved_pairs() == sorted((a, b) for a, b in itertools.combinations(sorted(live), 2))
        rows = store._db.conn.execute("SELECT COUNT(*) FROM preserves").fetchone()[0]
        assert rows == len(live) * (len(live) - 1) // 2
        assert not gone & set(live)


def test_an_id_added_again_is_a_new_entry_and_its_pairs_are_judged_again(tmp_path):
    with MemoryStore(tmp_path / "r.db") as store:
        store.add_many(distinct_facts(6))
        _judge_every_pair(store)
        store.remove("f001")
        store.add(Entry(id="f001", content="Ana moved to Perth and runs a chess club there."))
        again = Recording()
        _judge_every_pair(store, again)
        assert sorted(again.seen, key=sorted) == sorted((frozenset(("f001", other)) for other in
                                                         ("f000", "f002", "f003", "f004", "f005")), key=sorted)
        assert store.journal.is_preserved("f002", "f001") and store.journal.is_preserved("f002", "f003")
        assert not store.journal.is_preserved("f001", "nope")


def test_the_pairs_of_a_removed_entry_go_with_it_into_the_undo_history_and_come_back_with_undo(tmp_path):
    with MemoryStore(tmp_path / "facts.db") as store:
        store.add_many(distinct_facts(30))
        store.ensure_embeddings(HashEncoder())
        _judge_every_pair(store)
        judged = store.journal.preserved_pairs()
        conn = store._db.conn
        rows = conn.execute("SELECT COUNT(*) FROM preserves").fetchone()[0]
        assert rows == len(judged) == 30 * 29 // 2
        evict = Compressor(store, encoder=HashEncoder(), method=MemRefineMethod(judge=AlwaysJudge(KEEP)),
                           merger=FakeMerger()).run(budget=0.66)
        assert evict.actions.get("evict") and all(d.action == "evict" for d in store.journal.decisions(evict.run_id))
        # Only pairs of two live entries stay rows of `preserves`; those of the removed entries went
        # with them into the undo history, still listed as judged.
        live = {store.seq_of(e.id) for e in store.entries()}
        assert all(a in live and b in live for a, b in conn.execute("SELECT a, b FROM preserves"))
        assert conn.execute("SELECT COUNT(*) FROM preserves").fetchone()[0] < rows
        assert store.journal.preserved_pairs() == judged
        # Undo brings the entries back with every pair judged of them: none is proposed again.
        store.journal.undo(evict.run_id)
        assert conn.execute("SELECT COUNT(*) FROM preserves").fetchone()[0] == rows
        assert store.journal.preserved_pairs() == judged
        again = _judge_every_pair(store)
        assert again.decisions == 0
        # purge-history drops the pairs kept with the history it drops.
        Compressor(store, encoder=HashEncoder(), method=MemRefineMethod(judge=AlwaysJudge(KEEP)),
                   merger=FakeMerger()).run(budget=0.66)
        store.journal.purge_history()
        names = {e.id for e in store.entries()}
        assert store.journal.preserved_pairs() == [(a, b) for a, b in judged if a in names and b in names]
