"""Upkeep: a store kept under its watermarks (given, or from the standing budget) as entries are added,
and adds that still succeed while another interrupted run waits. The worker itself (lag, crashes, close):
test_upkeep_worker.py."""

from __future__ import annotations

import warnings

import pytest

from memrefine_edge.core import BudgetError, Entry
from memrefine_edge.engine import Upkeep
from memrefine_edge.store import MemoryStore
from tests.support.fakes import ScriptedMethod
from tests.support.stores import compressor, make_store, synthetic_entries


def test_upkeep_on_insert_keeps_the_store_under_its_watermark(tmp_path):
    entries = synthetic_entries(60, seed=5)
    with MemoryStore(tmp_path / "u.db") as store:
        store.add_many(entries[:10])
        high = store.json_bytes() * 2
        upkeep = Upkeep(compressor(store, mode="strict"), high_bytes=high, low_bytes=high // 2).install()
        limit = high + upkeep.lag_bytes((high, high // 2))
        for e in entries[10:]:
            store.add(Entry(id=e.id, content=e.content, timestamps=e.timestamps, provenance=e.provenance))
            assert store.json_bytes() <= limit  # within the lag at every add's return
        assert upkeep.wait_idle() and store.json_bytes() <= high  # within the watermark at idle
        assert upkeep.reports and all(r.budget_met for r in upkeep.reports)
        assert len(store.journal.runs()) == len(upkeep.reports)
        upkeep.uninstall()
        store.add(Entry(id="late", content="no upkeep any more " * (high // 10)))
        assert upkeep.wait_idle() and store.json_bytes() > high and len(upkeep.reports) == len(store.journal.runs())
    with pytest.raises(BudgetError):
        Upkeep(compressor(MemoryStore(tmp_path / "v.db")), high_bytes=10, low_bytes=20)


def test_upkeep_skips_while_another_interrupted_run_waits_and_adds_still_succeed(tmp_path):
    from memrefine_edge.core import RunInterruptedError

    with make_store(tmp_path / "w.db") as store:
        # A user's run (another method and budget) that stopped half way, as a crash leaves it.
        waiting = compressor(store, ScriptedMethod(policy="delete")).run(budget=0.3, max_decisions=2)
        high = store.json_bytes()
        upkeep = Upkeep(compressor(store, mode="strict"), high_bytes=high, low_bytes=high // 2).install()
        with pytest.warns(RuntimeWarning, match=waiting.run_id):
            store.add(Entry(id="x1", content="a new memory that takes the store over its watermark " * 3))
            assert upkeep.wait_idle()
        assert "x1" in store and upkeep.blocked_by == waiting.run_id and not upkeep.reports
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # once per waiting run, not on every add
            store.add(Entry(id="x2", content="another memory over the watermark " * 3))
            assert upkeep.wait_idle()
        assert "x2" in store and store.journal.unfinished_run().run_id == waiting.run_id
        assert upkeep.waits == 0  # a blocked worker cannot help: adds do not wait for it
        with pytest.raises(RunInterruptedError) as info:  # what upkeep caught, with the run named
            compressor(store, mode="strict").run(budget_bytes=high // 2)
        assert info.value.run_id == waiting.run_id
        # Once the user finishes that run, upkeep works again on the next add.
        compressor(store, ScriptedMethod(policy="delete")).run(budget=0.3)
        over = (high - store.json_bytes()) // 16 + 10  # just over the watermark again
        store.add(Entry(id="x3", content="one more memory " * over))
        assert upkeep.wait_idle()
        assert upkeep.blocked_by is None and upkeep.reports and store.json_bytes() <= high
        upkeep.close()


def test_upkeep_follows_the_standing_budget(tmp_path):
    from memrefine_edge.store import set_budget
    store = make_store(tmp_path / "u.db", n=20)
    upkeep = Upkeep(compressor(store)).install()
    store.add(Entry(id="x0", content="Ben runs on Tuesdays."))
    assert upkeep.wait_idle() and upkeep.reports == []  # no budget: no pass
    size = store.json_bytes()
    set_budget(store, target_bytes=int(size * 0.8), metric="json", spec="0.8")
    store.add(Entry(id="x1", content="Ben swims on Fridays."))
    assert upkeep.wait_idle() and len(upkeep.reports) == 1
    assert store.json_bytes() <= int(int(size * 0.8) * 0.9)
    store.close()
