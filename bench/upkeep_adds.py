"""Add latency with upkeep: how long ``store.add()`` takes while Upkeep keeps the store under a size.

Run: ``.venv/bin/python bench/upkeep_adds.py`` (10,000 adds of the distinct-fact stream of
``bench/upkeep.py``, the real encoder and the default judge, set up as the docs' Upkeep example) or
e.g. ``--n 2000 --modes worker --budget-mode strict``. Writes ``bench/results/upkeep_adds.json``.

Each mode runs in a fresh process, on the same stream, with the same watermarks (high = 25% of the
stream's json size, low = 5/6 of high, as ``bench/upkeep.py``):

* ``none``: no upkeep: what an add costs on this machine at this moment (the floor);
* ``worker``: ``Upkeep(...)`` (the worker thread, the default);
* ``inline``: ``Upkeep(..., background=False)``: the pass runs inside the add that crosses the watermark.

Adds come back to back (``--pause-ms``: a pause between two, an assistant between turns); every add
is timed and the size read at its return (overshoot: bytes above the high watermark, against the
lag). At the end the worker is waited for (within the cap) and the size at idle read. A run stops at
its time cap between two adds. Nothing is asserted; the machine's load is recorded (other work on it
moves the tail latencies).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from upkeep import HIGH_SHARE, LOW_OF_HIGH, distinct_facts  # noqa: E402  (bench/ is first on sys.path)

RESULTS = Path(__file__).resolve().parent / "results" / "upkeep_adds.json"
MODES = ("none", "worker", "inline")


def _pct(values: list[float], q: float) -> float | None:
    """The ``q``-th percentile as the streaming evaluation and ``bench/upkeep.py`` take it (nearest rank)."""
    from memrefine_edge.eval import percentile

    value = percentile(values, q)
    return None if value is None else round(value, 3)


def child(spec: dict) -> dict:
    from memrefine_edge import (
        Compressor,
        Entry,
        GuardedMerger,
        MemoryStore,
        MemRefineMethod,
        OnnxEncoder,
        Upkeep,
        default_judge,
    )

    store = MemoryStore(spec["db"])
    compressor = Compressor(store, encoder=OnnxEncoder(threads=2), method=MemRefineMethod(judge=default_judge()),
                            merger=GuardedMerger(None), mode=spec["budget_mode"])
    high, low = spec["high"], spec["low"]
    upkeep = None
    if spec["mode"] != "none":
        upkeep = Upkeep(compressor, high_bytes=high, low_bytes=low, background=spec["mode"] == "worker").install()
    lag = upkeep.lag_bytes((high, low)) if upkeep is not None else None
    add_ms: list[float] = []
    over: list[int] = []
    pause = spec["pause_ms"] / 1000
    started = time.perf_counter()
    deadline = started + spec["cap_s"]
    for d in distinct_facts(spec["n"]):
        if time.perf_counter() >= deadline:
            break
        entry = Entry(id=d["id"], content=d["content"])
        t = time.perf_counter()
        store.add(entry)
        add_ms.append((time.perf_counter() - t) * 1000)
        over.append(store.running_size() - high)
        if pause:
            time.sleep(pause)
    adding_s = time.perf_counter() - started
    idle = upkeep.wait_idle(timeout=max(0.0, deadline - time.perf_counter())) if upkeep is not None else True
    reports = upkeep.reports if upkeep is not None else []
    out = {
        "adds": len(add_ms), "adding_s": round(adding_s, 1),
        "add_ms": {"p50": _pct(add_ms, 50), "p99": _pct(add_ms, 99), "p99.9": _pct(add_ms, 99.9),
                   "max": round(max(add_ms), 3) if add_ms else None,
                   "over_10ms": sum(x > 10 for x in add_ms), "over_100ms": sum(x > 100 for x in add_ms)},
        "lag_bytes": lag, "overshoot_at_add_max_bytes": max(over) if over else None,
        "adds_beyond_lag": sum(o > lag for o in over) if lag is not None else None,
        "waits": upkeep.waits if upkeep is not None else 0,
        "wait_timeouts": upkeep.wait_timeouts if upkeep is not None else 0,
        "idle_at_end": idle, "overshoot_at_idle_bytes": store.running_size() - high,
        "passes": len(reports), "passes_budget_met": sum(r.budget_met for r in reports),
        "decisions": sum(r.decisions for r in reports),
        "stop_reasons": sorted({str(r.stop_reason) for r in reports}),
        "blocked_by": upkeep.blocked_by if upkeep is not None else None,
        "error": repr(upkeep.error) if upkeep is not None and upkeep.error else None,
        "elapsed_s": round(time.perf_counter() - started, 1),
    }
    store.close()
    return out


def run_child(mode: str, args: argparse.Namespace, high: int, low: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="memrefine-bench-adds-") as tmp:
        spec = {"mode": mode, "n": args.n, "cap_s": args.cap_s, "high": high, "low": low, "pause_ms": args.pause_ms,
                "budget_mode": args.budget_mode, "db": str(Path(tmp) / "store.db")}
        row: dict = {"mode": mode, "load_start": [round(x, 2) for x in os.getloadavg()]}
        proc = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], capture_output=True,
                              text=True, cwd=REPO, timeout=args.cap_s * 2 + 300)
        if proc.returncode != 0:
            sys.stderr.write(proc.stderr[-3000:])
            row["error"] = (proc.stderr.strip().splitlines() or ["failed"])[-1]
        else:
            row.update(json.loads(proc.stdout.strip().splitlines()[-1]))
        row["load_end"] = [round(x, 2) for x in os.getloadavg()]
        return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--budget-mode", default="paper", choices=("paper", "strict"))
    ap.add_argument("--pause-ms", type=float, default=0.0)
    ap.add_argument("--cap-s", type=float, default=900.0)
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--child")
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return 0
    from memrefine_edge import Entry, MemoryStore

    with tempfile.TemporaryDirectory() as tmp, MemoryStore(Path(tmp) / "whole.db") as whole:
        whole.add_many([Entry(id=d["id"], content=d["content"]) for d in distinct_facts(args.n)])
        stream_bytes = whole.json_bytes()
    high = int(stream_bytes * HIGH_SHARE)
    low = int(high * LOW_OF_HIGH)
    rows = []
    for mode in args.modes.split(","):
        row = run_child(mode, args, high, low)
        rows.append(row)
        a = row.get("add_ms", {})
        print(f"{mode}: {row.get('adds')} adds, add ms p50 {a.get('p50')} p99 {a.get('p99')} max {a.get('max')}; "
              f"passes {row.get('passes')}, waits {row.get('waits')}, overshoot at add max "
              f"{row.get('overshoot_at_add_max_bytes')} (lag {row.get('lag_bytes')}), at idle "
              f"{row.get('overshoot_at_idle_bytes')}, load {row['load_start']} -> {row['load_end']}", flush=True)
    argv_shown = " ".join(argv if argv is not None else sys.argv[1:])
    result = {"command": f"python bench/upkeep_adds.py {argv_shown}".strip(), "n": args.n,
              "budget_mode": args.budget_mode, "pause_ms": args.pause_ms, "cap_s": args.cap_s,
              "stream_json_bytes": stream_bytes, "high_bytes": high, "low_bytes": low,
              "machine": {"cores": os.cpu_count(), "python": platform.python_version(),
                          "platform": platform.platform()}, "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
