"""What full durability costs: add() latency and a compression with synchronous NORMAL vs FULL.

    python bench/durability.py

Same machine, same run, same data: 500 single-entry adds (each its own
commit) and a compression of 1,000 synthetic entries to 50% (model-free),
once per setting; reports medians and the FULL / NORMAL ratio. Writes
bench/results/durability.json.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from memrefine_edge import __version__  # noqa: E402
from memrefine_edge.core import Entry
from memrefine_edge.engine import (  # noqa: E402
    Compressor,  # noqa: E402
    PipelineConfig,
    build,
)
from memrefine_edge.eval._report import machine_info, write_json  # noqa: E402
from memrefine_edge.store import MemoryStore  # noqa: E402
from memrefine_edge.testing import FakeBackends  # noqa: E402

TOPICS = "tea coffee hiking paris guitar piano dog cat yoga novel sister concert garden beach museum".split()


def _entry(i: int) -> Entry:
    words = [TOPICS[(i * k) % len(TOPICS)] for k in (1, 3, 7)]
    return Entry(id=f"e{i}", content=f"Ana talked about {' and '.join(words)} on day {i % 97}.")


def measure(sync: str, folder: Path, n: int) -> dict:
    db = folder / f"{sync}-{n}.db"
    with MemoryStore(db, synchronous=sync) as store:
        lat = []
        for i in range(500):
            t = time.perf_counter()
            store.add(_entry(i))
            lat.append((time.perf_counter() - t) * 1000)
        store.add_many(_entry(i) for i in range(500, 1000))
        parts = build(PipelineConfig(judge="scorer"), backends=FakeBackends())
        t = time.perf_counter()
        report = Compressor(store, encoder=parts.encoder, method=parts.method, merger=parts.merger).run(budget=0.5)
        compress_s = time.perf_counter() - t
    return {"synchronous": sync, "add_ms_median": round(statistics.median(lat), 3),
            "add_ms_p99": round(sorted(lat)[int(len(lat) * 0.99)], 3), "compress_s": round(compress_s, 3),
            "decisions": report.decisions}


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="memrefine-bench-durability-") as tmp:
        rows = [measure(s, Path(tmp), n) for n, s in enumerate(("NORMAL", "FULL", "NORMAL", "FULL"))]
    by = {s: [r for r in rows if r["synchronous"] == s] for s in ("NORMAL", "FULL")}
    best = {s: min(v, key=lambda r: r["add_ms_median"]) for s, v in by.items()}
    ratio_add = best["FULL"]["add_ms_median"] / best["NORMAL"]["add_ms_median"]
    ratio_run = min(r["compress_s"] for r in by["FULL"]) / min(r["compress_s"] for r in by["NORMAL"])
    out = {"machine": machine_info(__version__), "loadavg": list(os.getloadavg()), "runs": rows,
           "full_over_normal_add_median": round(ratio_add, 2), "full_over_normal_compress": round(ratio_run, 2),
           "command": "python bench/durability.py"}
    for r in rows:
        print(f"{r['synchronous']:6} add median {r['add_ms_median']:.3f} ms, p99 {r['add_ms_p99']:.3f} ms; "
              f"compress 1,000 entries to 50% {r['compress_s']:.2f} s ({r['decisions']} decisions)")
    print(f"FULL / NORMAL: add {ratio_add:.2f}x, compress {ratio_run:.2f}x")
    dest = REPO / "bench" / "results" / "durability.json"
    write_json(dest, out)
    print(f"wrote {dest.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
