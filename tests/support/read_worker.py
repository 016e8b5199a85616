"""A reader in its own process, for the concurrency tests.

    python tests/support/read_worker.py DB N_ORIGINAL SEED STOP_FILE

Until STOP_FILE exists: search, list every entry, and check one read
snapshot against the journal (see crash_fakes). Prints the number of rounds
and exits 0; any error is a traceback and exit 1.
"""

from __future__ import annotations

import sys
from pathlib import Path

from memrefine_edge.store import MemoryStore  # noqa: E402
from memrefine_edge.testing import HashEncoder  # noqa: E402
from tests.support.crash_fakes import WORDS, campaign_entries, check_snapshot, read_everything  # noqa: E402


def main() -> None:
    db, n, seed, stop = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
    original = {e.id for e in campaign_entries(n, seed)}
    encoder = HashEncoder()
    rounds = 0
    with MemoryStore(db, create=False) as store:
        while True:
            last = stop.exists()  # one more round after the stop file appears: the final state
            read_everything(store, encoder, WORDS[rounds % len(WORDS)])
            check_snapshot(db, original)
            rounds += 1
            if last:
                break
    print(rounds, flush=True)


if __name__ == "__main__":
    main()
