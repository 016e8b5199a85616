"""The last-copy check: which words are specific, how the counts follow the store, and what a run does with it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memrefine_edge.core import CompressionReport, Decision, Entry, OptionConflictError
from memrefine_edge.engine import Compressor, PipelineConfig, build
from memrefine_edge.judging import GuardedMerger, Judge
from memrefine_edge.methods import PairContext
from memrefine_edge.methods._memrefine import MemRefineMethod
from memrefine_edge.store import MemoryStore, export_jsonl
from memrefine_edge.testing import AlwaysJudge, FakeBackends, HashEncoder, ScriptedJudge
from memrefine_edge.text import LastCopies, specific_keys
from memrefine_edge.text._lastcopy import common_words, content_keys

REPO = Path(__file__).resolve().parents[2]

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
    from memrefine_edge.backends import model_path
    from memrefine_edge.core import ModelNotFoundError

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


DELETE_B = Decision("delete", "b", reason="test: delete b", source="scorer")
PAINTED = "Melanie: I painted a sunrise over the water at dawn today."
PAINTED_SHORT = "Melanie: I painted a sunrise."  # every word of it is in PAINTED: its delete takes no last copy


def _compress(store: MemoryStore, method: MemRefineMethod, **run: Any) -> CompressionReport:
    return Compressor(store, encoder=HashEncoder(), method=method, merger=GuardedMerger(None), k=4, mode="paper").run(**run)


def _run(store: MemoryStore, *, keep: bool, budget: float = 0.75) -> list:
    # A judge that deletes the later entry of every pair: only the check stands between it and the fact.
    report = _compress(store, MemRefineMethod(judge=AlwaysJudge(DELETE_B), keep_last_copies=keep), budget=budget)
    return store.journal.decisions(report.run_id)


def test_a_delete_of_the_last_copy_becomes_a_merge_that_keeps_the_word_by_default(tmp_path: Path) -> None:
    with _store(tmp_path / "s.db", [LAKE, KAYAK]) as store:
        decisions = _run(store, keep=True)
        assert [(d.action, d.source) for d in decisions] == [("merge", "guard")]
        assert decisions[0].reason == "test: delete b; but entry B holds the store's last copy of kayak: merged instead"
        (entry,) = list(store.entries())
        assert "kayaking" in entry.content and "sister" in entry.content
        assert store.journal.deferrals() == []
        assert _totals_equal_a_recount(store)


def test_a_delete_of_the_last_copy_is_deferred_as_a_preserve(tmp_path: Path) -> None:
    with _store(tmp_path / "s.db", [LAKE, KAYAK]) as store:
        method = MemRefineMethod(judge=AlwaysJudge(DELETE_B), defer_last_copies=True)
        method.prepare(store)
        pair = PairContext(a=store.get("e0"), b=store.get("e1"), similarity=0.8, store=store)
        decision = method.decide(pair)
        assert (decision.action, decision.target, decision.source) == ("preserve", None, "deferred")
        assert decision.reason == "test: delete b; entry B holds the store's last copy of kayak: deferred"
        # Asked again (the budget needs the bytes): the judge's delete, without the check.
        taken = method.deferred(pair)
        assert taken is not None and (taken.action, taken.target, taken.source) == ("delete", "b", "guard")
        assert taken.reason == ("test: delete b; the budget needed the bytes: deferred delete taken, "
                                "entry B held the store's last copy of kayak")


def test_a_deferred_delete_is_taken_only_when_the_budget_needs_it(tmp_path: Path) -> None:
    with _store(tmp_path / "s.db", [LAKE, KAYAK]) as store:  # nothing else to delete: the budget needs it
        method = MemRefineMethod(judge=AlwaysJudge(DELETE_B), defer_last_copies=True)
        report = _compress(store, method, budget=0.75)
        decisions = store.journal.decisions(report.run_id)
        assert [(d.action, d.source, d.a_id, d.b_id) for d in decisions] == [
            ("preserve", "deferred", "e0", "e1"), ("delete", "guard", "e0", "e1")]
        assert decisions[1].target == "e1" and "the budget needed the bytes" in decisions[1].reason
        assert [e.content for e in store.entries()] == [LAKE]
        assert report.budget_met and report.stop_reason == "budget met by deferred deletes"
        assert report.deferred_taken == 1 and report.sources == {"deferred": 1, "guard": 1}
        assert method.last_copies is not None and "kayak" not in method.last_copies.counts
        assert _totals_equal_a_recount(store)
        store.journal.undo(report.run_id)  # a taken deferred delete is undone like any other
        assert [e.content for e in store.entries()] == [LAKE, KAYAK] and store.journal.preserved_pairs() == []
        assert _totals_equal_a_recount(store)
    # Another delete that takes no last copy meets the budget: the deferred one is never taken.
    with _store(tmp_path / "t.db", [LAKE, KAYAK, PAINTED, PAINTED_SHORT]) as store:
        report = _compress(store, MemRefineMethod(judge=AlwaysJudge(DELETE_B), defer_last_copies=True), budget_bytes=store.json_bytes() - 1)
        decisions = store.journal.decisions(report.run_id)
        assert [(d.action, d.source, d.a_id, d.b_id) for d in decisions] == [
            ("preserve", "deferred", "e0", "e1"), ("delete", "scorer", "e2", "e3")]
        assert "e1" in store and report.stop_reason == "budget met" and report.deferred_taken == 0
        assert _totals_equal_a_recount(store)


def test_a_deferred_delete_the_judge_no_longer_makes_is_left_alone(tmp_path: Path) -> None:
    keep = Decision("preserve", None, reason="test: keep", source="scorer")
    with _store(tmp_path / "s.db", [LAKE, KAYAK]) as store:
        judge = ScriptedJudge([DELETE_B], default=keep)
        report = _compress(store, MemRefineMethod(judge=judge, defer_last_copies=True), budget=0.75)
        assert len(judge.calls) == 2  # asked again when the candidates ran out, and it kept both
        assert [(d.action, d.source) for d in store.journal.decisions(report.run_id)] == [("preserve", "deferred")]
        assert not report.budget_met and report.stop_reason == "no candidate pair left" and len(store) == 2
        assert _totals_equal_a_recount(store)


class _OnlyKayak(Judge):
    """Deletes KAYAK from the pair (LAKE, KAYAK); keeps every other pair."""

    def decide(self, a: str, b: str, similarity: float) -> Decision:
        if (a, b) == (LAKE, KAYAK):
            return DELETE_B
        return Decision("preserve", None, reason="test: keep", source="scorer")


def test_a_later_run_takes_what_an_earlier_run_deferred(tmp_path: Path) -> None:
    with _store(tmp_path / "s.db", [LAKE, KAYAK, PAINTED, PAINTED_SHORT]) as store:
        # The first run meets its budget with the other delete: the kayak delete waits.
        first = _compress(store, MemRefineMethod(judge=AlwaysJudge(DELETE_B), defer_last_copies=True), budget_bytes=store.json_bytes() - 1)
        assert first.deferred_taken == 0 and "e1" in store
        assert store.journal.deferrals() == store.journal.deferrals(live=True) == [
            ("e0", "e1", pytest.approx(store.journal.decisions(first.run_id)[0].similarity))]
        # The next run's candidates run out above its budget: it takes the earlier run's deferred delete.
        second = _compress(store, MemRefineMethod(judge=AlwaysJudge(DELETE_B), defer_last_copies=True), budget_bytes=store.json_bytes() - 1)
        *pairs, taken = store.journal.decisions(second.run_id)
        assert pairs and all(d.source == "deferred" for d in pairs)  # its own deletes of e2 wait too
        # The earliest deferral comes first: the first run's.
        assert (taken.action, taken.source, taken.a_id, taken.b_id, taken.target) == ("delete", "guard", "e0", "e1",
                                                                                      "e1")
        assert second.deferred_taken == 1 and second.stop_reason == "budget met by deferred deletes"
        assert ("e0", "e1") not in [d[:2] for d in store.journal.deferrals(live=True)]
        assert len(store.journal.deferrals()) == 1 + len(pairs)
        assert _totals_equal_a_recount(store)
        # Undoing the run that took it makes it a delete to take again; undoing the one that deferred it
        # forgets the deferral (and the preserved pair) with the rest of that run.
        store.journal.undo(second.run_id)
        assert [d[:2] for d in store.journal.deferrals(live=True)] == [("e0", "e1")]
        store.journal.undo(first.run_id)
        assert store.journal.deferrals() == [] and store.journal.preserved_pairs() == []
        assert _totals_equal_a_recount(store)


def test_deferrals_outlive_a_purge_and_a_run_without_the_check_takes_them(tmp_path: Path) -> None:
    with _store(tmp_path / "s.db", [LAKE, KAYAK, PAINTED, PAINTED_SHORT]) as store:
        _compress(store, MemRefineMethod(judge=AlwaysJudge(DELETE_B), defer_last_copies=True), budget_bytes=store.json_bytes() - 1)
        store.journal.purge_history()  # the deferred delete's reason goes; the deferral stays, as the preserved pair
        assert [d[:2] for d in store.journal.deferrals(live=True)] == [("e0", "e1")]
        # Now a judge that keeps every pair but the kayak one, without the check: only the deferral can help.
        report = _compress(store, MemRefineMethod(judge=_OnlyKayak(), keep_last_copies=False),
                           budget_bytes=store.json_bytes() - 1)
        [taken] = store.journal.decisions(report.run_id)  # the preserves are counted, not audited
        assert store.journal.preserve_counts(report.run_id)["scorer"] > 0
        assert (taken.action, taken.target, taken.source) == ("delete", "e1", "guard")
        assert "last-copy check off" in taken.reason and report.deferred_taken == 1
        assert [e.content for e in store.entries()] == [LAKE, PAINTED]
        assert _totals_equal_a_recount(store)


def test_without_the_check_the_same_delete_is_taken(tmp_path: Path) -> None:
    with _store(tmp_path / "s.db", [LAKE, KAYAK]) as store:
        decisions = _run(store, keep=False)
        assert [(d.action, d.target, d.source) for d in decisions] == [("delete", "e1", "scorer")]
        assert [e.content for e in store.entries()] == [LAKE]
        assert _totals_equal_a_recount(store)
        assert store.journal.deferrals() == []  # nothing was deferred


def test_a_delete_goes_through_when_another_entry_holds_the_word(tmp_path: Path) -> None:
    club = "Sam: My kayaking club meets on Fridays."
    for others, expected in (([], ("preserve", "deferred")), ([club], ("delete", "scorer"))):
        with _store(tmp_path / f"s{len(others)}.db", [LAKE, KAYAK, *others]) as store:
            method = MemRefineMethod(judge=AlwaysJudge(DELETE_B), defer_last_copies=True)
            method.prepare(store)
            pair = PairContext(a=store.get("e0"), b=store.get("e1"), similarity=0.8, store=store)
            decision = method.decide(pair)
            assert (decision.action, decision.source) == expected


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


class _CrashingJudge(AlwaysJudge):
    """Deletes b; the Ctrl-C of a user comes during call number ``crash_at`` (None: never)."""

    def __init__(self, crash_at: int | None) -> None:
        super().__init__(Decision("delete", "b", reason="t", source="scorer"))
        self.crash_at, self.calls = crash_at, 0

    def decide(self, a: str, b: str, similarity: float) -> Decision:
        self.calls += 1
        if self.calls == self.crash_at:
            raise KeyboardInterrupt
        return super().decide(a, b, similarity)


@pytest.mark.parametrize("mode", ["paper", "strict"])
@pytest.mark.parametrize("cut", ["max_decisions=1", "max_decisions=4", "max_decisions=7", "crash in the phase"])
def test_an_interrupted_run_resumes_to_the_same_store(tmp_path: Path, mode: str, cut: str) -> None:
    # The whole run: 7 decisions (4 deferred), then the deferred phase takes one delete that meets the budget.
    texts = [LAKE, KAYAK, KAYAK_TOO, "Caroline: My sister and I love the lake.",
             "Melanie: I painted a sunrise over the lake.", "Melanie: Painting the lake at sunrise calms me."]

    def final(db: Path, cut: str | None) -> tuple[str, list, str]:
        with _store(db, texts) as store:
            def compress(crash_at: int | None = None, **run: Any) -> CompressionReport:
                method = MemRefineMethod(judge=_CrashingJudge(crash_at), defer_last_copies=True)
                return Compressor(store, encoder=HashEncoder(), method=method, merger=GuardedMerger(None), k=4,
                                  mode=mode).run(budget=0.4, **run)

            if cut == "crash in the phase":  # while the judge is asked again about the first deferred pair
                with pytest.raises(KeyboardInterrupt):
                    compress(crash_at=8)
                assert len(store.journal.decisions()) == 7
            elif cut:  # stopped in the loop (1, 4) or just before the deferred phase (7)
                compress(max_decisions=int(cut.split("=")[1]))
            if cut:
                assert store.journal.unfinished_run() is not None  # the next run resumes it
            report = compress()
            assert _totals_equal_a_recount(store)
            out = db.with_suffix(".jsonl")
            export_jsonl(store, out)
            decided = [(d.step, d.action, d.a_id, d.b_id, d.target, d.source, d.reason)
                       for d in store.journal.decisions()]
            return out.read_text(), decided, report.stop_reason

    whole = final(tmp_path / "whole.db", None)
    assert whole[2] == "budget met by deferred deletes" and len(whole[1]) == 8
    assert [d[5] for d in whole[1]].count("deferred") == 4 and whole[1][-1][5] == "guard"
    assert final(tmp_path / "resumed.db", cut) == whole


def test_the_option_is_memrefine_s_and_recorded_with_the_run() -> None:
    off, defer = {"keep_last_copies": False}, {"defer_last_copies": True}
    parts = build(PipelineConfig(method_options=off), backends=FakeBackends())
    assert parts.method.describe()["keep_last_copies"] is False
    assert build(PipelineConfig(), backends=FakeBackends()).method.describe()["keep_last_copies"] is True
    with pytest.raises(OptionConflictError, match="--no-last-copy-check"):
        build(PipelineConfig(method="rulesim", method_options=off), backends=FakeBackends())
    described = build(PipelineConfig(method_options=defer), backends=FakeBackends()).method.describe()
    assert described["defer_last_copies"] is True and described["keep_last_copies"] is True
    assert build(PipelineConfig(), backends=FakeBackends()).method.describe()["defer_last_copies"] is False
    with pytest.raises(OptionConflictError, match="--defer-last-copies"):
        build(PipelineConfig(method="rulepr", method_options=defer), backends=FakeBackends())
    with pytest.raises(OptionConflictError, match="--no-last-copy-check"):
        build(PipelineConfig(method_options={**off, **defer}), backends=FakeBackends())


def test_contents_reads_every_live_entry_a_page_at_a_time(tmp_path: Path) -> None:
    texts = [f"entry number {i}" for i in range(7)]
    with _store(tmp_path / "s.db", texts) as store:
        store.remove("e3")
        assert _totals_equal_a_recount(store)
        assert list(store.contents(page_rows=2)) == [t for i, t in enumerate(texts) if i != 3]
