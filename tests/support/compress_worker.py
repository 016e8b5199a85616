"""Subprocess body for the kill -9 tests: compress a store with deterministic fakes.

    python tests/support/compress_worker.py DB BUDGET [KILL_STEP KILL_PHASE]

KILL_PHASE is where the process SIGKILLs itself during decision KILL_STEP:
``judge`` (after the judge decided, before anything is written), ``merge``
(inside the merge LLM call), ``commit`` (right after the commit that made the decision durable:
decisions share a transaction while they come fast, so that commit may hold several).
"""

from __future__ import annotations

import os
import signal
import sys

from memrefine_edge.engine import Compressor  # noqa: E402
from memrefine_edge.store import MemoryStore  # noqa: E402
from memrefine_edge.testing import HashEncoder  # noqa: E402
from tests.support.fakes import ConcatMerger, ScriptedMethod  # noqa: E402


def main() -> None:
    db, budget = sys.argv[1], float(sys.argv[2])
    kill_step = int(sys.argv[3]) if len(sys.argv) > 3 else -1
    phase = sys.argv[4] if len(sys.argv) > 4 else ""
    die = lambda: os.kill(os.getpid(), signal.SIGKILL)  # noqa: E731
    with MemoryStore(db, create=False) as store:
        done = store.journal.unfinished_run()
        offset = done.cursor if done else 0
        calls = {"n": offset}

        def on_decide() -> None:
            if phase == "judge" and calls["n"] == kill_step:
                die()
            calls["n"] += 1

        def on_merge() -> None:
            if phase == "merge" and calls["n"] - 1 == kill_step:
                die()

        def on_progress(p) -> None:
            if phase == "commit" and p.step - 1 >= kill_step:
                die()

        comp = Compressor(store, encoder=HashEncoder(), method=ScriptedMethod(on_decide=on_decide),
                          merger=ConcatMerger(on_merge=on_merge), k=4, progress=on_progress)
        report = comp.run(budget=budget)
    print(report.stop_reason)


if __name__ == "__main__":
    main()
