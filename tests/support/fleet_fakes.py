"""Stores and model fakes the fleet tests and the fleet benchmark share (no model files).

The backends are picklable (each Ray task gets its own copy): the hash
encoder, the campaign method (deterministic decisions from the pair's ids)
and the concatenating merger, so a store compressed by a fleet task and the
same store compressed in this process end the same way.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from memrefine_edge.engine import compress_store
from memrefine_edge.store import MemoryStore, parse_budget
from memrefine_edge.testing import FakeBackends, HashEncoder
from tests.support.crash_fakes import CampaignMethod, campaign_entries, decision_keys, export
from tests.support.fakes import ConcatMerger

__all__ = ["KillOnce", "backends", "make_fleet", "snapshot", "compress_here"]


class KillOnce:
    """A decision hook: at a task's ``after``-th decision, the first worker to claim ``marker`` kills itself.

    SIGKILL, as the kernel's out-of-memory killer or a lost node would: no
    handler runs. The marker file holds the killed process's id, so exactly
    one worker of the whole fleet dies, whatever store it was on.
    """

    def __init__(self, marker: Path, *, after: int) -> None:
        self.marker, self.after, self.seen = str(marker), after, 0

    def __call__(self) -> None:
        self.seen += 1
        if self.seen != self.after:
            return
        try:
            fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)


def backends(*, on_decide=None, sleep_ms: float = 0.0) -> FakeBackends:
    """The fakes every fleet test compresses with (``on_decide``/``sleep_ms``: hooks that leave no record)."""
    return FakeBackends(encoder=HashEncoder(), method=CampaignMethod(on_decide=on_decide, sleep_ms=sleep_ms),
                        merger=ConcatMerger())


def make_fleet(root: Path, count: int, *, n: int = 50, first_seed: int = 0) -> list[Path]:
    """``count`` small stores of ``n`` entries (other seeds, other stores) in ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        path = root / f"user{i:03d}.db"
        with MemoryStore(path) as store:
            store.add_many(campaign_entries(n, first_seed + i))
        paths.append(path)
    return paths


def snapshot(path: Path) -> tuple[list[dict], list[tuple], int]:
    """What a store holds: its export, its decisions, its number of runs."""
    with MemoryStore(path, create=False) as store:
        return export(store), decision_keys(store), len(store.journal.runs())


def compress_here(path: Path, budget: str, *, mode: str = "paper"):
    """The same compression a fleet task runs, in this process (the reference)."""
    ratio, size = parse_budget(budget)
    return compress_store(path, budget=ratio, budget_bytes=size, mode=mode, backends=backends()).report
