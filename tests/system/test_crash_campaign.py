"""Crash campaign: SIGKILL a compression anywhere, check what it left, resume.

Commands (:data:`PAPER`: deletes, merges, preserves; :data:`STRICT`: the
same plus a long tail of strict-budget evictions; :data:`LIVE`: the default mode's
bounded pairs, then evictions) are run by
``tests/support/crash_worker.py`` in a subprocess and killed:

* from outside, at seeded pseudo-random points: the worker stops at a random
  decision N, is released, and is SIGKILLed after a random delay while it
  runs on (it cannot get past a fence a few decisions later, so every kill hits
  a live process mid-run); each store is killed three times in a row, then the
  same command is given again;
* from inside, at named phases (judge decided, inside the merge call, inside
  the decision's transaction just before COMMIT, right after COMMIT) and
  before the K-th SQL statement for seeded random K.

After every kill: integrity_check is ok; the journal and the entries agree
(no half decision); every fact (provenance id) of the original store is in a
live entry or in an entry removed by an audited delete/evict; the decisions so
far are a prefix of the uninterrupted run's; and resuming (a copy, in this
process) reaches exactly the uninterrupted run's store and journal. Where the
kills land varies with timing; what is asserted does not.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from memrefine_edge.store import MemoryStore
from tests.support.crash_fakes import (
    Config,
    campaign_entries,
    check_invariants,
    compress_in_process,
    decision_keys,
    export,
    make_campaign_store,
)
from tests.support.fakes import interrupt_after_evictions

HERE = Path(__file__).resolve().parents[1] / "support"  # the workers and fakes run in subprocesses
WORKER = HERE / "crash_worker.py"
PAPER = Config("paper", budget=0.45)
STRICT = Config("strict", budget=0.3, mode="strict", min_similarity=0.5)
# The default mode: each entry against its nearest neighbours, then evictions to a hard budget.
LIVE = Config("live", budget=0.3, mode="live")
# Decisions sharing transactions (a window longer than the whole run: a kill loses everything uncommitted).
GROUPED = Config("grouped", budget=0.45, commit_window=10.0)
TIMEOUT = 60


class Reference:
    """The uninterrupted run of one command, and the pristine store it starts from."""

    def __init__(self, cfg: Config, root: Path) -> None:
        self.cfg = cfg
        self.original_path = root / f"{cfg.name}-original.db"
        make_campaign_store(self.original_path, n=cfg.n, seed=cfg.seed)
        self.original = campaign_entries(cfg.n, cfg.seed)
        path = root / f"{cfg.name}-reference.db"
        copy_db(self.original_path, path)
        done = worker(path, cfg, "--count-sql")
        assert done.returncode == 0, done.stderr
        self.sql_statements = int(done.stdout.split("sql ")[-1])
        with MemoryStore(path, create=False) as s:
            self.export = export(s)
            self.decisions = decision_keys(s)
            self.preserved = s.journal.preserved_pairs()
            [run] = s.journal.runs()
            self.preserve_counts = run.preserved
            audited = {d.step: d.action for d in s.journal.decisions()}
            actions = [audited.get(step, "preserve") for step in range(run.cursor)]  # a preserve: no audit row
        self.n_steps = len(actions)
        self.steps = {a: [i for i, x in enumerate(actions) if x == a] for a in set(actions)}
        self.pair_steps = len(actions) - len(self.steps.get("evict", []))

    def check(self, path: Path, tmp: Path) -> dict:
        """Every invariant, then resume a copy to the end: it must be the uninterrupted run."""
        summary = check_invariants(path, self.original, self.decisions, self.preserved)
        copy = tmp / (path.stem + "-resumed.db")
        copy_db(path, copy)
        if summary["unfinished"] or summary["runs"] == 0:
            compress_in_process(copy, self.cfg)
        self.assert_same(copy)
        copy.unlink()
        return summary

    def assert_same(self, path: Path) -> None:
        with MemoryStore(path, create=False) as s:
            assert s.integrity_check() == "ok"
            assert s.journal.unfinished_run() is None and len(s.journal.runs()) == 1
            assert decision_keys(s) == self.decisions
            assert s.journal.preserved_pairs() == self.preserved
            assert s.journal.runs()[0].preserved == self.preserve_counts
            assert export(s) == self.export


def copy_db(src: Path, dst: Path) -> None:
    """A consistent copy (committed state only) through SQLite's backup API."""
    for p in (dst, Path(f"{dst}-wal"), Path(f"{dst}-shm")):
        p.unlink(missing_ok=True)
    source, target = sqlite3.connect(src), sqlite3.connect(dst)
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()


def worker(db: Path, cfg: Config, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(WORKER), str(db), *cfg.argv(), *extra],
                          capture_output=True, text=True, timeout=TIMEOUT)


def kill_from_outside(db: Path, cfg: Config, release: int, delay_s: float, window: int) -> None:
    """Start the command, let it reach decision ``release``, release it, SIGKILL it ``delay_s`` later."""
    proc = subprocess.Popen([sys.executable, str(WORKER), str(db), *cfg.argv(), "--release", str(release),
                             "--window", str(window)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watchdog = threading.Timer(TIMEOUT, proc.kill)
    watchdog.start()  # a worker that never reaches the release point is killed, and the test fails
    try:
        while True:
            line = proc.stdout.readline()
            assert line, f"worker ended before decision {release}: {proc.stderr.read()}"
            if line.strip() == f"at {release}":
                break
        proc.stdin.write("go\n")
        proc.stdin.flush()
        if delay_s:
            time.sleep(delay_s)
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait() == -signal.SIGKILL  # the worker never exits by itself: every kill hits
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stdin.close()
        proc.stderr.close()


@pytest.fixture(scope="module")
def refs(tmp_path_factory):
    root = tmp_path_factory.mktemp("crash-refs")
    return {cfg.name: Reference(cfg, root) for cfg in (PAPER, STRICT, GROUPED, LIVE)}


def test_the_commands_exercise_every_kind_of_decision(refs, tmp_path):
    paper, strict = refs["paper"], refs["strict"]
    assert {"delete", "merge", "preserve"} <= set(paper.steps) and "evict" not in paper.steps
    assert {"delete", "merge", "preserve", "evict"} <= set(strict.steps)
    assert paper.pair_steps >= 30 and len(strict.steps["evict"]) >= 10
    # Sharing transactions changes no decision and no entry, and saves statements (BEGIN, COMMIT).
    grouped = refs["grouped"]
    assert grouped.decisions == paper.decisions and grouped.export == paper.export
    assert grouped.sql_statements < paper.sql_statements
    for ref in (paper, strict):
        # The in-process command the checks resume with is the worker's command.
        path = tmp_path / f"{ref.cfg.name}-in-process.db"
        copy_db(ref.original_path, path)
        compress_in_process(path, ref.cfg)
        ref.assert_same(path)


@pytest.mark.parametrize("interrupt_at", [2, 6])
def test_an_interrupted_eviction_resumes_in_the_order_it_started_with(refs, tmp_path, interrupt_at):
    """Fast, in-process regression: strict-mode evictions stopped (Ctrl-C) after a few, then resumed.

    Each eviction changes the nearest neighbours of the entries left; the
    resumed run must still evict in the order an uninterrupted run takes.
    """
    ref = refs["strict"]
    path = tmp_path / "evict.db"
    copy_db(ref.original_path, path)
    with pytest.raises(KeyboardInterrupt):
        compress_in_process(path, ref.cfg, progress=interrupt_after_evictions(interrupt_at))
    summary = check_invariants(path, ref.original, ref.decisions, ref.preserved)
    assert summary["decisions"] == ref.steps["evict"][0] + interrupt_at and summary["unfinished"]
    compress_in_process(path, ref.cfg)
    ref.assert_same(path)


def in_parallel(fn, items) -> list:
    """Independent stores, two at a time (CI has two cores); the first failure is raised."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(fn, items))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["paper", "strict", "live"])
def test_sigkill_from_outside_at_random_points(refs, tmp_path, name):
    """4 stores x 3 kills each at seeded random decisions and delays, then the command once more.

    Kill k of 3 is released at a random decision in the k-th third of the run
    and can get at most ``window`` decisions further, so it never reaches the
    next third nor the end: every kill is mid-run and hits a live process.
    """
    ref = refs[name]
    window = 6
    third = (ref.n_steps - 1) // 3
    assert third > window + 2

    def chain(i: int) -> None:
        rng = random.Random(f"campaign-{name}-{i}")
        db = tmp_path / f"{name}-{i}.db"
        copy_db(ref.original_path, db)
        for k in range(3):
            release = rng.randint(k * third, (k + 1) * third - window - 1)
            kill_from_outside(db, ref.cfg, release, 0.002 * rng.random() ** 2, window)
            summary = ref.check(db, tmp_path)
            assert summary["unfinished"] or summary["runs"] == 0, (i, release)
            assert release <= summary["decisions"] <= release + window
            landed.append(summary["decisions"] - release)
        again = worker(db, ref.cfg)  # the same command, uninterrupted this time
        assert again.returncode == 0, again.stderr
        ref.assert_same(db)

    landed: list[int] = []
    in_parallel(chain, range(4))
    assert len(landed) == 12  # for each command
    print(f"{name}: decisions past the release when killed: {sorted(landed)}")


_PHASES = ("judge", "merge", "commit", "after")  # the order they come in within one decision


def _phase_kills(ref) -> list[str]:
    """Kill points in run order: each one is reached by the command rerun after the previous kill."""
    s = ref.steps
    if ref.cfg.mode == "paper":
        points = [
            "judge:0", "commit:0", f"merge:{s['merge'][0]}", f"after:{s['merge'][0]}",
            f"commit:{s['delete'][1]}", f"commit:{s['merge'][2]}", f"judge:{s['preserve'][1]}",
            f"commit:{s['preserve'][2]}", f"merge:{s['merge'][-1]}", f"after:{s['delete'][-1]}",
            f"commit:{ref.n_steps - 1}", f"after:{ref.n_steps - 1}",
        ]
    else:
        ev = s["evict"]
        points = [
            f"merge:{s['merge'][1]}", f"judge:{ref.pair_steps - 1}", f"after:{ref.pair_steps - 1}",
            f"commit:{ev[0]}", f"after:{ev[1]}", f"commit:{ev[len(ev) // 2]}", f"commit:{ev[-1]}", f"after:{ev[-1]}",
        ]
    key = lambda p: (int(p.split(":")[1]), _PHASES.index(p.split(":")[0]))  # noqa: E731
    return sorted(set(points), key=key)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["paper", "strict"])
def test_sigkill_at_each_phase_then_rerun_gives_the_same_store(refs, tmp_path, name):
    """Named phases, in order, on one store: each kill hits the command rerun after the previous one."""
    ref = refs[name]
    db = tmp_path / f"{name}-phases.db"
    copy_db(ref.original_path, db)
    for kill in _phase_kills(ref):
        killed = worker(db, ref.cfg, "--kill", kill)
        assert killed.returncode == -signal.SIGKILL, (kill, killed.stdout, killed.stderr)
        summary = ref.check(db, tmp_path)
        step = int(kill.split(":")[1])
        phase = kill.split(":")[0]
        # judge, merge and commit leave the decision undone; after leaves it done
        assert summary["decisions"] == step + (phase == "after"), kill
        assert summary["unfinished"], kill  # every phase comes before the run is marked done
    again = worker(db, ref.cfg)
    assert again.returncode == 0, again.stderr
    ref.assert_same(db)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["paper", "strict", "grouped", "live"])
def test_sigkill_before_a_random_sql_statement(refs, tmp_path, name):
    """Before the K-th statement, K seeded-random over the whole run: inside transactions, between, at the end.

    The resume is the in-process one of :meth:`Reference.check` (the rerun as a
    command is covered by the chains above).
    """
    ref = refs[name]
    rng = random.Random(f"campaign-sql-{name}")

    def kill_at(k: int) -> None:
        db = tmp_path / f"{name}-sql{k}.db"
        copy_db(ref.original_path, db)
        killed = worker(db, ref.cfg, "--kill", f"sql:{k}")
        assert killed.returncode == -signal.SIGKILL, (k, killed.stderr)
        ref.check(db, tmp_path)

    # The last statement is the checkpoint when the store is closed, after the run is done.
    in_parallel(kill_at, sorted(rng.sample(range(1, ref.sql_statements), 7)) + [ref.sql_statements])
