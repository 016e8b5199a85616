"""Upkeep off the caller's path: a worker with its own connection embeds and compresses while adds return.

Each property with a real store: the budget at idle, the lag bound at every add's return, adds that
never run a pass themselves, a worker that dies (restarted by the next add) and a host process that is
killed (the next start finishes the pass), two writers at once, undo of upkeep passes, and no thread
left after close. Slow workers are made with gated fake judges (events), never with timings.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner

from memrefine_edge.cli import cli
from memrefine_edge.core import BudgetError, ConfigurationError, Decision, Entry
from memrefine_edge.engine import Compressor, Upkeep
from memrefine_edge.methods import Method, PairContext
from memrefine_edge.store import MemoryStore, set_budget
from memrefine_edge.testing import FakeBackends, HashEncoder
from tests.support.fakes import ConcatMerger, ScriptedMethod, UnsetMerger
from tests.support.stores import compressor, synthetic_entries

REPO = Path(__file__).resolve().parents[2]


def memories(n: int, seed: int = 5, prefix: str = "") -> list[Entry]:
    """Synthetic memories without links (a link to an entry a pass removed would refuse the add)."""
    return [Entry(id=f"{prefix}{e.id}", content=e.content, timestamps=e.timestamps, provenance=(f"{prefix}{e.id}",))
            for e in synthetic_entries(n, seed=seed)]


def upkeep_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "memrefine-upkeep" and t.is_alive()]


def accounted(store: MemoryStore, ids: list[str]) -> set[str]:
    """The ids neither live nor removed by an audited decision (a merge counts when what it made is accounted)."""
    made_by: dict[str, str] = {}
    removed: set[str] = set()
    for d in store.journal.decisions():
        if d.action in ("delete", "evict"):
            removed.update(d.removed_ids)
        elif d.action == "merge":
            for gone in d.removed_ids:
                made_by[gone] = d.created_ids[0]

    def ok(entry_id: str, depth: int = 0) -> bool:
        if entry_id in store or entry_id in removed:
            return True
        return entry_id in made_by and depth < 1000 and ok(made_by[entry_id], depth + 1)

    return {i for i in ids if not ok(i)}


class GatedMethod(ScriptedMethod):
    """Decides like :class:`ScriptedMethod` (``policy``), after ``gate`` is open; records the deciding threads."""

    def __init__(self, *, gate: threading.Event | None = None, policy: str = "mixed",
                 on_decide=None) -> None:
        super().__init__(policy=policy, on_decide=on_decide)
        self.gate = gate
        self.threads: set[int] = set()
        self.entered = threading.Event()

    def decide(self, pair: PairContext) -> Decision:
        self.threads.add(threading.get_ident())
        self.entered.set()
        if self.gate is not None:
            assert self.gate.wait(timeout=60), "the test never opened the gate"
        return super().decide(pair)


def test_an_add_above_the_watermark_returns_and_the_worker_runs_the_pass(tmp_path):
    gate = threading.Event()
    method = GatedMethod(gate=gate)
    entries = memories(40)
    with MemoryStore(tmp_path / "u.db") as store:
        store.add_many(entries[:20])
        high = store.json_bytes()
        upkeep = Upkeep(compressor(store, method, mode="strict"), high_bytes=high, low_bytes=high // 2,
                        max_lag_bytes=10 * high).install()
        for e in entries[20:]:  # far above the watermark, within the lag: no add waits
            store.add(e)
        assert store.json_bytes() > high and all(e.id in store for e in entries)
        assert method.entered.wait(timeout=60)  # the worker is in its pass, held at its first decision
        assert upkeep.reports == [] and not upkeep.wait_idle(timeout=0)
        gate.set()
        assert upkeep.wait_idle()
        assert threading.get_ident() not in method.threads  # no pass ever ran on the caller's thread
        assert upkeep.reports and all(r.budget_met for r in upkeep.reports)
        assert store.json_bytes() <= high and upkeep.waits == 0
        assert not accounted(store, [e.id for e in entries])


def test_the_store_is_within_its_budget_whenever_the_worker_is_idle(tmp_path):
    entries = memories(300, seed=11)
    with MemoryStore(tmp_path / "u.db") as store:
        store.add_many(entries[:10])
        high = 2 * store.json_bytes()
        upkeep = Upkeep(compressor(store, mode="strict"), high_bytes=high, low_bytes=high * 3 // 4).install()
        for i, e in enumerate(entries[10:]):
            store.add(e)
            if i % 50 == 49:
                assert upkeep.wait_idle() and store.json_bytes() <= high
        assert upkeep.wait_idle() and store.json_bytes() <= high
        assert len(upkeep.reports) >= 3 and all(r.budget_met for r in upkeep.reports)
        assert [r.run_id for r in upkeep.reports] == [r.run_id for r in store.journal.runs()]
        assert all(r.status == "done" for r in store.journal.runs())
        assert store.stats().embedded == len(store)  # the worker embeds what is added
        assert not accounted(store, [e.id for e in entries])
        assert store.recount()["json_bytes"]["total"] == store.recount()["json_bytes"]["recount"]


def test_the_lag_bound_holds_at_every_adds_return_while_the_worker_lags(tmp_path):
    gate = threading.Event()
    method = GatedMethod(gate=gate)  # the worker's pass waits at its first decision until an add waited
    entries = memories(200, seed=3)
    with MemoryStore(tmp_path / "u.db") as store:
        store.add_many(entries[:10])
        high = 2 * store.json_bytes()
        upkeep = Upkeep(compressor(store, method, mode="strict"), high_bytes=high, low_bytes=high * 3 // 4,
                        max_lag_bytes=high // 4, max_wait_s=None)
        upkeep.install()
        limit = high + high // 4

        def open_gate_once_an_add_waits() -> None:
            while upkeep.waits == 0 and not gate.is_set():
                time.sleep(0.002)  # polls the counter: the first add that waits opens the gate
            gate.set()

        opener = threading.Thread(target=open_gate_once_an_add_waits)
        opener.start()
        try:
            over = []
            for e in entries[10:]:
                store.add(e)
                over.append(store.json_bytes() - high)
                assert store.json_bytes() <= limit, f"{e.id}: {store.json_bytes()} > {limit}"
        finally:
            gate.set()
            opener.join()
        assert upkeep.waits >= 1 and upkeep.wait_timeouts == 0  # the bound was reached and held
        assert max(over) > 0  # the store did run above the watermark: the worker lagged
        assert upkeep.wait_idle() and store.json_bytes() <= high
        assert not accounted(store, [e.id for e in entries])


def test_a_live_pass_stops_judging_and_evicts_once_an_add_waits_beyond_the_lag(tmp_path):
    from tests.engine.test_live_mode import distinct_facts

    gate = threading.Event()
    method = GatedMethod(gate=gate, policy="preserve")  # every pair a preserve: a long similar phase
    entries = distinct_facts(160)
    with MemoryStore(tmp_path / "u.db") as store:
        store.add_many(entries[:60])
        high = store.json_bytes()
        upkeep = Upkeep(compressor(store, method, mode="live", neighbours=4), high_bytes=high,
                        low_bytes=high * 3 // 4, max_lag_bytes=high // 10, max_wait_s=None).install()

        def open_gate_once_an_add_waits() -> None:
            while upkeep.waits == 0 and not gate.is_set():
                time.sleep(0.002)
            gate.set()

        opener = threading.Thread(target=open_gate_once_an_add_waits)
        opener.start()
        during_wait = None
        try:
            for e in entries[60:]:
                waits, seen = upkeep.waits, len(method.seen)
                store.add(e)
                if upkeep.waits > waits and during_wait is None:
                    during_wait = len(method.seen) - seen
        finally:
            gate.set()
            opener.join()
        assert during_wait is not None  # an add did wait: the pass was behind
        # The pass judged at most the pair it held when the add came, then evicted: it did not judge the
        # hundreds of pairs its new entries have before the add could return.
        assert during_wait <= 1
        assert upkeep.wait_idle() and store.json_bytes() <= high
        first = upkeep.reports[0]
        assert first.budget_met and first.actions["evict"] > 0
        # What it left is judged by the passes after it, and no pair twice.
        pairs = [tuple(sorted(p[:2])) for p in method.seen]
        assert len(pairs) == len(set(pairs)) and len(upkeep.reports) >= 2
        assert not accounted(store, [e.id for e in entries])

def test_a_pass_under_upkeep_parks_inside_its_long_computations(tmp_path, monkeypatch):
    import memrefine_edge.engine._similar as similar
    from memrefine_edge.engine._upkeep_worker import UpkeepWorker
    from memrefine_edge.index import LocalPairs

    given = []

    class Recording(LocalPairs):
        def __init__(self, *args, pause=None, **kw):
            given.append(pause)
            super().__init__(*args, pause=pause, **kw)

    monkeypatch.setattr(similar, "LocalPairs", Recording)
    entries = memories(120, seed=6)
    with MemoryStore(tmp_path / "u.db") as store:
        store.add_many(entries[:20])
        high = store.json_bytes()
        upkeep = Upkeep(compressor(store, mode="live"), high_bytes=high, low_bytes=high // 2).install()
        store.add_many(entries[20:])
        assert upkeep.wait_idle() and upkeep.reports
    # the pass's rescans pause where the worker parks for the caller's adds and searches
    assert given and all(getattr(p, "__func__", None) is UpkeepWorker.pause for p in given)

def test_an_add_waits_at_most_max_wait_s_for_a_stuck_worker(tmp_path):
    gate = threading.Event()
    method = GatedMethod(gate=gate)
    entries = memories(60, seed=4)
    with MemoryStore(tmp_path / "u.db") as store:
        store.add_many(entries[:10])
        high = store.json_bytes()
        upkeep = Upkeep(compressor(store, method, mode="strict"), high_bytes=high, low_bytes=high // 2,
                        max_lag_bytes=0, max_wait_s=0).install()
        try:
            for e in entries[10:]:
                store.add(e)  # beyond the lag at once; the worker is stuck at its first decision
            assert store.json_bytes() > high and upkeep.waits >= 1 and upkeep.wait_timeouts == upkeep.waits
        finally:
            gate.set()
        assert upkeep.wait_idle() and store.json_bytes() <= high


class Die(BaseException):
    """Kills the worker thread (a BaseException: no error handler of a pass takes it)."""


def test_a_worker_that_dies_mid_pass_is_restarted_by_the_next_add_and_resumes_its_pass(tmp_path):
    calls = []

    def die_on_third() -> None:
        calls.append(1)
        if len(calls) == 3:
            raise Die("the worker thread died")

    entries = memories(80, seed=6)
    with MemoryStore(tmp_path / "u.db") as store:
        store.add_many(entries[:30])
        high = store.json_bytes()
        method = ScriptedMethod(policy="mixed", on_decide=die_on_third)
        upkeep = Upkeep(compressor(store, method, mode="strict"), high_bytes=high, low_bytes=high // 2,
                        max_wait_s=0).install()
        store.add(entries[30])  # over the watermark: the pass starts, and its thread dies at decision 3
        for thread in upkeep_threads():
            thread.join()
        assert len(calls) == 3 and upkeep_threads() == []
        (interrupted,) = [r for r in store.journal.runs() if r.status == "running"]
        assert interrupted.cursor >= 2  # the decisions before the one it died in are committed
        with pytest.warns(RuntimeWarning, match="worker stopped .*Die"):
            store.add(entries[31])  # says what happened, and starts a new worker
        assert upkeep_threads()
        assert upkeep.wait_idle() and upkeep.restarts == 1
        assert store.journal.run(interrupted.run_id).status == "done"
        assert upkeep.reports[0].run_id == interrupted.run_id and upkeep.reports[0].resumed
        for e in entries[32:]:
            store.add(e)
        assert upkeep.wait_idle() and store.json_bytes() <= high
        assert all(r.status == "done" for r in store.journal.runs())
        assert not accounted(store, [e.id for e in entries[:32]])


# The host process: adds memories with upkeep installed, acknowledges each add on stdout, and the
# pass blocks at its 4th decision (so the parent can kill the process in the middle of it).
HOST = """
import sys, threading
from memrefine_edge.engine import Upkeep
from memrefine_edge.store import MemoryStore
from tests.engine.test_upkeep_worker import memories, upkeep_compressor
calls = []
def on_decide():
    calls.append(1)
    if len(calls) == 4:
        print("in pass", flush=True)
        threading.Event().wait()
with MemoryStore(sys.argv[1]) as store:
    entries = memories(80, seed=8)
    store.add_many(entries[:30])
    print("acked", *[e.id for e in entries[:30]], flush=True)
    high = store.json_bytes()
    Upkeep(upkeep_compressor(store, on_decide), high_bytes=high, low_bytes=high // 2, max_wait_s=0).install()
    print("high", high, flush=True)
    for e in entries[30:]:
        store.add(e)
        print("acked", e.id, flush=True)
    print("added", flush=True)
    threading.Event().wait()
"""


def upkeep_compressor(store: MemoryStore, on_decide=None) -> Compressor:
    """The compressor of the killed-host test, the same in both processes (same method, same options)."""
    return compressor(store, ScriptedMethod(policy="mixed", on_decide=on_decide), mode="strict")


@pytest.mark.slow
def test_a_host_killed_during_a_pass_loses_nothing_and_the_next_start_finishes_the_pass(tmp_path):
    db = tmp_path / "host.db"
    proc = subprocess.Popen([sys.executable, "-c", HOST, str(db)], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    acked: list[str] = []
    seen: set[str] = set()
    high = 0
    try:
        assert proc.stdout is not None
        while not {"in pass", "added"} <= seen:
            line = proc.stdout.readline()
            assert line, f"the host ended early:\n{proc.stderr.read() if proc.stderr else ''}"
            word, *rest = line.split()
            seen.add(line.strip() if word in ("in", "added") else word)
            if word == "acked":
                acked += rest
            elif word == "high":
                high = int(rest[0])
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.communicate()
    assert proc.returncode == -signal.SIGKILL and len(acked) == 80
    with MemoryStore(db, create=False) as store:
        (interrupted,) = [r for r in store.journal.runs() if r.status == "running"]
        assert interrupted.cursor >= 3  # the decisions before the one it was killed in
        assert not accounted(store, acked)  # every acknowledged add is there, or removed by an audited decision
        upkeep = Upkeep(upkeep_compressor(store), high_bytes=high, low_bytes=high // 2).install()  # the next start
        assert upkeep.wait_idle()
        assert store.journal.run(interrupted.run_id).status == "done"
        assert upkeep.reports[0].run_id == interrupted.run_id and upkeep.reports[0].resumed
        assert all(r.status == "done" for r in store.journal.runs()) and store.json_bytes() <= high
        assert not accounted(store, acked) and store.integrity_check() == "ok"


def test_two_connections_add_at_once_each_with_its_upkeep(tmp_path):
    db = tmp_path / "shared.db"
    first, second = memories(150, seed=21, prefix="a"), memories(150, seed=22, prefix="b")
    with MemoryStore(db) as a, MemoryStore(db) as b:
        a.add_many(first[:10])
        high = 3 * a.json_bytes()
        ups = [Upkeep(compressor(s, mode="strict"), high_bytes=high, low_bytes=high * 3 // 4).install()
               for s in (a, b)]
        errors: list[BaseException] = []

        def writer(store: MemoryStore, entries: list[Entry]) -> None:
            try:
                for e in entries:
                    store.add(e)
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(a, first[10:])),
                   threading.Thread(target=writer, args=(b, second))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        assert all(u.wait_idle() for u in ups)
        assert a.json_bytes() <= high and all(u.error is None and u.blocked_by is None for u in ups)
        assert all(r.status == "done" for r in a.journal.runs())
        runs = {r.run_id for r in a.journal.runs()}
        assert runs and {r.run_id for u in ups for r in u.reports if r.run_id} == runs  # every pass is one of theirs
        assert not accounted(a, [e.id for e in first + second]) and a.integrity_check() == "ok"


# Another process writing to the same store: a first half of its memories while the parent adds too, then,
# once told to, a second half that takes the store above the high watermark with no add of the parent's.
WRITER = """
import sys
from memrefine_edge.store import MemoryStore
from tests.engine.test_upkeep_worker import memories
entries = memories(160, seed=31, prefix="w")
with MemoryStore(sys.argv[1], create=False) as store:
    print("started", flush=True)
    for e in entries[:80]:
        store.add(e)
    print("half", flush=True)
    sys.stdin.readline()
    for e in entries[80:]:
        store.add(e)
    print("done", flush=True)
"""


@pytest.mark.slow
def test_adds_of_another_process_are_kept_under_the_budget_too(tmp_path):
    db = tmp_path / "shared.db"
    ours = memories(60, seed=32, prefix="p")
    with MemoryStore(db) as store:
        store.add_many(ours[:10])
        high = 4 * store.json_bytes()
        upkeep = Upkeep(compressor(store, mode="strict"), high_bytes=high, low_bytes=high * 3 // 4).install()
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(db)], cwd=REPO, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None and proc.stdin is not None
            assert proc.stdout.readline().strip() == "started"
            for e in ours[10:]:  # both processes add at once
                store.add(e)
            assert proc.stdout.readline().strip() == "half"
            assert upkeep.wait_idle() and store.json_bytes() <= high
            proc.stdin.write("go on\n")
            proc.stdin.flush()
            assert proc.stdout.readline().strip() == "done"  # above the watermark now, by the other's adds alone
            assert store.json_bytes() > high
            passes = len(upkeep.reports)
            deadline = time.monotonic() + 120
            while len(upkeep.reports) == passes and time.monotonic() < deadline:
                time.sleep(0.05)  # the idle worker looks at the store every second: it notices and compresses
            assert upkeep.wait_idle() and len(upkeep.reports) > passes and store.json_bytes() <= high
        finally:
            proc.kill()
            proc.communicate()
        theirs = [f"w{e.id}" for e in synthetic_entries(160, seed=31)]
        assert not accounted(store, [e.id for e in ours] + theirs) and store.integrity_check() == "ok"


def test_undo_of_an_upkeep_pass_restores_the_store(tmp_path):
    db = tmp_path / "u.db"
    entries = memories(40, seed=9)
    with MemoryStore(db) as store:
        store.add_many(entries[:30])
        high = store.json_bytes() + 1
        upkeep = Upkeep(compressor(store, mode="strict"), high_bytes=high, low_bytes=high * 2 // 3).install()
        assert upkeep.wait_idle() and upkeep.reports == []  # under the watermark: no pass
        before = [e.counted_fields() for e in store.entries()]
        store.add(entries[30])
        assert upkeep.wait_idle()
        (report,) = upkeep.reports
        assert report.budget_met and report.decisions > 0
    backends = FakeBackends(encoder=HashEncoder(), method=ScriptedMethod(), merger=ConcatMerger())
    result = CliRunner().invoke(cli, ["undo", report.run_id, "--db", str(db)], obj=backends)
    assert result.exit_code == 0, result.output
    with MemoryStore(db, create=False) as store:
        assert [e.counted_fields() for e in store.entries()] == before + [entries[30].counted_fields()]


def test_closing_the_store_stops_the_worker_mid_pass_and_the_next_start_finishes_it(tmp_path):
    gate = threading.Event()
    method = GatedMethod(gate=gate)
    entries = memories(60, seed=12)
    db = tmp_path / "u.db"
    with MemoryStore(db) as store:
        store.add_many(entries[:50])
        high = store.json_bytes()
        upkeep = Upkeep(compressor(store, method, mode="strict"), high_bytes=high, low_bytes=high // 3).install()
        store.add(entries[50])
        assert method.entered.wait(timeout=60) and upkeep_threads()
        gate.set()  # the decision in progress ends; the worker stops at its next step
    assert upkeep_threads() == []  # no thread left once the store is closed
    with MemoryStore(db, create=False) as store:
        unfinished = store.journal.unfinished_run()
        with Upkeep(compressor(store, GatedMethod(), mode="strict"), high_bytes=high,
                    low_bytes=high // 3).install() as upkeep:
            assert upkeep.wait_idle() and store.json_bytes() <= high
            if unfinished is not None:  # the pass stopped before its end: this start finished it
                assert upkeep.reports[0].run_id == unfinished.run_id and upkeep.reports[0].resumed
        assert upkeep_threads() == []
        assert all(r.status == "done" for r in store.journal.runs())
        assert not accounted(store, [e.id for e in entries[:51]])
        passes = len(upkeep.reports)
        store.add(Entry(id="late", content="A long memory far above the watermark. " * 40))
        assert len(upkeep.reports) == passes and upkeep_threads() == []  # closed: the add is a plain one
        assert store.after_add == [] and store.add_guards == [] and store.before_close == []


def test_an_error_in_a_pass_never_fails_an_add_and_is_said_once(tmp_path):
    class MergeWithoutMerger(Method):
        name = "merge-all"

        def decide(self, pair: PairContext) -> Decision:
            return Decision("merge", None, merge_instruction="keep both", reason="all", source="llm")

    entries = memories(30, seed=2)
    with MemoryStore(tmp_path / "u.db") as store:
        store.add_many(entries[:20])
        high = store.json_bytes()
        upkeep = Upkeep(Compressor(store, encoder=HashEncoder(), method=MergeWithoutMerger(), merger=UnsetMerger()),
                        high_bytes=high, low_bytes=high // 2).install()
        with pytest.warns(RuntimeWarning, match="upkeep failed.*ConfigurationError"):
            store.add(entries[20])
            assert upkeep.wait_idle()
        assert entries[20].id in store and isinstance(upkeep.error, ConfigurationError)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the same error again: not said twice
            store.add(entries[21])
            assert upkeep.wait_idle()
        assert entries[21].id in store and isinstance(upkeep.error, ConfigurationError)


def test_the_worker_embeds_new_entries_without_a_budget(tmp_path):
    class Recording(HashEncoder):
        threads: set[int] = set()

        def embed_batch(self, texts):
            self.threads.add(threading.get_ident())
            return super().embed_batch(texts)

    encoder = Recording()
    with MemoryStore(tmp_path / "u.db") as store:
        store.add_many(memories(5))
        comp = Compressor(store, encoder=encoder, method=ScriptedMethod(), merger=ConcatMerger())
        with Upkeep(comp).install() as upkeep:  # no standing budget: nothing to compress, only to embed
            for e in memories(20, seed=1, prefix="n"):
                store.add(e)
            assert upkeep.wait_idle() and upkeep.reports == []
            assert store.stats().embedded == len(store) == 25
            assert encoder.threads and threading.get_ident() not in encoder.threads
            budget = store.json_bytes() // 2
            set_budget(store, target_bytes=budget, metric="json", spec="0.5")
            store.add(Entry(id="x", content="Ben swims on Fridays."))  # the standing budget, read at the add
            assert upkeep.wait_idle() and len(upkeep.reports) == 1
            assert store.json_bytes() <= budget and upkeep.reports[0].budget_met


def test_bad_settings_and_a_read_only_store_are_refused(tmp_path):
    db = tmp_path / "u.db"
    MemoryStore(db).close()
    with MemoryStore(db) as store:
        comp = compressor(store)
        with pytest.raises(BudgetError, match="max_lag_bytes"):
            Upkeep(comp, high_bytes=100, low_bytes=50, max_lag_bytes=-1)
        with pytest.raises(ConfigurationError, match="max_wait_s"):
            Upkeep(comp, high_bytes=100, low_bytes=50, max_wait_s=-1)
    with MemoryStore(db, read_only=True) as store:
        with pytest.raises(ConfigurationError, match="read-only"):
            Upkeep(compressor(store), high_bytes=100, low_bytes=50).install()
        assert store.after_add == [] and upkeep_threads() == []


def test_the_inline_option_runs_the_pass_inside_the_add(tmp_path):
    entries = memories(60, seed=5)
    with MemoryStore(tmp_path / "u.db") as store:
        store.add_many(entries[:10])
        high = store.json_bytes() * 2
        method = GatedMethod()
        upkeep = Upkeep(compressor(store, method, mode="strict"), high_bytes=high, low_bytes=high // 2,
                        background=False).install()
        for e in entries[10:]:
            store.add(e)
            assert store.json_bytes() <= high  # every add returns with the store under the watermark
        assert upkeep_threads() == [] and method.threads == {threading.get_ident()}
        assert upkeep.reports and all(r.budget_met for r in upkeep.reports) and upkeep.wait_idle(timeout=0)
        assert json.dumps([r.run_id for r in upkeep.reports]) == json.dumps(
            [r.run_id for r in store.journal.runs()])


def test_a_standing_budget_recorded_unreadably_never_fails_an_add(tmp_path):
    with MemoryStore(tmp_path / "u.db") as store:
        store.add_many(memories(10))
        upkeep = Upkeep(compressor(store)).install()  # follows the standing budget
        store.set_meta("budget", "{not json")  # as a damaged file or a foreign writer leaves it
        with pytest.warns(RuntimeWarning, match="upkeep failed.*BudgetError.*unreadable"):
            added = store.add(Entry(id="x", content="Ben swims on Fridays."))
            assert upkeep.wait_idle()
        assert added.id == "x" and "x" in store and upkeep.restarts == 0
        assert "unreadable" in str(upkeep.error) and upkeep_threads()  # kept, said; the worker lives on


def test_the_worker_steps_aside_while_the_caller_searches(tmp_path):
    decided: list[int] = []

    def slow_decision() -> None:  # a pass long enough to search in the middle of it
        decided.append(threading.get_ident())
        time.sleep(0.002)

    during: list[int] = []

    class ProbeEncoder(HashEncoder):
        """The search's encoder (the same vectors): holds the search open for a while and counts the
        worker's decisions meanwhile."""

        def embed(self, texts):
            if texts == ["probe"]:
                before = len(decided)
                time.sleep(0.3)
                during.append(len(decided) - before)
            return super().embed(texts)

    entries = memories(300, seed=3)
    with MemoryStore(tmp_path / "u.db") as store:
        store.add_many(entries[:20])
        high = store.json_bytes()
        method = ScriptedMethod(policy="preserve", on_decide=slow_decision)
        upkeep = Upkeep(compressor(store, method, mode="live"), high_bytes=high, low_bytes=high // 2,
                        max_lag_bytes=100 * high).install()
        store.add_many(entries[20:])
        deadline = time.monotonic() + 60
        while len(decided) < 20 and time.monotonic() < deadline:  # the pass is under way
            time.sleep(0.01)
        assert len(decided) >= 20 and not upkeep.wait_idle(timeout=0)
        hits = store.search("probe", k=3, encoder=ProbeEncoder())
        assert len(hits) == 3
        # at most the decision in progress when the search began was finished while it ran
        assert during == [during[0]] and during[0] <= 1
        assert upkeep.wait_idle() and store.json_bytes() <= high  # and the pass went on afterwards
        assert threading.get_ident() not in decided
