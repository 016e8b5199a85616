"""A day of assistant traffic, compressed into minutes, with crashes: nothing acknowledged is lost.

One process adds 10,000 memories in small bursts with Upkeep installed
(watermarks that trigger dozens of passes on its worker thread; a pass a kill
interrupts resumes when the adder starts again), another searches without pause,
a third runs ``memrefine compress`` now and then; every few seconds the
harness SIGKILLs one of them at random and starts it again. At the end: the
file is sound, every acknowledged add is in the store or accounted for by an
audited decision, the stored sizes equal a recount, no search ever failed,
and undoing the last run restores the store it started from.
"""

from __future__ import annotations

import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memrefine_edge.core import json_size
from memrefine_edge.engine import Compressor
from memrefine_edge.store import MemoryStore
from memrefine_edge.store._journal import unpack_text
from memrefine_edge.testing import HashEncoder
from tests.support.crash_fakes import CampaignMethod
from tests.support.fakes import ConcatMerger

HERE = Path(__file__).resolve().parents[1] / "support"  # the workers and fakes run in subprocesses
TOTAL, HIGH, LOW, CLI_TARGET = 10_000, 120_000, 90_000, 80_000
TIME_CAP_S = 600


def _start_process(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _acked(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def _finish_interrupted(db: Path) -> None:
    """Complete a run a kill left behind, with the method it was started with."""
    with MemoryStore(db, create=False) as store:
        run = store.journal.unfinished_run()
        if run is None:
            return
        policy = run.params["options"]["policy"]
        comp = Compressor(store, encoder=HashEncoder(), method=CampaignMethod(policy=policy), merger=ConcatMerger())
        comp.run(resume=True)


@pytest.mark.slow
def test_a_day_of_assistant_traffic_with_crashes(tmp_path, record_property):
    db, acks, errors = tmp_path / "memory.db", tmp_path / "acks.txt", tmp_path / "search-errors.txt"
    rng = random.Random(20261203)
    procs: list[subprocess.Popen] = []
    try:
        _soak(db, acks, errors, rng, procs, record_property)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()


def _soak(db, acks, errors, rng, procs, record_property) -> None:
    def _start(*args: str) -> subprocess.Popen:
        proc = _start_process(*args)
        procs.append(proc)
        return proc

    adder = _start(str(HERE / "soak_worker.py"), "add", str(db), str(acks), str(TOTAL), str(HIGH), str(LOW))
    while not db.exists():
        time.sleep(0.05)
    searcher = _start(str(HERE / "soak_worker.py"), "search", str(db), str(errors))
    compress: subprocess.Popen | None = None
    kills = {"adder": 0, "searcher": 0, "compress": 0}
    compress_runs = compress_refused = 0
    reasons: list[str] = []
    adder_said = ""
    started = next_kill = next_compress = time.monotonic()
    next_kill += 3
    while True:
        now = time.monotonic()
        assert now - started < TIME_CAP_S, f"soak did not finish in {TIME_CAP_S} s ({len(_acked(acks))} adds)"
        if adder.poll() is not None:
            out, err = adder.communicate()
            if "adder done" in out:
                adder_said = out[out.index("adder done"):].splitlines()[0]
                break
            assert adder.returncode == -signal.SIGKILL, f"the adder failed on its own:\n{err[-3000:]}"
            adder = _start(str(HERE / "soak_worker.py"), "add", str(db), str(acks), str(TOTAL), str(HIGH), str(LOW))
        if searcher.poll() is not None:
            searcher = _start(str(HERE / "soak_worker.py"), "search", str(db), str(errors))
        if compress is not None and compress.poll() is not None:
            _, err = compress.communicate()
            if compress.returncode == 0:
                compress_runs += 1
            elif compress.returncode == 1:  # refused: another run holds the store, or waits to be resumed
                assert "Traceback" not in err and err.startswith("Error:"), err[-3000:]
                compress_refused += 1
                reasons.append(err.split(";")[0][:60])
            compress = None
        if compress is None and now >= next_compress:
            compress = _start(str(HERE / "cli_fake_models.py"), "compress", "--db", str(db), "--budget-bytes",
                              str(CLI_TARGET))
            next_compress = now + rng.uniform(2, 5)
        if now >= next_kill:
            victims = {"adder": adder, "searcher": searcher, **({"compress": compress} if compress else {})}
            name = rng.choice(sorted(victims))
            if victims[name].poll() is None:
                victims[name].send_signal(signal.SIGKILL)
                kills[name] += 1
            next_kill = now + rng.uniform(2, 4)
        time.sleep(0.05)
    searcher.kill()
    searcher.communicate()
    if compress is not None:
        compress.wait()
    _finish_interrupted(db)

    acked = _acked(acks)
    assert len(acked) == TOTAL and len(set(acked)) == TOTAL
    assert not errors.exists() or errors.read_text() == "", errors.read_text()[:3000]
    with MemoryStore(db, create=False) as store:
        assert store.integrity_check() == "ok"
        live = list(store.entries())
        live_prov = {p for e in live for p in e.provenance}
        # Provenance of what audited deletes and evictions removed, read from the undo history.
        with sqlite3.connect(db) as conn:
            removed = conn.execute(
                "SELECT h.provenance FROM history h JOIN decisions d ON d.run_id = h.run_id AND d.step = h.step"
                " WHERE d.action IN ('delete', 'evict')").fetchall()
        conn.close()
        import json

        audited = {p for (prov,) in removed for p in json.loads(unpack_text(prov))}
        lost = set(acked) - live_prov - audited
        assert not lost, f"{len(lost)} acknowledged memories lost without an audited decision: {sorted(lost)[:5]}"
        assert store.json_bytes() == sum(json_size(e) for e in live)  # the stored sizes equal a recount
        runs = store.journal.runs()
        assert all(r.status == "done" for r in runs)
        before = [e.counted_fields() for e in store.entries()]
        last = Compressor(store, encoder=HashEncoder(), method=CampaignMethod(policy="final"),
                          merger=ConcatMerger()).run(budget=0.5)
        assert last.run_id is not None
        store.journal.undo(last.run_id)
        assert [e.counted_fields() for e in store.entries()] == before
    summary = (f"adds {len(acked)}, upkeep+cli runs {len(runs)}, cli compress ok {compress_runs} refused "
               f"{compress_refused}, kills {kills}, live {len(live)}, invariants: integrity, acknowledged adds "
               f"accounted ({len(set(acked) & live_prov)} live, {len(set(acked) & audited - live_prov)} audited), "
               f"sizes = recount, 0 search errors, undo restores; {adder_said}")
    print(summary, sorted(set(reasons)))
    record_property("soak_summary", summary)
