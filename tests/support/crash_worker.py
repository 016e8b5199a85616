"""Subprocess body of the crash campaign and concurrency tests: one compression with deterministic fakes.

    python tests/support/crash_worker.py DB --budget R [--mode paper|strict] [--policy SALT] [--min-similarity S]
                                 [--sleep-ms MS] [--release N --window W] [--pause-every P]
                                 [--kill PHASE:N] [--count-sql] [--commit-window S]

Prints on stdout, one line each, flushed: ``ready`` (store open, before the
run), ``done STOP_REASON`` at the end, and with ``--count-sql`` the number of
SQL statements the process ran (``sql T``).

Kill from outside (``--release N --window W``): when N decisions are in the
journal (pair decisions and evictions alike; N may be the cursor the run
resumes from) the worker prints ``at N`` and waits for a line on stdin; once
released it runs on, and when N + W are in the journal it prints ``fence``
and waits again, for good. After the run it prints ``done ...`` and waits
too. So a SIGKILL sent any time after the release lands at a random point
between the release and the fence (or the end of the run, if that comes
first), and always hits a live process.

Pauses (``--pause-every P``): each time a multiple of P decisions is in the
journal the worker prints ``paused N`` and waits for a line on stdin, holding
the run lock but no SQLite lock (the next statement has not started). After
the run it waits for stdin to close.

Kill from inside (``--kill PHASE:N``), SIGKILL to itself:

``judge:N``   decision N was made, nothing written
``merge:N``   inside the merge call of decision N
``commit:N``  inside decision N's transaction, every write done, just before COMMIT
              (any action, evictions too)
``after:N``   decision N committed, before the next SQL statement
``sql:K``     before the K-th SQL statement this process runs (anywhere)

The kill points and pauses count decisions committed one by one (``--commit-window 0``,
the default); with a window, decisions share transactions and only ``sql:K`` is meaningful.

``judge``/``merge`` hook the fake method and merger; the others, and the
release points, use sqlite3's trace callback on the store's connection (called
before each statement runs), so no library code needs a hook.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys

from memrefine_edge.store import MemoryStore  # noqa: E402
from tests.support.crash_fakes import compressor_for  # noqa: E402

_CURSOR = re.compile(r"^UPDATE runs SET cursor = \d+ WHERE run_id = '[^']*' AND cursor = (\d+)$")


def die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def say(line: str) -> None:
    print(line, flush=True)


def wait_for_parent() -> None:
    sys.stdin.readline()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("db")
    ap.add_argument("--budget", type=float, required=True)
    ap.add_argument("--mode", default="paper")
    ap.add_argument("--policy", default="mixed")
    ap.add_argument("--min-similarity", type=float, default=None)
    ap.add_argument("--sleep-ms", type=float, default=0.0)
    ap.add_argument("--release", type=int, default=None)
    ap.add_argument("--window", type=int, default=4)
    ap.add_argument("--pause-every", type=int, default=0)
    ap.add_argument("--commit-window", type=float, default=0.0)
    ap.add_argument("--kill", default="")
    ap.add_argument("--count-sql", action="store_true")
    args = ap.parse_args()
    phase, _, n = args.kill.partition(":")
    n = int(n) if n else -1

    with MemoryStore(args.db, create=False) as store:
        unfinished = store.journal.unfinished_run()
        # committed: decisions in the journal (= the index of the decision being made);
        # pending: the decision whose last write (the cursor update) ran and whose COMMIT is next.
        state = {"committed": unfinished.cursor if unfinished else 0, "pending": None, "just": False, "sql": 0}

        def release_point() -> None:
            if args.pause_every and state["committed"] and state["committed"] % args.pause_every == 0:
                say(f"paused {state['committed']}")
                wait_for_parent()
            if args.release is None:
                return
            if state["committed"] == args.release:
                say(f"at {args.release}")
                wait_for_parent()
            elif state["committed"] == args.release + args.window:
                say("fence")
                wait_for_parent()

        def trace(sql: str) -> None:  # runs before every statement of the store's connection
            state["sql"] += 1
            if phase == "sql" and state["sql"] == n:
                die()
            if state["just"]:  # the first statement after a decision's COMMIT
                state["just"] = False
                if phase == "after" and state["committed"] - 1 == n:
                    die()
                release_point()
            m = _CURSOR.match(sql)
            if m:
                state["pending"] = int(m[1])
            elif sql == "COMMIT" and state["pending"] is not None:
                if phase == "commit" and state["pending"] == n:
                    die()
                state["committed"], state["pending"], state["just"] = state["pending"] + 1, None, True

        store.set_trace(trace)

        def on_decide() -> None:
            if phase == "judge" and state["committed"] == n:
                die()

        def on_merge() -> None:
            if phase == "merge" and state["committed"] == n:
                die()

        comp = compressor_for(store, mode=args.mode, policy=args.policy, min_similarity=args.min_similarity,
                              sleep_ms=args.sleep_ms, on_decide=on_decide, on_merge=on_merge,
                              commit_window=args.commit_window)
        say("ready")
        release_point()
        report = comp.run(budget=args.budget)
    say(f"done {report.stop_reason}")
    if args.count_sql:
        say(f"sql {state['sql']}")
    if args.release is not None or args.pause_every:
        wait_for_parent()


if __name__ == "__main__":
    main()
