"""Replaying a stream of entries into a store held at a budget, and what the caller's side of it costs.

A *keeper* is what holds the store under its high watermark while entries are
added: :class:`UpkeepKeeper` (the library's :class:`~memrefine_edge.engine.Upkeep`,
installed as the docs show it), :class:`FloorKeeper` (evict the oldest, or
random entries, until the store fits: the floors) or :class:`NoKeeper` (nothing,
for a one-shot compression at the end). :func:`replay` adds the entries one at
a time, timing each :meth:`MemoryStore.add <memrefine_edge.store.MemoryStore.add>`
and reading the store's size at its return; after each batch (a conversation's
session) it lets the keeper settle (:meth:`Keeper.settle`) and reads the size
again, *at idle*. Overshoot is ``(size - high) / high`` when positive.

:class:`UpkeepKeeper` is the one place that knows how Upkeep is driven: its
``install()``, its ``reports`` (one per pass) and, when Upkeep offers one, a
``wait_idle()`` that returns once its refinement is done (an Upkeep that
refines inside the add has nothing to wait for).
"""

from __future__ import annotations

import bisect
import math
import random
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from memrefine_edge.core import CompressionReport, Entry
    from memrefine_edge.engine import Upkeep
    from memrefine_edge.store import MemoryStore

__all__ = ["FloorKeeper", "Keeper", "NoKeeper", "ReplayStats", "UpkeepKeeper", "passes_summary", "percentile", "replay",
           "trim_in_order"]


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (nearest rank) of ``values``; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))])


class Keeper(Protocol):
    """What holds a store under its budget during a replay."""

    name: str

    def install(self) -> None:
        """Start keeping the store (before the first add)."""

    def settle(self, timeout: float | None = None) -> bool:
        """Return once the keeper has nothing left to do (the store is then as the keeper leaves it idle),
        or once ``timeout`` seconds have passed (then False)."""

    def passes(self) -> Sequence[Any]:
        """The keeper's passes so far (compression reports; empty for keepers without passes)."""

    def close(self) -> None:
        """Stop keeping the store."""


class UpkeepKeeper:
    """The stream's adapter to :class:`~memrefine_edge.engine.Upkeep`: install, wait until idle, passes, stop.

    An Upkeep that refines off the caller's path offers ``wait_idle()``; one that
    refines inside the add is idle whenever an add has returned.
    """

    name = "upkeep"

    def __init__(self, upkeep: Upkeep) -> None:
        self.upkeep = upkeep
        wait = getattr(upkeep, "wait_idle", None)
        self._wait: Callable[..., Any] | None = wait if callable(wait) else None

    @property
    def waits(self) -> bool:
        """Whether this Upkeep has a worker to wait for (``wait_idle``)."""
        return self._wait is not None

    def install(self) -> None:
        self.upkeep.install()

    def settle(self, timeout: float | None = None) -> bool:
        if self._wait is not None:
            return bool(self._wait(timeout=timeout))
        return True

    def passes(self) -> Sequence[CompressionReport]:
        return self.upkeep.reports

    def close(self) -> None:
        close = getattr(self.upkeep, "close", None)
        if callable(close):
            close()
        else:
            self.upkeep.uninstall()


class FloorKeeper:
    """A floor in the same loop: after each add above ``high_bytes``, remove entries until the store fits.

    ``fifo`` removes the oldest (insertion order), ``random`` a seeded random live entry. Removals are
    plain store removals (no judge, no audit): the floor any user could write in ten lines.
    """

    def __init__(self, store: MemoryStore, name: str, *, high_bytes: int, metric: str = "json",
                 seed: str = "0") -> None:
        if name not in ("fifo", "random"):
            raise ValueError(f"unknown floor {name!r}; use fifo or random")
        self.store, self.name, self.high_bytes, self.metric = store, name, high_bytes, metric
        self._rng = random.Random(seed)
        self.removed = 0

    def install(self) -> None:
        self.store.after_add.append(self)

    def __call__(self, store: MemoryStore) -> None:
        if store.running_size(self.metric) > self.high_bytes:
            self.trim(self.high_bytes)

    def trim(self, target_bytes: int) -> int:
        """Remove entries in the floor's order until the store is within ``target_bytes``; how many went."""
        removed = trim_in_order(self.store, self.name, target_bytes, metric=self.metric, rng=self._rng)
        self.removed += removed
        return removed

    def settle(self, timeout: float | None = None) -> bool:
        return True

    def passes(self) -> Sequence[Any]:
        return ()

    def close(self) -> None:
        self.store.after_add.remove(self)


def trim_in_order(store: MemoryStore, floor: str, target_bytes: int, *, metric: str = "json",
                  rng: random.Random | None = None) -> int:
    """Remove entries in the floor's order (``fifo``: oldest first; ``random``) until the store is within
    ``target_bytes``; returns how many were removed."""
    removed = 0
    ids = store.ids() if store.running_size(metric) > target_bytes else []
    if floor == "random":
        (rng or random.Random(0)).shuffle(ids)
    for entry_id in ids:
        if store.running_size(metric) <= target_bytes:
            break
        store.remove(entry_id)
        removed += 1
    return removed


class NoKeeper:
    """Nothing keeps the store: it grows to the whole stream (then, say, a one-shot compression)."""

    name = "none"

    def install(self) -> None:
        return None

    def settle(self, timeout: float | None = None) -> bool:
        return True

    def passes(self) -> Sequence[Any]:
        return ()

    def close(self) -> None:
        return None


@dataclass
class ReplayStats:
    """What the caller saw during one replay (sizes in the replay's metric)."""

    high_bytes: int
    adds: int = 0
    batches: int = 0
    finished: bool = False
    seconds: float = 0.0
    add_ms: list[float] = field(default_factory=list)
    #: Overshoot at each add's return / at each idle point: ``max(0, size - high) / high``.
    over_at_add: list[float] = field(default_factory=list)
    over_at_idle: list[float] = field(default_factory=list)
    #: For each pass (in order), the entries added after the previous pass started and before it started.
    added_per_pass: list[int] = field(default_factory=list)
    #: The store's highest insertion number right after each add (which pass an add came before).
    add_seqs: list[int] = field(default_factory=list)
    #: Session ends where the keeper was not idle before the deadline (measured there all the same).
    settle_timeouts: int = 0

    def summary(self) -> dict[str, Any]:
        """Percentiles and counts (JSON-ready)."""
        def pct(values: Sequence[float], digits: int) -> dict[str, float | None]:
            out = {f"p{q}": percentile(values, q) for q in (50, 99)}
            out["max"] = max(values) if values else None
            return {k: (round(v, digits) if v is not None else None) for k, v in out.items()}

        return {
            "finished": self.finished, "adds": self.adds, "batches": self.batches, "seconds": round(self.seconds, 3),
            "add_ms": pct(self.add_ms, 3),
            "overshoot_at_add": {**pct(self.over_at_add, 4),
                                 "share_over": round(sum(o > 0 for o in self.over_at_add) / max(1, self.adds), 4)},
            "overshoot_at_idle": {**pct(self.over_at_idle, 4),
                                  "share_over": round(sum(o > 0 for o in self.over_at_idle)
                                                      / max(1, len(self.over_at_idle)), 4),
                                  "points": len(self.over_at_idle), "not_idle_by_deadline": self.settle_timeouts},
        }


def passes_summary(reports: Sequence[CompressionReport], added_per_pass: Sequence[int]) -> dict[str, Any]:
    """Decisions and durations of a keeper's passes, and decisions per entry added before each pass."""
    actions: Counter[str] = Counter()
    for r in reports:
        actions.update(r.actions)
    decisions = [r.decisions for r in reports]
    secs = [sum(r.seconds.values()) for r in reports]
    per_added = [d / a for d, a in zip(decisions, added_per_pass, strict=False) if a]
    return {
        "passes": len(reports), "decisions": sum(decisions), "actions": dict(actions),
        "decisions_per_pass": {"p50": percentile(decisions, 50), "max": max(decisions) if decisions else None},
        "decisions_per_added_entry": {"p50": _round(percentile(per_added, 50)),
                                      "max": _round(max(per_added) if per_added else None)},
        "pass_seconds": {"p50": _round(percentile(secs, 50)), "max": _round(max(secs) if secs else None),
                         "total": round(sum(secs), 3)},
        "budget_met": sum(bool(r.budget_met) for r in reports),
        "stop_reasons": dict(Counter(r.stop_reason for r in reports)),
    }


def _round(v: float | None, digits: int = 3) -> float | None:
    return None if v is None else round(v, digits)


def replay(store: MemoryStore, batches: Iterable[Sequence[Entry]], keeper: Keeper, *, high_bytes: int,
           metric: str = "json", deadline: float | None = None,
           after_add: Callable[[ReplayStats], None] | None = None,
           before_add: Callable[[Entry], None] | None = None) -> ReplayStats:
    """Add ``batches`` of entries one at a time with ``keeper`` installed; the caller's view of it.

    ``deadline`` (a :func:`time.perf_counter` value) stops the replay between two adds once passed:
    the stats then say ``finished=False``. Links to entries no longer in the store are dropped (an
    assistant links to what it still has). ``after_add(stats)`` runs after each add's measurements, with
    the stats so far (the benchmark interleaves searches there and writes its progress);
    ``before_add(entry)`` runs before each add, untimed (the streaming evaluation's assistant searches
    its memory for the new entry's text there, as an assistant does before it writes).
    """
    stats = ReplayStats(high_bytes=high_bytes)
    started = time.perf_counter()
    keeper.install()
    seen_passes = len(keeper.passes())
    try:
        for batch in batches:
            for entry in batch:
                if deadline is not None and time.perf_counter() > deadline:
                    return stats
                if before_add is not None:
                    before_add(entry)
                t = time.perf_counter()
                store.add(entry, unknown_links="drop")
                stats.add_ms.append((time.perf_counter() - t) * 1000)
                stats.over_at_add.append(max(0, store.running_size(metric) - high_bytes) / high_bytes)
                # (kept rising: the newest entry may already be gone again)
                stats.add_seqs.append(max(store.max_seq(), stats.add_seqs[-1] if stats.add_seqs else 0))
                stats.adds += 1
                if after_add is not None:
                    after_add(stats)
            left = None if deadline is None else max(0.0, deadline - time.perf_counter())
            if not keeper.settle(left):
                stats.settle_timeouts += 1
            stats.over_at_idle.append(max(0, store.running_size(metric) - high_bytes) / high_bytes)
            stats.batches += 1
        stats.finished = True
        return stats
    finally:
        stats.seconds = time.perf_counter() - started
        stats.added_per_pass = added_per_pass(store, keeper.passes()[seen_passes:], stats.add_seqs)


def added_per_pass(store: MemoryStore, reports: Sequence[CompressionReport], add_seqs: Sequence[int]) -> list[int]:
    """For each pass, the adds that came after the previous pass started and no later than it started (by
    insertion number: a pass compresses the entries inserted before its start). A pass that recorded no run
    (the store was within budget) or that continues an earlier one counts none."""
    out: list[int] = []
    previous = 0
    for report in reports:
        start = None
        if report.run_id is not None:
            start = store.journal.run(report.run_id).params.get("start_seq")
        if start is None or int(start) <= previous:
            out.append(0)
            continue
        out.append(bisect.bisect_right(add_seqs, int(start)) - bisect.bisect_right(add_seqs, previous))
        previous = int(start)
    return out
