"""Fleet benchmark: many stores compressed by a sequential loop and by the fleet job on a local Ray.

Run: ``.venv/bin/python bench/fleet.py`` (200 stores of 300-700 entries, the real encoder and the
default judge; about an hour on 2 idle cores) or ``--stores 20`` for a quick look. Needs the fleet
extra (Ray) and ``../shared/data/locomo`` (the synthetic stores take its vocabulary). Writes
``bench/results/fleet.json`` (``--out`` for another name).

The stores are synthetic but shaped like the LoCoMo dev conversations (``bench/scale.py``'s
``synthetic_memories``: corpus word frequencies and turn lengths, 25% repeated and 35% paraphrased
memories), one seed per store, a size drawn from 300-700 entries. Every store is compressed to 50%
of its json size (``--budget``) in the default (live) mode with the default pipeline (the int8 MiniLM encoder
with one thread, the model-free judge, the deterministic merge), each run on a fresh copy of the
same 200 stores, each in a process of its own:

* ``sequential``: one process, a loop calling ``engine.compress_store`` store after store (the
  encoder loaded once and shared, one thread: the same work per store as a fleet task);
* ``sequential_2threads``: the same loop with the encoder's default threads (``min(2, cores)``):
  what ``memrefine compress`` in a loop would use;
* ``fleet_1cpu`` / ``fleet_2cpu``: ``fleet.compress_many`` on a local Ray started with 1 / 2 CPUs;
* ``fleet_2cpu_kills``: as ``fleet_2cpu`` while a worker running a store is SIGKILLed every 2-6 s
  (random): Ray retries its store and the store's run continues from its last commit.

Per run: wall seconds (Ray's start apart), stores/s, seconds per store in the task, stores done and
budgets met, and each store's export compared with the ``sequential`` run's (the fleet must end
every store exactly as the loop does, the killed ones included; each must have one run). Ray's
overhead per task, two ways: the wall time of 2-CPU-seconds not spent in tasks, per store
(``(cpus * wall - sum of task seconds) / stores``), and the round trip of an empty task. Peak RSS:
the loop's process, and each Ray worker's (``ru_maxrss`` each row reports). The machine's load
average is recorded at the start and end of each run: the 2 cores are shared with other jobs, so
the speed-up is reported, not asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from _proc import status_mb  # noqa: E402  (bench/ is on sys.path)

RESULTS = REPO / "bench" / "results" / "fleet.json"
RUNS = ("sequential", "sequential_2threads", "fleet_1cpu", "fleet_2cpu", "fleet_2cpu_kills")
TARGET_SPEEDUP = 1.7


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


# --- the stores ----------------------------------------------------------------------------


def build(folder: Path, stores: int, lo: int, hi: int, seed: int) -> list[dict]:
    """``stores`` synthetic stores in ``folder`` (sizes drawn from lo..hi entries)."""
    from _locomo import dev_json
    from scale import _entry, synthetic_memories

    from memrefine_edge.store import MemoryStore

    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    corpus = dev_json()
    out = []
    for i in range(stores):
        n = rng.randint(lo, hi)
        path = folder / f"user{i:04d}.db"
        with MemoryStore(path) as store:
            store.add_many([_entry(r) for r in synthetic_memories(n, seed=seed * 100_000 + i, path=corpus)])
        out.append({"name": path.name, "entries": n})
    return out


def _copy(template: Path, folder: Path) -> list[Path]:
    shutil.copytree(template, folder)
    return sorted(folder.glob("*.db"))


def _export(path: Path) -> tuple[list[dict], int]:
    from memrefine_edge.store import MemoryStore

    with MemoryStore(path, create=False, read_only=True) as store:
        return [e.counted_fields() for e in store.entries()], len(store.journal.runs())


# --- one run, in a process of its own ------------------------------------------------------


def _sequential(paths: list[Path], budget: str, threads: int | None) -> dict:
    from memrefine_edge.engine import Backends, PipelineConfig, compress_store
    from memrefine_edge.store import parse_budget

    ratio, size = parse_budget(budget)
    config = PipelineConfig(threads=threads)
    encoder = Backends().encoder(config)
    rows = []
    start = time.perf_counter()
    for path in paths:
        t = time.perf_counter()
        report = compress_store(path, budget=ratio, budget_bytes=size, config=config, encoder=encoder).report
        rows.append({"seconds": time.perf_counter() - t, "budget_met": report.budget_met, "done": True,
                     "decisions": report.decisions})
    return {"wall_s": time.perf_counter() - start, "rows": rows, "peak_rss_mb": {"loop": round(status_mb("VmHWM"), 1)}}


def _running_workers() -> list[int]:
    """Ray workers running a store now (Ray names a worker's process after the task it runs)."""
    import psutil

    out = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmd = proc.info["cmdline"] or []
        if cmd and cmd[0].startswith("ray::compress_one"):
            out.append(proc.info["pid"])
    return out


def _killer(stop: threading.Event, kills: list[dict], seed: int) -> None:
    rng = random.Random(seed)
    while not stop.wait(rng.uniform(2.0, 6.0)):
        pids = _running_workers()
        if pids:
            pid = rng.choice(pids)
            try:
                os.kill(pid, 9)
                kills.append({"at_s": round(time.monotonic(), 2), "pid": pid})
            except ProcessLookupError:
                pass


def _empty() -> int:
    return 0


def _fleet(paths: list[Path], budget: str, cpus: int, kill: bool, seed: int) -> dict:
    import logging

    import ray

    from memrefine_edge.fleet import compress_many

    t = time.perf_counter()
    ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    startup = time.perf_counter() - t
    # Ray's own cost of a task: empty tasks, once the workers are up.
    empty = ray.remote(num_cpus=1)(_empty)
    ray.get([empty.remote() for _ in range(2 * cpus)])
    t = time.perf_counter()
    ray.get([empty.remote() for _ in range(200)])
    empty_ms = (time.perf_counter() - t) / 200 * 1000 * cpus
    stop, kills = threading.Event(), []
    killer = threading.Thread(target=_killer, args=(stop, kills, seed), daemon=True) if kill else None
    start = time.perf_counter()
    if killer:
        killer.start()
    rows = []
    try:
        for row in compress_many(paths, budget=budget, max_retries=10):
            rows.append({"seconds": row.seconds, "budget_met": bool(row.budget_met), "done": row.outcome == "done",
                         "decisions": row.decisions, "resumed": row.resumed, "pid": row.pid,
                         "peak_rss_mb": row.peak_rss_mb, "error": row.error})
    finally:
        stop.set()
    wall = time.perf_counter() - start
    ray.shutdown()
    workers: dict[int, float] = {}
    for r in rows:
        workers[r["pid"]] = max(workers.get(r["pid"], 0.0), r["peak_rss_mb"] or 0.0)
    rss = sorted(workers.values())
    return {"wall_s": wall, "ray_start_s": round(startup, 2), "empty_task_ms": round(empty_ms, 2), "rows": rows,
            "kills": len(kills), "peak_rss_mb": {"workers": len(rss), "max": max(rss, default=None),
                                                 "median": statistics.median(rss) if rss else None}}


def child(spec: dict) -> dict:
    paths = [Path(p) for p in spec["paths"]]
    load = _load()
    if spec["run"].startswith("sequential"):
        out = _sequential(paths, spec["budget"], 1 if spec["run"] == "sequential" else None)
    else:
        out = _fleet(paths, spec["budget"], 1 if spec["run"] == "fleet_1cpu" else 2, spec["run"].endswith("kills"),
                     spec["seed"])
    out["load_start"], out["load_end"] = load, _load()
    return out


# --- the parent ----------------------------------------------------------------------------


def _summary(name: str, out: dict, stores: int, cpus: int) -> dict:
    rows = out.pop("rows")
    secs = sorted(r["seconds"] for r in rows)
    task_s = sum(secs)
    res = {
        "wall_s": round(out["wall_s"], 2), "stores_per_s": round(stores / out["wall_s"], 4),
        "stores_done": sum(r["done"] for r in rows), "budget_met": sum(r["budget_met"] for r in rows),
        "decisions": sum(r["decisions"] for r in rows), "task_s_total": round(task_s, 1),
        "task_s_p50": round(secs[len(secs) // 2], 3), "task_s_p90": round(secs[int(len(secs) * 0.9)], 3),
        "errors": sorted({r["error"] for r in rows if r.get("error")})[:5],
        **{k: v for k, v in out.items() if k != "wall_s"},
    }
    if name.startswith("fleet"):
        res["stores_per_s_with_ray_start"] = round(stores / (out["wall_s"] + out["ray_start_s"]), 4)
        res["overhead_per_task_s"] = round((cpus * out["wall_s"] - task_s) / stores, 3)
        res["resumed"] = sum(bool(r.get("resumed")) for r in rows)
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stores", type=int, default=200)
    ap.add_argument("--min-entries", type=int, default=300)
    ap.add_argument("--max-entries", type=int, default=700)
    ap.add_argument("--budget", default="0.5")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runs", default=",".join(RUNS), help=f"which runs, of {', '.join(RUNS)}")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(json.loads(Path(args.child).read_text()))))
        return 0
    runs = [r for r in args.runs.split(",") if r]
    if "sequential" not in runs:
        runs.insert(0, "sequential")  # the reference every other run is compared with
    work = Path(tempfile.mkdtemp(prefix="memrefine-fleet-bench-"))
    result: dict = {
        "command": "python bench/fleet.py " + " ".join(a for a in (argv if argv is not None else sys.argv[1:])),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "stores": args.stores, "entries": [args.min_entries, args.max_entries], "budget": args.budget,
        "mode": "live", "pipeline": "default (int8 MiniLM encoder, model-free judge, deterministic merge)",
        "load_start": _load(), "runs": {},
    }
    try:
        import ray

        result["ray"] = ray.__version__
        t = time.perf_counter()
        info = build(work / "template", args.stores, args.min_entries, args.max_entries, args.seed)
        result["build_s"] = round(time.perf_counter() - t, 1)
        result["entries_total"] = sum(s["entries"] for s in info)
        reference: dict[str, tuple] = {}
        for name in runs:
            folder = work / name
            paths = _copy(work / "template", folder)
            spec = work / f"{name}.json"
            spec.write_text(json.dumps({"run": name, "paths": [str(p) for p in paths], "budget": args.budget,
                                        "seed": args.seed}))
            print(f"[fleet bench] {name}: {len(paths)} stores, load {_load()}", file=sys.stderr, flush=True)
            proc = subprocess.run([sys.executable, __file__, "--child", str(spec)], capture_output=True, text=True,
                                  cwd=REPO)
            if proc.returncode:
                sys.exit(f"{name} failed:\n{proc.stderr[-3000:]}")
            out = json.loads(proc.stdout.strip().splitlines()[-1])
            cpus = 2 if name in ("fleet_2cpu", "fleet_2cpu_kills", "sequential_2threads") else 1
            res = _summary(name, out, len(paths), cpus)
            exports = {p.name: _export(p) for p in paths}
            if name == "sequential":
                reference = exports
            res["stores_equal_to_sequential"] = sum(exports[k][0] == reference[k][0] for k in reference)
            res["stores_with_one_run"] = sum(v[1] == 1 for v in exports.values())
            result["runs"][name] = res
            print(f"[fleet bench] {name}: {json.dumps(res)}", file=sys.stderr, flush=True)
            if name != "sequential":
                shutil.rmtree(folder)
        seq = result["runs"]["sequential"]["stores_per_s"]
        result["speedup_vs_sequential"] = {k: round(v["stores_per_s"] / seq, 3) for k, v in result["runs"].items()}
        if "fleet_2cpu" in result["runs"]:
            got = result["speedup_vs_sequential"]["fleet_2cpu"]
            result["target"] = {"fleet_2cpu_vs_sequential": TARGET_SPEEDUP, "met": got >= TARGET_SPEEDUP}
        result["load_end"] = _load()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("speedup_vs_sequential", "target") if k in result}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
