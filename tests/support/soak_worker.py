"""Subprocess bodies of the soak test: an assistant adding memories, a reader searching.

    python tests/support/soak_worker.py add DB ACKS TOTAL HIGH LOW
    python tests/support/soak_worker.py search DB ERRORS

``add`` continues from the acknowledgements already written (one id a line,
appended only after ``add_many`` returned), with Upkeep's worker compressing
the store between the watermarks (a pass a kill interrupted resumes when the
next adder starts); at the end it waits for the worker to be idle and prints
what it saw: ``adder done``, the largest overshoot above HIGH at an add's
return, the adds that waited, and the size at idle. ``search`` queries
forever, read-only, and appends any exception it meets to ERRORS.
"""

from __future__ import annotations

import os
import random
import sys
import time
import traceback
from pathlib import Path

from memrefine_edge.core import Entry
from memrefine_edge.engine import Compressor, Upkeep  # noqa: E402
from memrefine_edge.store import MemoryStore  # noqa: E402
from memrefine_edge.testing import HashEncoder  # noqa: E402
from tests.support.crash_fakes import CampaignMethod  # noqa: E402
from tests.support.fakes import ConcatMerger  # noqa: E402

TOPICS = ("tea coffee hiking paris guitar piano dog cat yoga novel sister birthday concert garden beach museum "
          "school recipe soup violin marathon pottery camping lisbon kyoto bakery library").split()


def memory(i: int) -> Entry:
    rng = random.Random(i)
    words = rng.sample(TOPICS, 3)
    who = rng.choice(("Ana", "Ben", "Caro", "Dev"))
    return Entry(id=f"m{i:05d}", content=f"{who} talked about {words[0]}, {words[1]} and {words[2]} on day {i}.",
                 timestamps=(f"2024-{1 + i % 12:02d}-{1 + i % 28:02d}",), provenance=(f"m{i:05d}",))


def add(db: str, acks: str, total: int, high: int, low: int) -> None:
    done = len(Path(acks).read_text().split()) if Path(acks).exists() else 0
    with MemoryStore(db) as store, open(acks, "a") as ack:
        comp = Compressor(store, encoder=HashEncoder(), method=CampaignMethod(policy="soak"), merger=ConcatMerger())
        upkeep = Upkeep(comp, high_bytes=high, low_bytes=low).install()
        rng = random.Random(done)
        i = done
        overshoot = 0
        while i < total:
            burst = [memory(j) for j in range(i, min(total, i + rng.randint(3, 15)))]
            # A burst committed just before a kill was never acknowledged: the app sends it again,
            # minus what the store already holds.
            todo = [e for e in burst if e.id not in store]
            try:
                if todo:
                    store.add_many(todo)  # returns once committed (and the store within the lag)
                    overshoot = max(overshoot, store.running_size() - high)
            except Exception as exc:  # noqa: BLE001 - the harness reads what went wrong
                ids = {e.id for e in todo}
                if not all(x in store for x in ids):
                    raise
                print(f"an add raised after its commit: {type(exc).__name__}: {exc}", file=sys.stderr)
            ack.write("".join(f"{e.id}\n" for e in burst))
            ack.flush()
            os.fsync(ack.fileno())
            i += len(burst)
            time.sleep(rng.uniform(0.005, 0.03))  # an assistant between two turns
        idle = upkeep.wait_idle()
        print(f"adder done overshoot={overshoot} waits={upkeep.waits} idle={idle} size={store.running_size()} "
              f"blocked={upkeep.blocked_by is not None} error={upkeep.error is not None}", flush=True)


def search(db: str, errors: str) -> None:
    encoder = HashEncoder()
    rng = random.Random(os.getpid())
    while True:
        try:
            if Path(db).exists():
                with MemoryStore(db, create=False, read_only=True) as store:
                    for _ in range(20):
                        store.search(" ".join(rng.sample(TOPICS, 2)), 5, encoder=encoder)
        except Exception:  # noqa: BLE001 - every failure is a finding
            with open(errors, "a") as fh:
                fh.write(traceback.format_exc() + "\n---\n")
        time.sleep(0.01)


if __name__ == "__main__":
    if sys.argv[1] == "add":
        add(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]))
    elif sys.argv[1] == "search":
        search(sys.argv[2], sys.argv[3])
