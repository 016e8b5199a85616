"""A long-lived writer in its own process, for the replaced-file tests.

    python tests/support/holder_worker.py DB

Opens the store at DB (which must exist) and keeps it open, answering one
line per command read from stdin:

``add ID``        adds one entry: ``ok``, or ``refused <ErrorClass>: <message>``
``group ID ID``   adds two entries in one group commit (``MemoryStore.grouped``): same answers
``count``         the number of entries this process sees
``quit``          closes the store, prints ``closed`` and exits 0

Prints ``open`` once the store is open.
"""

from __future__ import annotations

import sys

from memrefine_edge.core import Entry, MemRefineError
from memrefine_edge.store import MemoryStore


def _entry(entry_id: str) -> Entry:
    return Entry(id=entry_id, content=f"{entry_id}: Ana adopted a grey cat named Pixel in Lisbon after two visits.")


def main() -> None:
    with MemoryStore(sys.argv[1], create=False) as store:
        print("open", flush=True)
        for line in sys.stdin:
            cmd, *args = line.split()
            if cmd == "quit":
                break
            if cmd == "count":
                print(len(store), flush=True)
                continue
            try:
                if cmd == "add":
                    store.add(_entry(args[0]))
                else:
                    with store.grouped(window_s=3600):
                        for entry_id in args:
                            store.add(_entry(entry_id))
                print("ok", flush=True)
            except MemRefineError as exc:
                print(f"refused {type(exc).__name__}: {exc}", flush=True)
    print("closed", flush=True)


if __name__ == "__main__":
    main()
