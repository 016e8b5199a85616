"""Merged entries get ids no other entry has or had, whatever ids users reuse or write.

The id of a merged entry starts from a hash of the pair's ids; when that id is
live or named anywhere in the store's audit log (an entry a run removed or
created), a deterministic successor is taken, so a run never fails on an id a
user chose and a resumed run gives the ids an uninterrupted one gives.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner

from memrefine_edge.cli import cli
from memrefine_edge.core import ConfigurationError, Decision, Entry
from memrefine_edge.engine import Compressor, Upkeep
from memrefine_edge.judging import merged_entry_id
from memrefine_edge.methods import Method, PairContext
from memrefine_edge.store import MemoryStore
from memrefine_edge.testing import FakeBackends, HashEncoder
from tests.support.fakes import ConcatMerger, UnsetMerger
from tests.support.stores import compressor


class MergeNotes(Method):
    """Merges every pair of ``note:`` entries, preserves every other pair."""

    name = "merge-notes"

    def decide(self, pair: PairContext) -> Decision:
        if pair.a.id.startswith("note:") and pair.b.id.startswith("note:"):
            return Decision("merge", None, merge_instruction="keep both", reason="notes", source="llm")
        return Decision("preserve", None, reason="not notes", source="rule")


FIRST = [
    Entry(id="note:evan", content="Evan adopted a grey cat named Pixel in Lisbon in May."),
    Entry(id="note:sam", content="Sam adopted a grey cat named Pixel in Lisbon in May too."),
    Entry(id="other:1", content="Ben bought a red kayak in Oslo for 450 euros."),
    Entry(id="other:2", content="Mia plays the cello every Sunday with her sister."),
]
SECOND = [
    Entry(id="note:evan", content="Evan started a pottery class on Tuesday evenings at the community hall."),
    Entry(id="note:sam", content="Sam started a pottery class on Tuesday evenings at the community hall too."),
]


def merge_notes(store: MemoryStore, **kw):
    return compressor(store, MergeNotes(), **kw).run(budget_bytes=store.json_bytes() - 1)


def merged_ids(store: MemoryStore) -> list[str]:
    return [c for d in store.journal.decisions() for c in d.created_ids]


def test_reused_ids_merge_again_under_a_new_id(tmp_path):
    with MemoryStore(tmp_path / "s.db") as store:
        store.add_many(FIRST)
        first = merge_notes(store)
        assert first.actions.get("merge") == 1 and first.budget_met
        [old] = merged_ids(store)
        kept = store.get(old)
        store.add_many(SECOND)  # the originals are gone: their ids are free again
        second = merge_notes(store)
        assert second.actions["merge"] == 1 and second.budget_met
        [_, new] = merged_ids(store)
        assert new != old and new.startswith("m-")
        assert store.get(old) == kept  # the first merge is untouched
        assert "pottery" in store.get(new).content and store.get(new).metadata["merged_from"] == ["note:evan",
                                                                                                  "note:sam"]


def test_an_id_a_user_wrote_never_blocks_a_run(tmp_path):
    squatted = merged_entry_id("note:evan", "note:sam")
    with MemoryStore(tmp_path / "s.db") as store:
        store.add_many([*FIRST, Entry(id=squatted, content="A user's own memory under that id.")])
        report = merge_notes(store)
        assert report.actions["merge"] == 1 and report.budget_met
        [made] = merged_ids(store)
        assert made != squatted and store.get(squatted).content == "A user's own memory under that id."
        assert "Pixel" in store.get(made).content


class DeleteMerged(Method):
    """Deletes the merged entry of any pair that holds one, preserves every other pair."""

    name = "delete-merged"

    def decide(self, pair: PairContext) -> Decision:
        for side, entry in (("a", pair.a), ("b", pair.b)):
            if entry.id.startswith("m-"):
                return Decision("delete", side, reason="merged", source="rule")  # type: ignore[arg-type]
        return Decision("preserve", None, reason="not merged", source="rule")


def test_a_merged_id_is_never_one_the_undo_history_holds(tmp_path):
    """An id a run removed stays in the history (undo puts it back): a later merge never takes it."""
    with MemoryStore(tmp_path / "s.db") as store:
        store.add_many(FIRST)
        merge_notes(store)
        [m1] = merged_ids(store)
        text = store.get(m1).content
        store.add(Entry(id="copy", content=text))
        second = compressor(store, DeleteMerged()).run(budget_bytes=store.json_bytes() - 1)
        assert m1 not in store and second.actions["delete"] == 1
        store.add_many(SECOND)
        third = merge_notes(store)
        [m3] = [m for m in merged_ids(store) if m != m1]
        assert m3 != m1 and m3 in store
        store.journal.undo(third.run_id)
        store.journal.undo(second.run_id)
        assert store.get(m1).content == text and m3 not in store


class _SquattingEncoder(HashEncoder):
    """Embeds a merged entry's text only after another writer has added an entry under the id the run chose."""

    def __init__(self, db: Path) -> None:
        super().__init__()
        self.db, self.squatted = db, False

    def embed_batch(self, texts):
        if not self.squatted and any("Pixel" in t and "too" in t and "Evan" in t for t in texts):
            self.squatted = True
            with MemoryStore(self.db, create=False) as other:  # another connection, as another process
                other.add(Entry(id=merged_entry_id("note:evan", "note:sam"), content="written meanwhile"))
        return super().embed_batch(texts)


def test_an_id_another_writer_takes_while_the_merge_is_embedded_does_not_fail_the_run(tmp_path):
    db = tmp_path / "s.db"
    with MemoryStore(db) as store:
        store.add_many(FIRST)
        comp = Compressor(store, encoder=_SquattingEncoder(db), method=MergeNotes(), merger=ConcatMerger(),
                          commit_window_s=0)
        report = comp.run(budget_bytes=store.json_bytes() - 1)
        assert comp.encoder.squatted and report.actions["merge"] == 1
        [made] = merged_ids(store)
        assert made != merged_entry_id("note:evan", "note:sam") and "Pixel" in store.get(made).content
        assert store.get(merged_entry_id("note:evan", "note:sam")).content == "written meanwhile"


def test_a_resumed_run_takes_the_ids_an_uninterrupted_run_takes(tmp_path):
    with MemoryStore(tmp_path / "a.db") as store:
        store.add_many([*FIRST, Entry(id=merged_entry_id("note:evan", "note:sam"), content="squatter")])
        merge_notes(store)
        store.add_many(SECOND)
    shutil.copy(tmp_path / "a.db", tmp_path / "b.db")
    with MemoryStore(tmp_path / "a.db", create=False) as whole:
        merge_notes(whole)
        expected = [e.counted_fields() for e in whole.entries()]
    with MemoryStore(tmp_path / "b.db", create=False) as store:
        target = store.json_bytes() - 1

        def crash() -> None:
            raise KeyboardInterrupt  # killed inside the merge: the decision never reached the store

        crashing = Compressor(store, encoder=HashEncoder(), method=MergeNotes(), merger=ConcatMerger(on_merge=crash))
        with pytest.raises(KeyboardInterrupt):
            crashing.run(budget_bytes=target)
        assert store.journal.unfinished_run() is not None
        compressor(store, MergeNotes()).run(budget_bytes=target, resume=True)
        assert [e.counted_fields() for e in store.entries()] == expected


def test_undo_of_a_run_that_merged_reused_ids_restores_them(tmp_path):
    with MemoryStore(tmp_path / "s.db") as store:
        store.add_many(FIRST)
        merge_notes(store)
        store.add_many(SECOND)
        before = [e.counted_fields() for e in store.entries()]
        second = merge_notes(store)
        store.journal.undo(second.run_id)
        assert [e.counted_fields() for e in store.entries()] == before


# --- through the command line ------------------------------------------------------------


def _cli(*args: str):
    backends = FakeBackends(encoder=HashEncoder(), method=MergeNotes(), merger=ConcatMerger())
    return CliRunner().invoke(cli, list(args), obj=backends)


def _jsonl(path: Path, entries: list[Entry]) -> Path:
    path.write_text("".join(json.dumps({"id": e.id, "content": e.content}) + "\n" for e in entries))
    return path


def test_compress_after_reimporting_the_same_ids_through_the_cli(tmp_path):
    db = str(tmp_path / "s.db")
    assert _cli("import", "--format", "jsonl", str(_jsonl(tmp_path / "a.jsonl", FIRST)), "--db", db).exit_code == 0
    with MemoryStore(Path(db), create=False) as store:
        target = store.json_bytes() - 1
    first = _cli("compress", "--db", db, "--budget-bytes", str(target), "--json")
    assert first.exit_code == 0, first.output
    again = _cli("import", "--format", "jsonl", str(_jsonl(tmp_path / "b.jsonl", SECOND)), "--db", db)
    assert again.exit_code == 0, again.output
    with MemoryStore(Path(db), create=False) as store:
        target = store.json_bytes() - 1
    second = _cli("compress", "--db", db, "--budget-bytes", str(target), "--json")
    assert second.exit_code == 0, second.output
    report = json.loads(second.stdout)
    assert report["actions"]["merge"] == 1 and report["budget_met"]
    with MemoryStore(Path(db), create=False) as store:
        made = merged_ids(store)
        assert len(made) == 2 and len(set(made)) == 2 and all(m in store for m in made)
        assert store.journal.unfinished_run() is None


# --- upkeep ------------------------------------------------------------------------------


def test_upkeep_merges_reused_ids_and_every_add_succeeds(tmp_path):
    with MemoryStore(tmp_path / "s.db") as store:
        store.add_many(FIRST)
        merge_notes(store)
        high = store.json_bytes() + 10
        upkeep = Upkeep(compressor(store, MergeNotes()), high_bytes=high, low_bytes=high - 20).install()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            store.add(SECOND[0])
            assert upkeep.wait_idle()
            store.add(SECOND[1])  # over the watermark: the pass merges the two notes
            assert upkeep.wait_idle()
            store.add(Entry(id="other:3", content="Lena repaired her blue bicycle."))
            assert upkeep.wait_idle()
        assert [r.actions.get("merge", 0) for r in upkeep.reports].count(1) == 1
        assert "other:3" in store and len(set(merged_ids(store))) == 2


class _NoMerger(Method):
    """Decides to merge every pair, for a compressor whose merger is not set up: the pass fails."""

    name = "merge-all"

    def decide(self, pair: PairContext) -> Decision:
        return Decision("merge", None, merge_instruction="keep both", reason="all", source="llm")


def test_an_add_never_raises_after_its_entry_was_stored(tmp_path):
    with MemoryStore(tmp_path / "s.db") as store:
        store.add_many(FIRST)
        high = store.json_bytes()
        upkeep = Upkeep(Compressor(store, encoder=HashEncoder(), method=_NoMerger(), merger=UnsetMerger()),
                        high_bytes=high, low_bytes=high // 2).install()
        entry = Entry(id="late", content="A memory that takes the store over its watermark.")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            returned = store.add(entry)  # the pass fails: the add, committed, must not look failed
            assert upkeep.wait_idle()  # the worker's warnings are issued on the caller's thread
        assert returned.id == "late" and "late" in store
        assert isinstance(upkeep.error, ConfigurationError)
        assert [str(w.message) for w in caught if "upkeep" in str(w.message)], [str(w.message) for w in caught]
        with warnings.catch_warnings(record=True) as again:
            warnings.simplefilter("always")
            store.add(Entry(id="later", content="Another memory over the watermark."))
            assert upkeep.wait_idle()
        assert "later" in store and not [w for w in again if "upkeep" in str(w.message)]  # said once
