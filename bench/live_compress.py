"""One-shot compression of a store of distinct facts to half its size: live mode against paper and strict.

    python bench/live_compress.py [--n 10000] [--budget 0.5] [--modes live,strict] [--cap-s 600]

The store is ``bench/upkeep.py``'s distinct-fact stream (deterministic); each mode compresses a copy
with the default pipeline (the int8 MiniLM encoder, the default judge, the fact-keeping merge). The
embedding pass is timed apart (it is the same for every mode). Each mode is one run; one that has not
finished after ``--cap-s`` seconds is stopped at its next commit (it stays resumable) and reported as
not finished, with the size it had reached. Writes
``bench/results/live_compress.json``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the benchmark's sibling generator

from upkeep import distinct_facts  # noqa: E402

from memrefine_edge.core import Entry, Progress  # noqa: E402
from memrefine_edge.engine import Compressor  # noqa: E402
from memrefine_edge.judging import GuardedMerger, default_judge  # noqa: E402
from memrefine_edge.methods import MemRefineMethod  # noqa: E402
from memrefine_edge.store import MemoryStore  # noqa: E402


class _Capped(Exception):
    """A run past its time cap."""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--budget", type=float, default=0.5)
    ap.add_argument("--modes", default="live,strict")
    ap.add_argument("--cap-s", type=float, default=600.0)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "live_compress.json")
    args = ap.parse_args(argv)
    from memrefine_edge.backends import OnnxEncoder

    encoder = OnnxEncoder()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base.db"
        with MemoryStore(base) as store:
            store.add_many(Entry(**d) for d in distinct_facts(args.n))
            t = time.perf_counter()
            store.ensure_embeddings(encoder)
            embed_s = time.perf_counter() - t
            base_size = store.json_bytes()
        for mode in args.modes.split(","):
            db = Path(tmp) / f"{mode}.db"
            shutil.copy(base, db)
            with MemoryStore(db, create=False) as store:
                t = time.perf_counter()
                last: list[Progress] = []

                def cap(p: Progress, last: list[Progress] = last, t0: float = t) -> None:
                    """Called after each commit: past the cap, stop the run there."""
                    last[:] = [p]
                    if time.perf_counter() - t0 > args.cap_s:
                        raise _Capped

                comp = Compressor(store, encoder=encoder, method=MemRefineMethod(judge=default_judge()),
                                  merger=GuardedMerger(None), mode=mode, progress=cap)
                try:
                    report = comp.run(budget=args.budget)
                except _Capped:  # the run stays resumable, as after Ctrl-C
                    seconds = time.perf_counter() - t
                    p = last[0]
                    rows.append({"mode": mode, "seconds_after_embedding": round(seconds, 1), "finished": False,
                                 "budget_met": False, "stop": f"stopped at the {args.cap_s:g} s cap",
                                 "actions": p.counts, "realized_ratio": round(p.size / base_size, 4)})
                else:
                    seconds = time.perf_counter() - t
                    rows.append({"mode": mode, "seconds_after_embedding": round(seconds, 1),
                                 "finished": not report.stop.resumable, "budget_met": report.budget_met,
                                 "stop": report.stop_reason, "actions": report.actions,
                                 "realized_ratio": round(report.realized_ratio, 4),
                                 "removed_bytes": report.removed_bytes, "seconds_by_stage": report.seconds})
                print(json.dumps(rows[-1]), flush=True)
    result = {"command": "python bench/live_compress.py " + " ".join(argv if argv is not None else sys.argv[1:]),
              "n": args.n, "budget": args.budget, "embed_seconds": round(embed_s, 1), "rows": rows}
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
