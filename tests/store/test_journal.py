"""The run journal: audit log, undo (exact restore) and purge of the history."""

from __future__ import annotations

import pytest

from memrefine_edge.core import Decision, Entry, MemRefineError
from memrefine_edge.engine import Compressor
from memrefine_edge.judging import MergedEntry, Merger
from memrefine_edge.store import MemoryStore
from memrefine_edge.store._journal import pack_field, unpack_text
from memrefine_edge.testing import HashEncoder
from tests.support.fakes import ConcatMerger
from tests.support.stores import OneShot, compressor, export, make_store


def test_every_change_is_audited_with_sizes_and_every_preserve_counted(tmp_path):
    with make_store(tmp_path / "a.db") as store:
        report = compressor(store).run(budget=0.5)
        ds = store.journal.decisions(report.run_id)
        preserved = store.journal.preserve_counts(report.run_id)
        assert ds and preserved and len(ds) + sum(preserved.values()) == report.decisions
        assert report.actions["preserve"] == sum(preserved.values())
        # Steps number every decision: the audited ones in order, with the preserves' steps between them.
        steps = [d.step for d in ds]
        assert steps == sorted(set(steps)) and steps[-1] < store.journal.run(report.run_id).cursor == report.decisions
        for d in ds:
            assert d.a_id and d.action in {"delete", "merge"} and d.source
            assert d.size_after <= d.size_before or d.action == "merge"
        assert ds[-1].size_after == store.json_bytes()
        assert store.journal.run(report.run_id).status == "done"
        assert sum(report.actions.values()) == report.decisions


def test_undo_restores_the_store_exactly(tmp_path):
    with make_store(tmp_path / "u.db") as store:
        before = export(store)
        embeddings_before = None
        r1 = compressor(store).run(budget=0.6)
        _, embeddings_before = store.embeddings()
        r2 = compressor(store, mode="strict").run(budget=0.5)
        assert export(store) != before
        with pytest.raises(MemRefineError, match="undo it first"):
            store.journal.undo(r1.run_id)
        store.journal.undo(r2.run_id)
        store.journal.undo(r1.run_id)
        assert export(store) == before
        assert store.journal.preserved_pairs() == []
        assert store.stats().history_entries == 0
        with pytest.raises(MemRefineError, match="already undone"):
            store.journal.undo(r1.run_id)


def test_purge_history_makes_runs_final(tmp_path):
    with make_store(tmp_path / "p.db") as store:
        r = compressor(store).run(budget=0.5)
        assert store.stats().history_entries > 0
        assert store.journal.purge_history() > 0
        assert store.stats().history_entries == 0
        with pytest.raises(MemRefineError, match="purged"):
            store.journal.undo(r.run_id)


def _decide_once(store: MemoryStore, a: str, b: str, decision: Decision, merger=None) -> None:
    """Two entries, one decision applied (the budget is one byte under their size)."""
    store.add_many([Entry(id="a", content=a), Entry(id="b", content=b)])
    Compressor(store, encoder=HashEncoder(), method=OneShot(decision), merger=merger or ConcatMerger(), mode="paper").run(
        budget_bytes=store.json_bytes() - 1)


def _file_bytes(path) -> bytes:
    wal = path.with_name(path.name + "-wal")
    return path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")


def test_purged_text_is_gone_from_the_file_bytes(tmp_path):
    path = tmp_path / "secret.db"
    with MemoryStore(path) as store:
        # The judge's free text quotes the deleted entry, as an LLM's reason may.
        _decide_once(store, "the door code is zebra-7781-quokka, says Ana",
                     "the door code is zebra-7781-quokka, Ana said",
                     Decision(action="delete", target="b", reason="b repeats: Ana said it twice", source="llm"))
        assert "b" not in store
        # The undo history holds the deleted text (packed: pack_field) until the purge.
        removed = pack_field("the door code is zebra-7781-quokka, Ana said")
        removed_bytes = removed if isinstance(removed, bytes) else removed.encode()
        assert removed_bytes in _file_bytes(path)
        store.journal.purge_history()
        [d] = store.journal.decisions()
        assert (d.action, d.target, d.removed_ids, d.source) == ("delete", "b", ["b"], "llm")  # the audit stays
        assert d.reason == "" and d.merge_instruction == ""                                  # its free text goes
    data = _file_bytes(path)
    assert data.count(b"Ana said") == 0 and removed_bytes not in data  # the deleted entry's text
    assert data.count(b"says Ana") == 1          # the kept entry, once


def test_purge_scrubs_merge_instructions_and_keeps_an_interrupted_runs_history(tmp_path):
    with make_store(tmp_path / "i.db") as store:
        merge = Decision(action="merge", target=None, merge_instruction="keep the secret quokka", reason="q",
                         source="llm")
        done = compressor(store, OneShot(merge)).run(budget=0.8)
        waiting = compressor(store).run(budget=0.5, max_decisions=3)  # interrupted half way
        kept = store.journal.decisions(waiting.run_id)
        assert store.journal.purge_history() > 0
        assert all(d.merge_instruction == "" and d.reason == "" for d in store.journal.decisions(done.run_id))
        assert store.journal.decisions(waiting.run_id) == kept  # resuming needs them, untouched
        assert store.get_meta(f"purged:{done.run_id}") and not store.get_meta(f"purged:{waiting.run_id}")
        assert compressor(store).run(budget=0.5).run_id == waiting.run_id  # still resumable
        finished = export(store)
    with make_store(tmp_path / "ref.db") as ref:  # the same two runs, never purged
        compressor(ref, OneShot(merge)).run(budget=0.8)
        compressor(ref).run(budget=0.5)
        assert export(ref) == finished


class RewordingMerger(Merger):
    """Writes the merged entry in its own words, as an LLM merger does."""

    def merge(self, a: str, b: str, instruction: str) -> MergedEntry:
        return MergedEntry(content="Ana's door code: zebra-7781-quokka (she repeated it)")


def test_after_a_merge_and_purge_the_sources_wording_is_gone_from_the_file(tmp_path):
    path = tmp_path / "m.db"
    with MemoryStore(path) as store:
        merge = Decision(action="merge", target=None, merge_instruction="Ana whispered it", reason="Ana repeated",
                         source="llm")
        _decide_once(store, "Ana whispered: the door code is zebra-7781-quokka",
                     "Ana repeated that the code is zebra-7781-quokka", merge, RewordingMerger())
        assert [e.content for e in store.entries()] == ["Ana's door code: zebra-7781-quokka (she repeated it)"]
        sources = [pack_field(t) for t in ("Ana whispered: the door code is zebra-7781-quokka",
                                           "Ana repeated that the code is zebra-7781-quokka")]
        sources_bytes = [v if isinstance(v, bytes) else v.encode() for v in sources]
        assert all(v in _file_bytes(path) for v in sources_bytes)  # held for undo until the purge
        store.journal.purge_history()
    data = b"".join(f.read_bytes() for f in tmp_path.iterdir() if f.is_file())
    assert b"whispered" not in data and b"Ana repeated" not in data  # sources, reason, instruction
    assert not any(v in data for v in sources_bytes)
    assert data.count(b"zebra-7781") == 1                              # the merged entry, once


def test_undo_refuses_when_a_removed_id_was_added_again(tmp_path):
    from memrefine_edge.core import UndoConflictError

    with make_store(tmp_path / "c.db") as store:
        before = export(store)
        run = compressor(store).run(budget=0.5)
        gone = sorted(set(e["id"] for e in before) - set(store.ids()))
        assert gone
        store.add(Entry(id=gone[0], content="A new note the app wrote under a reused id."))
        after = export(store)
        with pytest.raises(UndoConflictError, match=f"{gone[0]}.*Nothing was changed"):
            store.journal.undo(run.run_id)
        assert export(store) == after and store.journal.run(run.run_id).status == "done"
        store.remove(gone[0])
        store.journal.undo(run.run_id)
        assert export(store) == before


def test_the_undo_history_keeps_no_embeddings_and_undone_entries_are_embedded_again(tmp_path):
    import sqlite3

    with make_store(tmp_path / "h.db") as store:
        before = export(store)
        run = compressor(store).run(budget=0.5)
        with sqlite3.connect(store.path) as conn:
            kept, blobs = conn.execute("SELECT COUNT(*), COUNT(embedding) FROM history").fetchone()
        conn.close()
        assert kept > 0 and blobs == 0  # recomputable, so not kept: 1,536 bytes saved per removed entry
        store.journal.undo(run.run_id)
        assert export(store) == before
        assert store.stats().embedded < len(store)  # the restored entries wait for their embedding
        assert store.ensure_embeddings(HashEncoder()) > 0 and store.stats().embedded == len(store)


@pytest.mark.parametrize("text", ["", "x", "scorer: preserve 0.97, merge 0.03, delete_a 0.00, delete_b 0.00",
                                  "guard: deleting A would lose 'Zoë', '2023'; kept", "ß" * 300])
def test_free_text_is_stored_packed_and_read_back_exactly(text):
    from memrefine_edge.store._journal import pack_text, unpack_text

    stored = pack_text(text)
    assert unpack_text(stored) == text
    assert stored is None if not text else len(stored if isinstance(stored, bytes) else text.encode()) <= len(
        text.encode())


def test_a_decision_of_the_audit_log_is_a_compact_row(tmp_path):
    reason = "scorer: delete_b 0.97, merge 0.03, delete_a 0.00, preserve 0.00"
    with make_store(tmp_path / "c.db") as store:
        report = compressor(store, OneShot(Decision(action="delete", target="b", reason=reason,
                                                    source="scorer"))).run(budget=0.5, max_decisions=20)
        ds = store.journal.decisions(report.run_id)
        assert len(ds) == 20 and all(d.reason == reason and d.action == "delete" for d in ds)
        used = store._db.conn.execute("SELECT SUM(pgsize - unused) FROM dbstat WHERE name = 'audit'").fetchone()[0]
        assert used / 20 < 70  # ids, action and source by number, the reason packed


def test_audit_rows_with_long_reasons_stay_on_their_pages(tmp_path):
    # A reason as long as an eviction's: the row must not spill into an overflow page of its own.
    reason = ("strict budget: most redundant left (nearest 3f2b9c1e-8d7a-4e55-9a0b-2c6d1e7f8a90 at cos 0.812), "
              "164 bytes, 3 of 7 specific words held nowhere else")
    with make_store(tmp_path / "c.db") as store:
        report = compressor(store, OneShot(Decision(action="delete", target="b", reason=reason,
                                                    source="scorer"))).run(budget=0.5, max_decisions=20)
        assert [d.reason for d in store.journal.decisions(report.run_id)] == [reason] * 20
        conn = store._db.conn
        overflow = conn.execute("SELECT COUNT(*) FROM dbstat WHERE name = 'audit' AND pagetype = 'overflow'")
        assert overflow.fetchone()[0] == 0
        pages = conn.execute("SELECT SUM(pgsize) FROM dbstat WHERE name = 'audit'").fetchone()[0]
        assert pages / 20 < 300  # whole pages, not only their used bytes


def test_a_preserve_writes_its_pair_of_entry_numbers_and_no_audit_row_and_no_string(tmp_path):
    reason = "scorer: preserve 0.97, merge 0.03, delete_a 0.00, delete_b 0.00"
    with make_store(tmp_path / "c.db") as store:
        conn = store._db.conn
        strings = conn.execute("SELECT COUNT(*) FROM strings").fetchone()[0]
        report = compressor(store, OneShot(Decision(action="preserve", target=None, reason=reason,
                                                    source="scorer"))).run(budget=0.5, max_decisions=40)
        assert store.journal.decisions(report.run_id) == []
        assert store.journal.preserve_counts(report.run_id) == {"scorer": 40} == store.journal.run(
            report.run_id).preserved
        assert store.journal.run(report.run_id).cursor == 40 and report.actions == {"preserve": 40}
        pairs = store.journal.preserved_pairs()
        assert len(pairs) == 40 and all(store.journal.is_preserved(b, a) for a, b in pairs)
        assert conn.execute("SELECT COUNT(*) FROM audit").fetchone()[0] == 0
        assert conn.execute("SELECT COUNT(*) FROM strings").fetchone()[0] <= strings + 1  # the run's method name
        rows = conn.execute("SELECT a, b FROM preserves").fetchall()
        assert all(a < b for a, b in rows)  # the two entries' insertion numbers
        assert {(a, b) for a, b in rows} == {tuple(sorted((store.seq_of(x), store.seq_of(y)))) for x, y in pairs}
        used = conn.execute("SELECT SUM(pgsize - unused) FROM dbstat WHERE name = 'preserves'").fetchone()[0]
        assert used / 40 < 16


def test_purge_keeps_every_change_and_the_preserved_pairs_of_live_entries(tmp_path):
    with make_store(tmp_path / "pp.db") as store:
        r = compressor(store).run(budget=0.5)
        before = store.journal.decisions(r.run_id)
        pairs = store.journal.preserved_pairs()
        assert pairs and {d.action for d in before} >= {"delete", "merge"} and r.actions["preserve"]
        store.journal.purge_history()
        after = store.journal.decisions(r.run_id)
        changes = [(d.step, d.action, d.a_id, d.b_id, d.target, d.removed_ids, d.created_ids, d.size_after)
                   for d in before]
        assert [(d.step, d.action, d.a_id, d.b_id, d.target, d.removed_ids, d.created_ids, d.size_after)
                for d in after] == changes
        # Pairs of live entries stay preserved (never proposed again); those naming an entry the run
        # removed went with its history; the run still counts its preserves.
        live = [(a, b) for a, b in pairs if a in store and b in store]
        assert store.journal.preserved_pairs() == live and len(live) < len(pairs)
        assert store.journal.run(r.run_id).report["actions"]["preserve"] == r.actions["preserve"]
        assert store.journal.preserve_counts(r.run_id) == {"llm": r.actions["preserve"]}


def test_live_preserved_pairs_streams_the_pairs_whose_two_entries_are_live(tmp_path):
    with make_store(tmp_path / "lp.db") as store:
        keep = Decision(action="preserve", target=None, reason="distinct", source="scorer")
        compressor(store, OneShot(keep)).run(budget=0.5, max_decisions=30)
        pairs = store.journal.preserved_pairs()
        for entry_id in sorted({a for a, _ in pairs})[:3]:
            store.remove(entry_id)
        live = [(a, b) for a, b in pairs if a in store and b in store]
        assert len(pairs) == 30 and 30 > len(live) > 3  # removals ended some preserved pairs, not all
        for chunk in (1, 2, 3, 4096):  # keyset pages, across page boundaries
            streamed = list(store.journal.live_preserved_pairs(chunk=chunk))
            assert sorted(streamed) == sorted(live) and len(set(streamed)) == len(streamed)
        # A removal between two pages: the pairs it ends are not yielded, and nothing fails.
        gen = store.journal.live_preserved_pairs(chunk=1)
        first = next(gen)
        gone = live[-1][1] if live[-1][1] not in first else live[-1][0]
        store.remove(gone)
        rest = list(gen)
        assert all(gone not in p for p in rest)


def test_the_undo_history_is_one_table_keyed_by_run_and_step_with_the_links_of_each_removal(tmp_path):
    import json
    import sqlite3

    with MemoryStore(tmp_path / "k.db") as store:
        store.add_many([Entry(id="x1", content="Ana has a cat named Tom.", links=("x2",)),
                        Entry(id="x2", content="Ana's cat is called Tom.", links=("x1",))])
        before = export(store)
        Compressor(store, encoder=HashEncoder(), method=OneShot(Decision("delete", "b", source="rule")),
                   merger=ConcatMerger(), mode="paper").run(budget_bytes=store.json_bytes() - 1)
        [d] = [d for d in store.journal.decisions() if d.action == "delete"]
        conn = sqlite3.connect(store.path)
        try:
            assert conn.execute("SELECT COUNT(*) FROM sqlite_master WHERE tbl_name = 'removals' AND type = 'index'"
                                ).fetchone()[0] == 0
            [(run_id, step, entry_id, links)] = conn.execute("SELECT run_id, step, id, links FROM history").fetchall()
        finally:
            conn.close()
        assert (run_id, step, entry_id) == (d.run_id, d.step, d.target)
        other = "x1" if entry_id == "x2" else "x2"
        assert json.loads(unpack_text(links)) == sorted([[None, other, 0], [other, None, 0]],
                                                        key=lambda x: x[0] or entry_id)
        store.journal.undo(d.run_id)
        assert export(store) == before


def test_the_undo_history_packs_the_fields_of_a_removed_entry_and_undo_restores_them_exactly(tmp_path):
    import sqlite3

    long_text = ("Maria: I'm really glad you asked! I went hiking with my family last weekend and it was "
                 "amazing, we saw a waterfall and had a picnic. Zoë brought her new camera.")
    with MemoryStore(tmp_path / "p.db") as store:
        store.add_many([
            Entry(id="p1", content=long_text, keywords=("hiking", "waterfall"),
                  timestamps=("1:56 pm on 8 May, 2023",),
                  metadata={"sample_id": "s-1", "session": 3, "speaker": "Maria"}, provenance=("D3:7",),
                  links=("p2",)),
            Entry(id="p2", content="Maria went hiking with her family and saw a waterfall.", links=("p1",)),
            Entry(id="p3", content="ok", links=("p1",)),
        ])
        before = export(store)
        Compressor(store, encoder=HashEncoder(), method=OneShot(Decision("delete", "a", source="rule")),
                   merger=ConcatMerger(), mode="paper").run(budget_bytes=store.json_bytes() - 1)
        [d] = [d for d in store.journal.decisions() if d.action == "delete"]
        conn = sqlite3.connect(store.path)
        try:
            row = conn.execute("SELECT content, keywords, timestamps, metadata, provenance, links FROM removals"
                               ).fetchone()
        finally:
            conn.close()
        # A long field is stored packed (shorter than its text); a short one stays text; each reads back.
        assert any(isinstance(v, bytes) for v in row)
        for value in row:
            if isinstance(value, bytes):
                assert len(value) < len(unpack_text(value).encode("utf-8"))
        contents = {"p1": long_text, "p2": "Maria went hiking with her family and saw a waterfall.", "p3": "ok"}
        assert unpack_text(row[0]) == contents[d.target]  # the removed entry's own text, unpacked exactly
        store.journal.undo(d.run_id)
        assert export(store) == before


def test_pack_field_round_trips_and_keeps_short_text_as_text():
    for text in ["", "[]", "ok", "Zoë: ünïcödé ✓ " * 20, '{"sample_id":"conv-1","session":2,"speaker":"A"}',
                 "I went to the park with my family last weekend and it was really wonderful."]:
        packed = pack_field(text)
        assert unpack_text(packed) == text
        assert isinstance(packed, str) or len(packed) < len(text.encode("utf-8"))
    assert pack_field("ok") == "ok"
    with pytest.raises(ValueError, match="unknown packed text tag"):
        unpack_text(b"\x7fxyz")


def test_live_preserved_pairs_after_an_insertion_number_name_a_later_entry(tmp_path):
    with make_store(tmp_path / "p.db") as store:
        compressor(store, OneShot(Decision(action="preserve", target=None, reason="", source="scorer"))).run(
            budget=0.5, max_decisions=30)
        every = sorted(tuple(sorted(p)) for p in store.journal.live_preserved_pairs())
        assert len(every) == 30
        cut = sorted(store.seq_of(i) for p in every for i in p)[len(every)]  # a seq in the middle
        later = sorted(tuple(sorted(p)) for p in store.journal.live_preserved_pairs(after_seq=cut, chunk=4))
        assert later == [p for p in every if max(store.seq_of(p[0]), store.seq_of(p[1])) > cut]
        assert 0 < len(later) < len(every)


def test_an_evictions_reason_packs_small_and_texts_packed_with_the_first_dictionary_still_read():
    from memrefine_edge.store import _packing

    reason = ("strict budget: most redundant left (nearest conv-26:D14:33 at cos 0.912), 183 bytes, "
              "1 of 6 specific words held nowhere else")
    packed = _packing.pack_text(reason)
    assert isinstance(packed, bytes) and packed[:1] == b"\x03" and len(packed) < 40
    assert _packing.unpack_text(packed) == reason
    old = _packing._shorter(reason, _packing._PACKED_V1, _packing._TEXT_DICTIONARY)  # as stores before wrote it
    assert isinstance(old, bytes) and old[:1] == b"\x01" and _packing.unpack_text(old) == reason


@pytest.mark.parametrize("pairs", [[], [(1, 1)], [(7, 2), (3, 2), (900_000, 1), (12, 300), (4, 2)],
                                   [(i * 37 % 1000 + 1, i % 3) for i in range(200)]])
def test_judged_pairs_pack_to_a_few_bytes_each_and_read_back(pairs):
    from memrefine_edge.store._packing import pack_pairs, unpack_pairs

    packed = pack_pairs(pairs)
    assert sorted(unpack_pairs(packed), key=lambda p: (p[1], p[0])) == sorted(set(pairs), key=lambda p: (p[1], p[0]))
    assert len(packed) <= 4 * len(set(pairs)) + 4 * len({run for _, run in pairs})


@pytest.mark.parametrize("blob", [b"\x80", b"\x01", b"\x01\x03\x05"])
def test_judged_pairs_cut_short_are_an_error(blob):
    from memrefine_edge.store._packing import unpack_pairs

    with pytest.raises(ValueError):
        unpack_pairs(blob)
