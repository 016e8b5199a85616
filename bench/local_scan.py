"""Live mode's rescans: screening a few stale rows against int8 codes, by integer products or by decoding.

    python bench/local_scan.py [--n 100000] [--repeats 5]

A removal makes the changed entries that listed the removed one scan again: a few rows against
every live row. ``LocalPairs`` screens up to a handful of rows against the store's int8 codes by
exact integer products (the codes are never decoded) and more rows with BLAS on decoded rows. This
measures one ``_scan`` of 1, 4, 8 and 64 rows both ways, in the same run (the BLAS way forced by
setting the row limit to 0), on random int8 codes at the encoder's width (384), best of
``--repeats``. Writes ``bench/results/local_scan.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

import memrefine_edge.index._local as local
from memrefine_edge.index import LocalPairs

OUT = Path(__file__).resolve().parent / "results" / "local_scan.json"


def best_ms(queue: LocalPairs, rows: list[int], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        queue._scan(rows)
        best = min(best, time.perf_counter() - t)
    return round(best * 1000, 2)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    codes = rng.integers(-127, 128, size=(args.n, 384), dtype=np.int8)
    scales = rng.random(args.n).astype(np.float32) * 0.01 + 0.001
    queue = LocalPairs(list(range(args.n)), codes, scales=scales, k=8, changed=[])
    limit = local._INT8_SCREEN_ROWS
    rows_out = []
    for m in (1, 4, 8, 64):
        rows = list(range(m))
        local._INT8_SCREEN_ROWS = 0
        blas = best_ms(queue, rows, args.repeats)
        local._INT8_SCREEN_ROWS = 1_000_000
        ints = best_ms(queue, rows, args.repeats)
        local._INT8_SCREEN_ROWS = limit
        used = best_ms(queue, rows, args.repeats)
        rows_out.append({"rows": m, "decode_blas_ms": blas, "int8_products_ms": ints, "default_ms": used,
                         "int8_over_blas": round(ints / blas, 2)})
        print(json.dumps(rows_out[-1]), flush=True)
    result = {"command": "python bench/local_scan.py " + " ".join(argv if argv is not None else sys.argv[1:]),
              "n": args.n, "dim": 384, "int8_screen_rows": limit, "rows": rows_out}
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
