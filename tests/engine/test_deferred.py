"""The deferred phase: deletes a method deferred are taken, in the order they were deferred, only when the
candidate pairs run out above budget, before any eviction, and a resumed run takes the same ones."""

from __future__ import annotations

import pytest

from memrefine_edge.core import ConfigurationError, Decision
from memrefine_edge.methods import Method, PairContext
from memrefine_edge.store import MemoryStore
from tests.support.stores import compressor, export, make_store


class Deferring(Method):
    """Defers half its deletes (``source="deferred"``) and takes them when asked again (``take=False``: never).

    Decides from a hash of the pair's ids, as :class:`ScriptedMethod`: half the pairs are
    deferred deletes, a tenth merged, the rest preserved; the deferred target is the same
    every time the pair is asked about."""

    name = "deferring"

    def __init__(self, *, take: bool = True) -> None:
        self.take = take
        self.asked: list[tuple[str, str]] = []

    @staticmethod
    def _target(pair: PairContext) -> str:
        from tests.support.fakes import _bucket

        return "b" if _bucket(pair.a.id, pair.b.id) <= 2 else "a"

    def decide(self, pair: PairContext) -> Decision:
        from tests.support.fakes import _bucket

        bucket = _bucket(pair.a.id, pair.b.id)
        if bucket <= 4:
            return Decision("preserve", None, reason=f"delete {self._target(pair)} deferred", source="deferred")
        if bucket == 5:
            return Decision("merge", None, merge_instruction="keep all", reason="scripted", source="llm")
        return Decision("preserve", None, reason="scripted", source="rule")

    def deferred(self, pair: PairContext) -> Decision | None:
        self.asked.append((pair.a.id, pair.b.id))
        if not self.take:
            return None
        return Decision("delete", self._target(pair), reason="deferred delete taken", source="guard")  # type: ignore[arg-type]


def _totals_equal_a_recount(store: MemoryStore) -> bool:
    return all(v["total"] == v["recount"] for v in store.recount().values())


def _phases(store: MemoryStore, run_id: str) -> tuple[list, list, list]:
    """The run's decisions as the loop, the deferred phase (deletes of deferred pairs) and the evictions made them."""
    decisions = store.journal.decisions(run_id)
    deferred = {(d.a_id, d.b_id) for d in decisions if d.source == "deferred"}
    taken = [d for d in decisions if d.action == "delete" and (d.a_id, d.b_id) in deferred]
    evicted = [d for d in decisions if d.action == "evict"]
    loop = [d for d in decisions if d not in taken and d not in evicted]
    return loop, taken, evicted


def _expected_phase(originals: list[str], loop: list, n: int) -> tuple[list[tuple[str, str, str]], int]:
    """The first ``n`` deferred deletes in the order they were deferred, skipping pairs with an entry gone,
    replayed from the loop's decisions; and how many deferred pairs were skipped before the last one."""
    live = set(originals)
    for d in loop:
        live -= set(d.removed_ids)
        live |= set(d.created_ids)
    out, skipped = [], 0
    for d in loop:
        if len(out) == n:
            break
        if d.source != "deferred":
            continue
        if d.a_id not in live or d.b_id not in live:
            skipped += 1
            continue
        gone = d.b_id if d.reason == "delete b deferred" else d.a_id
        out.append((d.a_id, d.b_id, gone))
        live.discard(gone)
    return out, skipped


def test_a_run_that_meets_its_budget_takes_no_deferred_delete(tmp_path):
    with make_store(tmp_path / "w.db", n=40, seed=0) as store:
        method = Deferring()
        report = compressor(store, method).run(budget=0.5)
        assert report.budget_met and report.stop_reason == "budget met"
        assert report.sources["deferred"] > 10  # pairs were deferred ...
        assert method.asked == [] and report.deferred_taken == 0  # ... and never asked about again
        assert "delete" not in report.actions and _phases(store, report.run_id)[1] == []
        assert _totals_equal_a_recount(store)


def test_deferred_deletes_are_taken_in_order_until_the_budget_holds(tmp_path):
    with make_store(tmp_path / "d.db", n=30, seed=1) as store:
        originals = store.ids()
        method = Deferring()
        report = compressor(store, method).run(budget=0.2)
        assert report.budget_met and report.stop_reason == "budget met by deferred deletes"
        loop, taken, evicted = _phases(store, report.run_id)
        assert not evicted and len(taken) >= 3
        assert store.journal.decisions(report.run_id)[-len(taken):] == taken  # after every loop decision
        expected, skipped = _expected_phase(originals, loop, len(taken))
        assert [(d.a_id, d.b_id, d.target) for d in taken] == expected
        assert skipped > 0  # pairs with an entry gone (merged or deleted) were passed over
        assert method.asked == [(a, b) for a, b, _ in expected]  # and never asked about
        # Stopped as soon as the budget held: every delete but the last started above it.
        target = report.target_bytes
        assert all(d.size_before > target for d in taken) and taken[-1].size_after <= target
        assert all(d.source == "guard" and d.reason == "deferred delete taken" for d in taken)
        live = set(store.ids())
        assert any(d.a_id in live and d.b_id in live for d in loop if d.source == "deferred")  # some left untaken
        assert report.deferred_taken == len(taken) == report.actions["delete"] == report.sources["guard"]
        assert _totals_equal_a_recount(store)


def test_paper_mode_stops_above_budget_once_the_deferred_deletes_run_out(tmp_path):
    with make_store(tmp_path / "p.db", n=30, seed=1) as store:
        originals = store.ids()
        method = Deferring()
        report = compressor(store, method).run(budget=0.1)
        assert not report.budget_met and report.stop_reason == "no candidate pair left"
        loop, taken, _ = _phases(store, report.run_id)
        live = set(store.ids())
        assert not any(d.a_id in live and d.b_id in live for d in loop if d.source == "deferred")  # all taken
        assert [(d.a_id, d.b_id, d.target) for d in taken] == _expected_phase(originals, loop, len(taken))[0]
        assert report.deferred_taken == len(taken) > 0
        assert _totals_equal_a_recount(store)


def test_strict_mode_takes_the_deferred_deletes_before_it_evicts(tmp_path):
    evictions = {}
    for take in (True, False):
        with make_store(tmp_path / f"s{take}.db", n=30, seed=1) as store:
            report = compressor(store, Deferring(take=take), mode="strict").run(budget=0.1)
            assert report.budget_met and report.stop_reason == "budget met by eviction (strict mode)"
            loop, taken, evicted = _phases(store, report.run_id)
            assert bool(taken) == take and evicted
            assert max(d.step for d in loop) < min(d.step for d in taken + evicted)
            if take:
                assert max(d.step for d in taken) < min(d.step for d in evicted)
            evictions[take] = len(evicted)
            assert _totals_equal_a_recount(store)
    assert evictions[True] < evictions[False]


def test_a_deferred_hook_may_return_only_a_delete(tmp_path):
    class MergesLater(Deferring):
        def deferred(self, pair):
            return Decision("merge", None, merge_instruction="keep all", reason="r", source="llm")

    with make_store(tmp_path / "h.db", n=30, seed=1) as store:
        with pytest.raises(ConfigurationError, match="deferred"):
            compressor(store, MergesLater()).run(budget=0.2)
        assert _totals_equal_a_recount(store)


def _decided(store: MemoryStore) -> list[tuple]:
    return [(d.step, d.action, d.a_id, d.b_id, d.target, d.source, d.reason, d.removed_ids, d.created_ids)
            for d in store.journal.decisions()]


@pytest.mark.parametrize("mode,cut", [("paper", "in the loop"), ("paper", "before the phase"),
                                      ("paper", "in the phase"), ("strict", "in the phase"),
                                      ("strict", "after the phase")])
def test_a_run_interrupted_before_or_in_the_deferred_phase_resumes_to_the_same_result(tmp_path, mode, cut):
    budget = 0.2 if mode == "paper" else 0.1

    def summary(report):
        return (report.stop_reason, report.budget_met, report.actions, report.sources, report.deferred_taken)

    with make_store(tmp_path / "whole.db", n=30, seed=1) as store:
        whole = compressor(store, Deferring(), mode=mode).run(budget=budget)
        want, want_decided = export(store), _decided(store)
        loop, taken, _ = _phases(store, whole.run_id)
    assert len(taken) >= 3
    with make_store(tmp_path / "cut.db", n=30, seed=1) as store:
        if cut in ("in the loop", "before the phase", "in the phase") and mode == "paper":
            steps = taken[0].step  # the loop's decisions, preserves included (counted, not audited)
            at = {"in the loop": steps // 2, "before the phase": steps, "in the phase": steps + 2}[cut]
            partial = compressor(store, Deferring(), mode=mode).run(budget=budget, max_decisions=at)
            assert partial.stop_reason.startswith("stopped") and store.journal.run(partial.run_id).cursor == at
        else:  # Ctrl-C after the second deferred delete, or after the last one (before the eviction)
            stop_at = 2 if cut == "in the phase" else len(taken)

            def interrupt(p):
                if p.counts.get("delete", 0) >= stop_at:
                    raise KeyboardInterrupt

            with pytest.raises(KeyboardInterrupt):
                compressor(store, Deferring(), mode=mode, progress=interrupt, commit_window_s=0).run(budget=budget)
            assert len(store.journal.decisions()) == len(loop) + stop_at
        assert store.journal.unfinished_run() is not None
        resumed = compressor(store, Deferring(), mode=mode).run(budget=budget)
        assert resumed.resumed and export(store) == want and _decided(store) == want_decided
        assert summary(resumed) == summary(whole)
        assert _totals_equal_a_recount(store)
