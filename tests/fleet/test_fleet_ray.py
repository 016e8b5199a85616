"""A fleet of real small stores on a local Ray with 2 CPUs: budgets met, reruns change nothing, a killed worker's
store ends as if never killed, a locked store skipped, bad paths reported while the rest succeed."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from memrefine_edge.fleet import Outcome, StoreJob, compress_many
from memrefine_edge.store import MemoryStore, RunLock
from tests.support.crash_fakes import campaign_entries, check_invariants
from tests.support.fleet_fakes import KillOnce, backends, compress_here, make_fleet, snapshot

pytestmark = pytest.mark.usefixtures("local_ray")


def _run(paths, budget="0.6", **kw):
    kw.setdefault("backends", backends())
    return {Path(r.path).name: r for r in compress_many(paths, budget=budget, **kw)}


def _references(paths: list[Path], tmp_path: Path, budget: str = "0.6") -> dict[str, tuple]:
    """Each store compressed in this process, uninterrupted, on a copy: what the fleet must leave."""
    out = {}
    for path in paths:
        copy = tmp_path / "reference" / path.name
        copy.parent.mkdir(exist_ok=True)
        shutil.copy(path, copy)
        compress_here(copy, budget)
        out[path.name] = snapshot(copy)
    return out


def test_a_fleet_meets_every_budget_as_one_store_would_and_a_second_run_changes_nothing(tmp_path):
    paths = make_fleet(tmp_path / "stores", 6)
    reference = _references(paths, tmp_path)
    rows = _run(paths)
    assert sorted(rows) == sorted(p.name for p in paths)
    for name, row in rows.items():
        assert row.outcome is Outcome.DONE, row
        assert row.budget_met and row.after_bytes <= row.target_bytes < row.before_bytes, row
        assert row.decisions > 0 and row.run_id and row.error is None
        assert snapshot(tmp_path / "stores" / name) == reference[name]  # the compression a user runs
    files = {p.name: p.read_bytes() for p in paths}

    again = _run(paths)
    for name, row in again.items():
        assert row.outcome is Outcome.DONE and row.budget_met, row
        assert (row.stop_reason, row.decisions, row.run_id) == ("already within budget", 0, None)
        assert row.before_bytes == row.after_bytes == rows[name].after_bytes
    assert {p.name: p.read_bytes() for p in paths} == files  # not a byte of any store changed
    assert {p.name: snapshot(p) for p in paths} == reference


def test_a_worker_killed_mid_store_is_retried_and_the_store_ends_as_an_uninterrupted_run(tmp_path):
    paths = make_fleet(tmp_path / "stores", 4)
    reference = _references(paths, tmp_path)
    marker = tmp_path / "killed.pid"
    rows = _run(paths, backends=backends(on_decide=KillOnce(marker, after=10)), max_retries=2)
    killed = int(marker.read_text())  # one worker died, mid-store
    assert all(r.outcome is Outcome.DONE and r.budget_met for r in rows.values()), rows
    assert killed not in {r.pid for r in rows.values()}  # its store's row came from the retry
    resumed = [name for name, r in rows.items() if r.resumed]
    assert len(resumed) == 1, rows  # the killed store's interrupted run continued: not compressed twice
    for path in paths:
        got = snapshot(path)
        assert got == reference[path.name], path.name  # same export, same decisions, one run
        assert got[2] == 1
    n = int(resumed[0][4:7])
    check_invariants(tmp_path / "stores" / resumed[0], campaign_entries(50, n), reference[resumed[0]][1])


def test_a_store_held_by_another_writers_run_lock_is_skipped_and_the_others_done(tmp_path):
    paths = make_fleet(tmp_path / "stores", 3)
    held = paths[1]
    before = snapshot(held)
    with RunLock(held):  # another process (here: this one) is compressing it
        rows = _run(paths)
    assert rows[held.name].outcome is Outcome.SKIPPED
    assert "another compression is running" in rows[held.name].error
    assert snapshot(held) == before
    assert [rows[p.name].outcome for p in (paths[0], paths[2])] == [Outcome.DONE, Outcome.DONE]
    assert _run([held])[held.name].budget_met  # the next job does it


def test_a_store_its_assistant_keeps_busy_is_skipped_after_the_busy_timeout_not_waited_on(tmp_path):
    paths = make_fleet(tmp_path / "stores", 2)
    held = paths[0]
    writer = sqlite3.connect(held, isolation_level=None)  # the assistant, in the middle of a long write
    try:
        writer.execute("BEGIN IMMEDIATE")
        rows = _run(paths, store_options={"busy_timeout_ms": 500})
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert rows[held.name].outcome is Outcome.SKIPPED and "locked by another process" in rows[held.name].error
    assert rows[paths[1].name].outcome is Outcome.DONE
    assert snapshot(held)[2] == 0  # no run was started on it


def test_a_store_that_runs_out_of_room_fails_and_the_others_go_on(tmp_path):
    small = make_fleet(tmp_path / "small", 2, n=30)
    big = make_fleet(tmp_path / "big", 1, n=150)[0]
    before = snapshot(big)
    # the file size cap every command takes (MEMREFINE_MAX_FILE_BYTES): a full disk for the big store only
    rows = {Path(r.path): r for r in compress_many([small[0], big, small[1]], budget="0.6", backends=backends(),
                                                   store_options={"max_file_bytes": 70_000})}
    assert rows[big].outcome is Outcome.FAILED and rows[big].error.startswith("StoreFullError: ")
    assert snapshot(big) == before  # nothing was written
    assert all(rows[p].outcome is Outcome.DONE and rows[p].budget_met for p in small)


def _corrupt_copy(src: Path, dst: Path) -> Path:
    data = bytearray(src.read_bytes())
    page = 4096
    for i in range(page, len(data), page):  # every page but the header page: b-tree pages destroyed
        data[i:i + 64] = b"\xff" * 64
    dst.write_bytes(bytes(data))
    return dst


def test_bad_paths_are_reported_and_the_rest_succeed(tmp_path):
    stores = tmp_path / "stores"
    good = make_fleet(stores, 3)
    (stores / "notes.txt").write_text("not a store\n")
    (stores / "folder.db").mkdir()
    corrupt = _corrupt_copy(make_fleet(tmp_path / "spare", 1)[0], stores / "corrupt.db")
    bad_line = StoreJob(path="{oops", source="list.jsonl:4", problem="list.jsonl:4: not a JSON object (...)")
    jobs = [good[0], stores / "missing.db", stores / "notes.txt", good[1], stores / "folder.db", corrupt, bad_line,
            good[2]]
    rows = {r.path: r for r in compress_many(jobs, budget="0.6", backends=backends())}
    assert len(rows) == len(jobs)
    for path in good:
        assert rows[str(path)].outcome is Outcome.DONE and rows[str(path)].budget_met
    why = {Path(p).name: r.error for p, r in rows.items() if r.outcome is Outcome.FAILED}
    assert sorted(why) == ["corrupt.db", "folder.db", "missing.db", "notes.txt", "{oops"]
    assert "no memory store" in why["missing.db"]
    assert "not a memory store" in why["notes.txt"] or "not an SQLite database" in why["notes.txt"]
    assert "folder" in why["folder.db"]
    assert why["corrupt.db"]  # SQLite's own words for it
    assert why["{oops"].startswith("list.jsonl:4")
    assert not (stores / "notes.txt.lock").exists() and not (stores / "missing.db.lock").exists()
    assert (stores / "notes.txt").read_text() == "not a store\n"


def test_a_manifest_budget_wins_over_the_jobs(tmp_path):
    paths = make_fleet(tmp_path / "stores", 2)
    rows = _run([StoreJob(path=str(paths[0]), budget="0.8"), paths[1]], budget="0.5")
    ratios = {name: r.target_bytes / r.before_bytes for name, r in rows.items()}
    assert ratios[paths[0].name] == pytest.approx(0.8, abs=1e-3)
    assert ratios[paths[1].name] == pytest.approx(0.5, abs=1e-3)
    with MemoryStore(paths[0], create=False) as store:
        from memrefine_edge.store import get_budget

        assert get_budget(store).spec == "0.8"  # it became the store's standing budget


def test_stores_are_read_from_the_input_a_window_at_a_time(tmp_path):
    paths = make_fleet(tmp_path / "stores", 8, n=20)
    pulled = [0]

    def lazily():
        for path in paths:
            pulled[0] += 1
            yield path

    seen = 0
    for _row in compress_many(lazily(), budget="0.6", backends=backends(), window=2):
        seen += 1
        # at most the window in flight, plus the one read that found it full
        assert pulled[0] - seen <= 2, (pulled[0], seen)
    assert seen == len(paths)
