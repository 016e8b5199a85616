"""Search in the assistant loop: the latency of ``MemoryStore.search`` right after an add, at 10k and 100k entries.

For each size, a store of distinct short facts (``bench/_distinct_facts.py``) is written and embedded
with the test ``HashEncoder`` (fast and deterministic: what is measured is the store and its index, not
an encoder), then, with one fixed query text (its vector is the same every time):

* ``quiet``: ``search(k=10)`` again and again with no write in between;
* ``after_add``: add one new fact on the same connection, then search (the search embeds the new
  entry and stores its embedding); then, not timed, a search for the new fact's own text must find it;
* ``after_other_add``: another connection (as another process would) adds one fact, then this
  connection searches.

Each phase reports p50 / p99 / max wall milliseconds over ``--rounds`` searches (and the adds'
latency), and the p50 of the CPU milliseconds the process spent (what the work costs, apart from
waiting for a shared core).
The machine's load average is recorded: the 2 cores are shared with other jobs, so the numbers are
reported, not asserted. Results go under ``--label`` (e.g. ``before`` / ``after`` a change) in
``bench/results/search_live.json``, keeping the other labels (and, under the same label, the runs of
other sizes), each run with the command that made it.

    .venv/bin/python bench/search_live.py --label after                  # 10k and 100k, 200 rounds
    .venv/bin/python bench/search_live.py --sizes 10000 --rounds 50 --label quick
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's package, not whatever memrefine_edge an environment has installed

from _distinct_facts import distinct_facts  # noqa: E402  (bench/ is the script's folder, on sys.path)

from memrefine_edge.store import MemoryStore  # noqa: E402
from memrefine_edge.testing import HashEncoder  # noqa: E402

QUERY = "Which friend from Kyoto took up pottery?"


def _ms(samples: list[tuple[float, float]]) -> dict[str, float]:
    """p50 / p99 / max of the wall times, and the p50 of the CPU times (this process's: on shared cores
    the wall time's tail is mostly waiting for a core)."""
    ordered = sorted(wall for wall, _ in samples)
    p99 = ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]
    return {"p50": round(statistics.median(ordered) * 1000, 2), "p99": round(p99 * 1000, 2),
            "max": round(ordered[-1] * 1000, 2), "cpu_p50": round(statistics.median(c for _, c in samples) * 1000, 2),
            "n": len(ordered)}


class _Timer:
    """Wall and CPU seconds of the block, appended to ``into``."""

    def __init__(self, into: list[tuple[float, float]]) -> None:
        self.into = into

    def __enter__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def __exit__(self, *exc: object) -> None:
        self.into.append((time.perf_counter() - self.wall, time.process_time() - self.cpu))


def _finds(store: MemoryStore, entry, encoder: HashEncoder) -> bool:
    """Whether a search for the new fact's own text finds it (not timed)."""
    return any(e.id == entry.id for e, _ in store.search(entry.content, k=10, encoder=encoder))


def build(path: Path, n: int, encoder: HashEncoder) -> float:
    """A store of ``n`` distinct facts, every one embedded; returns the seconds it took."""
    t = time.perf_counter()
    with MemoryStore(path) as store:
        facts = distinct_facts(n, seed=1)
        while True:
            batch = [e for _, e in zip(range(10_000), facts, strict=False)]
            if not batch:
                break
            store.add_many(batch)
        store.ensure_embeddings(encoder, batch_size=512)
    return time.perf_counter() - t


def measure(path: Path, n: int, rounds: int, encoder: HashEncoder) -> dict:
    new = distinct_facts(n + 3 * rounds + 10, seed=1)
    for _ in range(n):  # the facts already in the store
        next(new)
    out: dict = {"entries": n}
    with MemoryStore(path, create=False) as store, MemoryStore(path, create=False) as other:
        t = time.perf_counter()
        store.search(QUERY, k=10, encoder=encoder)
        out["first_search_ms"] = round((time.perf_counter() - t) * 1000, 1)

        quiet: list[tuple[float, float]] = []
        for _ in range(rounds):
            with _Timer(quiet):
                store.search(QUERY, k=10, encoder=encoder)
        out["quiet"] = _ms(quiet)

        adds: list[tuple[float, float]] = []
        searches: list[tuple[float, float]] = []
        found = 0
        for _ in range(rounds):
            entry = next(new)
            with _Timer(adds):
                store.add(entry)
            with _Timer(searches):
                store.search(QUERY, k=10, encoder=encoder)
            found += _finds(store, entry, encoder)
        out["after_add"] = {"search": _ms(searches), "add": _ms(adds), "new_entry_found": f"{found}/{rounds}"}

        searches, found = [], 0
        for _ in range(rounds):
            entry = next(new)
            other.add(entry)
            with _Timer(searches):
                store.search(QUERY, k=10, encoder=encoder)
            found += _finds(store, entry, encoder)
        out["after_other_add"] = {"search": _ms(searches), "new_entry_found": f"{found}/{rounds}"}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated store sizes")
    parser.add_argument("--rounds", type=int, default=200, help="searches per phase")
    parser.add_argument("--label", default="after", help="the key the results go under (before, after ...)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "search_live.json"))
    args = parser.parse_args()
    encoder = HashEncoder()
    sizes = [int(s) for s in args.sizes.split(",")]
    runs = []
    with tempfile.TemporaryDirectory(prefix="search-live-") as tmp:
        for n in sizes:
            path = Path(tmp) / f"facts-{n}.db"
            load = os.getloadavg()[0]
            built = build(path, n, encoder)
            run = measure(path, n, args.rounds, encoder)
            run.update(build_s=round(built, 1), load_avg=[round(load, 2), round(os.getloadavg()[0], 2)])
            runs.append(run)
            print(json.dumps(run), flush=True)
    out = Path(args.out)
    data = json.loads(out.read_text()) if out.exists() else {}
    argv = " ".join(a if "/" not in a or a.startswith("bench/") else Path(a).name for a in sys.argv[1:])
    for run in runs:
        run["command"] = f".venv/bin/python bench/search_live.py {argv}".strip()
    # Runs of other sizes under the same label are kept (a label can be filled one size at a time).
    kept = [r for r in data.get(args.label, {}).get("runs", []) if r["entries"] not in sizes]
    data[args.label] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "numpy": np.__version__},
        "query": QUERY, "k": 10, "encoder": "HashEncoder (memrefine_edge.testing)",
        "runs": sorted(kept + runs, key=lambda r: r["entries"]),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=2) + "\n")


if __name__ == "__main__":
    main()
