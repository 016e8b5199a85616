"""The last-copy check: which words are specific, how the counts follow the store, and what a run does with it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from memrefine_edge.compressor import Compressor
from memrefine_edge.decision import Decision
from memrefine_edge.errors import OptionConflictError
from memrefine_edge.importers import export_jsonl
from memrefine_edge.lastcopy import LastCopies, common_words, content_keys, specific_keys
from memrefine_edge.merger import GuardedMerger
from memrefine_edge.methods import MemRefineMethod, PairContext
from memrefine_edge.pipeline import PipelineConfig, build
from memrefine_edge.store import Entry, MemoryStore
from memrefine_edge.testing import AlwaysJudge, FakeBackends, HashEncoder

REPO = Path(__file__).resolve().parents[1]

KAYAK = "Caroline: I went kayaking on the lake with my sister last summer."
KAYAK_TOO = "Caroline: Kayaking on the lake is my favourite way to relax."
LAKE = "Caroline: I went to the lake with my sister last summer."


# --- which keys are specific ------------------------------------------------------


def test_common_words_are_the_vocabulary_s_frequent_whole_words() -> None:
    words = common_words()
    assert {"the", "of", "whenever", "question", "guitar"} <= words
    assert not {"kayaking", "stoicism", "sheeran"} & words
    assert not any(w.startswith("##") or w.startswith("[") for w in words)


@pytest.mark.models
def test_the_committed_common_words_are_what_the_script_writes(tmp_path: Path) -> None:
    from memrefine_edge.backends.model_files import model_path
    from memrefine_edge.errors import ModelNotFoundError

    try:
        model_path("tokenizer")
    except ModelNotFoundError as exc:
        pytest.skip(f"model file missing: {exc}")
    out = tmp_path / "common_words.txt"
    subprocess.run([sys.executable, str(REPO / "scripts" / "make_common_words.py"), "--out", str(out)],
                   check=True, capture_output=True)
    assert out.read_text(encoding="utf-8") == (REPO / "memrefine_edge" / "data" / "common_words.txt").read_text(
        encoding="utf-8")


def test_specific_keys_are_names_numbers_dates_and_rare_stated_words() -> None:
    keys = specific_keys("Caroline: I went kayaking with Melanie on 12 May 2023. It was great!")
    assert "kayak" in keys  # a rare word of a stated sentence (stemmed like the fact extractor's words)
    assert "melanie" in keys and any("2023" in k for k in keys)
    assert not {"went", "great", "lake"} & keys  # common words are never specific
    # A rare word asked about or in small talk is not a fact the entry states.
    assert "kayak" not in specific_keys("Melanie: Have you ever tried kayaking?")
    assert specific_keys("Thanks so much, that's awesome!") == frozenset()


def test_the_counts_follow_adds_and_removes_and_stay_small() -> None:
    copies = LastCopies()
    copies.build([KAYAK, LAKE])
    assert "kayak" in copies.last(KAYAK, LAKE)  # only KAYAK says it
    copies.add(KAYAK_TOO)
    assert copies.last(KAYAK, LAKE) == frozenset()  # now another entry holds it
    assert copies.last(KAYAK, KAYAK_TOO) == frozenset()  # and so does the kept entry itself
    copies.remove(KAYAK_TOO)
    assert "kayak" in copies.last(KAYAK, LAKE)
    for text in (KAYAK, LAKE):
        copies.remove(text)
    assert not copies.counts  # keys that reach zero are dropped, not kept at 0
    assert content_keys(KAYAK) >= {"kayak", "caroline"}


# --- what a compression does with it ----------------------------------------------


def _store(path: Path, texts: list[str]) -> MemoryStore:
    store = MemoryStore(path)
    store.add_many([Entry(id=f"e{i}", content=t, timestamps=(f"2024-01-0{i + 1}",)) for i, t in enumerate(texts)])
    return store


def _totals_equal_a_recount(store: MemoryStore) -> bool:
    return all(v["total"] == v["recount"] for v in store.recount().values())


def _run(store: MemoryStore, *, keep: bool, budget: float = 0.75) -> list:
    # A judge that deletes the later entry of every pair: only the check stands between it and the fact.
    method = MemRefineMethod(judge=AlwaysJudge(Decision("delete", "b", reason="test: delete b", source="scorer")),
                             keep_last_copies=keep)
    report = Compressor(store, encoder=HashEncoder(), method=method, merger=GuardedMerger(None), k=4).run(
        budget=budget)
    return store.journal.decisions(report.run_id)


def test_a_delete_of_the_last_copy_becomes_a_merge_that_keeps_the_word(tmp_path: Path) -> None:
    with _store(tmp_path / "s.db", [LAKE, KAYAK]) as store:
        decisions = _run(store, keep=True)
        assert [(d.action, d.source) for d in decisions] == [("merge", "guard")]
        assert "store's last copy of" in decisions[0].reason and "kayak" in decisions[0].reason
        (entry,) = list(store.entries())
        assert "kayaking" in entry.content and "sister" in entry.content
        assert _totals_equal_a_recount(store)


def test_without_the_check_the_same_delete_is_taken(tmp_path: Path) -> None:
    with _store(tmp_path / "s.db", [LAKE, KAYAK]) as store:
        decisions = _run(store, keep=False)
        assert [(d.action, d.target) for d in decisions] == [("delete", "e1")]
        assert [e.content for e in store.entries()] == [LAKE]
        assert _totals_equal_a_recount(store)


def test_a_delete_goes_through_when_another_entry_holds_the_word(tmp_path: Path) -> None:
    judge = AlwaysJudge(Decision("delete", "b", reason="test: delete b", source="scorer"))
    club = "Sam: My kayaking club meets on Fridays."
    for others, expected in (([], "merge"), ([club], "delete")):
        with _store(tmp_path / f"s{len(others)}.db", [LAKE, KAYAK, *others]) as store:
            method = MemRefineMethod(judge=judge)
            method.prepare(store)
            pair = PairContext(a=store.get("e0"), b=store.get("e1"), similarity=0.8, store=store)
            assert method.decide(pair).action == expected


def test_the_counts_follow_merges_within_a_run(tmp_path: Path) -> None:
    # After LAKE+KAYAK merge, the merged entry holds "kayaking": deleting KAYAK_TOO later loses nothing.
    with _store(tmp_path / "s.db", [LAKE, KAYAK, KAYAK_TOO]) as store:
        method = MemRefineMethod(judge=AlwaysJudge(Decision("delete", "b", reason="test", source="scorer")))
        method.prepare(store)
        copies = method.last_copies
        assert copies is not None and copies.counts["kayak"] == 2
        method.applied([store.get("e0"), store.get("e1")], Entry(id="m", content=LAKE + " " + KAYAK))
        assert copies.counts["kayak"] == 2  # e1's copy left, the merged entry's came in
        method.applied([store.get("e2")], None)
        assert copies.counts["kayak"] == 1


def test_an_interrupted_run_resumes_to_the_same_store(tmp_path: Path) -> None:
    texts = [LAKE, KAYAK, KAYAK_TOO, "Caroline: My sister and I love the lake.",
             "Melanie: I painted a sunrise over the lake.", "Melanie: Painting the lake at sunrise calms me."]

    def final(db: Path, max_decisions: int | None) -> str:
        with _store(db, texts) as store:
            method = MemRefineMethod(judge=AlwaysJudge(Decision("delete", "b", reason="t", source="scorer")))
            comp = Compressor(store, encoder=HashEncoder(), method=method, merger=GuardedMerger(None), k=4)
            if max_decisions:
                comp.run(budget=0.4, max_decisions=max_decisions)
                assert store.journal.unfinished_run() is not None  # the next run resumes it
                method = MemRefineMethod(judge=AlwaysJudge(Decision("delete", "b", reason="t", source="scorer")))
                comp = Compressor(store, encoder=HashEncoder(), method=method, merger=GuardedMerger(None), k=4)
            comp.run(budget=0.4)
            assert _totals_equal_a_recount(store)
            out = db.with_suffix(".jsonl")
            export_jsonl(store, out)
            return out.read_text()

    whole = final(tmp_path / "whole.db", None)
    assert final(tmp_path / "resumed.db", 1) == whole


def test_the_option_is_memrefine_s_and_recorded_with_the_run() -> None:
    parts = build(PipelineConfig(keep_last_copies=False), backends=FakeBackends())
    assert parts.method.describe()["keep_last_copies"] is False
    assert build(PipelineConfig(), backends=FakeBackends()).method.describe()["keep_last_copies"] is True
    with pytest.raises(OptionConflictError, match="--no-last-copy-check"):
        build(PipelineConfig(method="rulesim", keep_last_copies=False), backends=FakeBackends())


def test_contents_reads_every_live_entry_a_page_at_a_time(tmp_path: Path) -> None:
    texts = [f"entry number {i}" for i in range(7)]
    with _store(tmp_path / "s.db", texts) as store:
        store.remove("e3")
        assert _totals_equal_a_recount(store)
        assert list(store.contents(page_rows=2)) == [t for i, t in enumerate(texts) if i != 3]
