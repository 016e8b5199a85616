"""The store's record of use: which entries searches returned, how often and when last."""

from __future__ import annotations

from memrefine_edge.core import Decision, Entry
from memrefine_edge.store import MemoryStore
from memrefine_edge.testing import HashEncoder
from tests.support.stores import OneShot, compressor

FACTS = ["Ana took up kayaking in Lisbon in 1990.", "Ben met a chess teacher in Oslo in 2004.",
         "Caro has sailed around Perth since 1999.", "Dev bakes sourdough every Sunday morning."]


def _store(path) -> MemoryStore:
    store = MemoryStore(path)
    store.add_many([Entry(id=f"e{i}", content=text) for i, text in enumerate(FACTS)])
    return store


def test_a_search_counts_a_use_of_each_entry_it_returns_and_the_next_write_keeps_them(tmp_path):
    enc = HashEncoder()
    with _store(tmp_path / "u.db") as store:
        hits = [e.id for e, _ in store.search("kayaking in Lisbon", k=2, encoder=enc)]
        store.search("kayaking in Lisbon", k=1, encoder=enc)
        uses = store.uses()
        assert set(uses) == set(hits) and uses[hits[0]][0] == 2 and uses[hits[1]][0] == 1
        # not written yet: a search commits nothing of its own
        assert store._db.conn.execute("SELECT COUNT(*) FROM uses").fetchone()[0] == 0
        store.add(Entry(id="e9", content="Eli plays the violin in Cork."))  # the next write carries them
        assert store._db.conn.execute("SELECT COUNT(*) FROM uses").fetchone()[0] == 2
        assert store.uses() == uses and store.uses([hits[1]]) == {hits[1]: uses[hits[1]]}
    with MemoryStore(tmp_path / "u.db") as again:
        assert again.uses() == uses


def test_uses_noted_last_are_written_when_the_store_closes(tmp_path):
    with _store(tmp_path / "u.db") as store:
        store.search("sourdough", k=3, encoder=HashEncoder())
        noted = store.uses()
    with MemoryStore(tmp_path / "u.db") as again:
        assert again.uses() == noted and sum(n for n, _ in noted.values()) == 3


def test_a_read_only_store_and_record_uses_false_note_nothing(tmp_path):
    _store(tmp_path / "u.db").close()
    with MemoryStore(tmp_path / "u.db", read_only=True) as ro:
        ro.search("chess", k=2, encoder=HashEncoder())
        assert ro.uses() == {}
    with MemoryStore(tmp_path / "u.db", record_uses=False) as off:
        off.search("chess", k=2, encoder=HashEncoder())
        assert off.uses() == {}
    with MemoryStore(tmp_path / "u.db") as store:
        assert store.uses() == {}


def test_a_merged_entry_starts_with_both_entries_uses_and_undo_brings_theirs_back(tmp_path):
    enc = HashEncoder()
    with _store(tmp_path / "u.db") as store:
        for i, text in enumerate(FACTS):  # every entry used, each a different number of times
            for _ in range(i + 1):
                store.search(text, k=1, encoder=enc)
        with store.atomic():  # any write transaction writes the uses noted
            pass
        before = store.uses()
        assert sorted(n for n, _ in before.values()) == [1, 2, 3, 4]
        report = compressor(store, OneShot(Decision(action="merge", target=None, reason="", source="scorer"))).run(
            budget=0.7, max_decisions=1)
        made = [d for d in store.journal.decisions(report.run_id) if d.action == "merge"][0]
        gone = set(made.removed_ids)
        merged = made.created_ids[0]
        expect = (sum(before[i][0] for i in gone), max(before[i][1] for i in gone))
        assert len(gone) == 2 and store.uses([merged]) == {merged: expect}
        assert not gone & set(store.uses())  # removed entries are not live
        store.journal.undo(report.run_id)
        assert store.uses() == before


def test_a_purge_drops_the_uses_of_entries_neither_live_nor_kept(tmp_path):
    enc = HashEncoder()
    with _store(tmp_path / "u.db") as store:
        for text in FACTS:
            store.search(text, k=1, encoder=enc)
        store.add(Entry(id="x", content="Fay climbs in Kyoto."))
        rows = store._db.conn.execute("SELECT COUNT(*) FROM uses").fetchone()[0]
        report = compressor(store, OneShot(Decision(action="delete", target="b", reason="", source="scorer"))).run(
            budget=0.6)
        assert store.journal.run(report.run_id).status == "done"
        gone = {i for d in store.journal.decisions(report.run_id) for i in d.removed_ids}
        assert gone and store._db.conn.execute("SELECT COUNT(*) FROM uses").fetchone()[0] == rows  # kept for undo
        store.journal.purge_history()
        left = store._db.conn.execute("SELECT COUNT(*) FROM uses").fetchone()[0]
        assert left == len(store.uses()) < rows


def test_many_noted_uses_are_written_without_waiting_for_a_write(tmp_path, monkeypatch):
    import memrefine_edge.store._uses as uses_module

    monkeypatch.setattr(uses_module, "FLUSH_AT", 3)
    with _store(tmp_path / "u.db") as store:
        store.search("anything", k=4, encoder=HashEncoder())
        assert store._db.conn.execute("SELECT COUNT(*) FROM uses").fetchone()[0] == 4


def test_uses_counted_elsewhere_add_to_the_record_and_bad_ones_write_nothing(tmp_path):
    import pytest

    from memrefine_edge.core import EntryNotFoundError, InvalidEntryError, StoreReadOnlyError

    with _store(tmp_path / "u.db") as store:
        assert store.add_uses({"e0": (3, 100), "e1": (0, 0)}) == 1  # a zero count counts nothing
        store.search(FACTS[0], k=1, encoder=HashEncoder())
        assert store.uses()["e0"][0] == 4 and "e1" not in store.uses()
        for bad, error in (({"e2": (-1, 0)}, InvalidEntryError), ({"e2": (1.5, 0)}, InvalidEntryError),
                           ({"e2": (1, 5), "nope": (1, 5)}, EntryNotFoundError)):
            with pytest.raises(error):
                store.add_uses(bad)
            assert "e2" not in store.uses()
    with MemoryStore(tmp_path / "u.db", read_only=True) as ro, pytest.raises(StoreReadOnlyError):
        ro.add_uses({"e2": (1, 5)})


def test_an_amem_import_starts_the_record_with_each_notes_retrievals(tmp_path):
    import json
    from datetime import UTC, datetime

    from memrefine_edge.store import import_file

    notes = [{"id": "n1", "content": "Ana took up kayaking in Lisbon.", "retrieval_count": 7,
              "last_accessed": "202403051230"},
             {"id": "n2", "content": "Ben met a chess teacher in Oslo.", "retrieval_count": 0},
             {"id": "n3", "content": "Caro has sailed around Perth.", "retrieval_count": 2,
              "last_accessed": "not a time"}]
    path = tmp_path / "amem.json"
    path.write_text(json.dumps(notes), encoding="utf-8")
    with MemoryStore(tmp_path / "a.db") as store:
        import_file(store, path, format="amem")
        when = int(datetime(2024, 3, 5, 12, 30, tzinfo=UTC).timestamp())
        assert store.uses() == {"n1": (7, when), "n3": (2, 0)}
        assert store.get("n1").metadata["retrieval_count"] == 7  # the note's own fields stay as they were
