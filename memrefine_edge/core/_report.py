"""What a compression run reports: :class:`Progress` after each commit, :class:`CompressionReport` at its end.

The end report is also stored with the run, as :meth:`CompressionReport.as_dict`
(:meth:`RunJournal.finish_run <memrefine_edge.store._journal.RunJournal.finish_run>`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._types import StopReason

__all__ = ["CompressionReport", "Progress"]


@dataclass(frozen=True)
class Progress:
    """What a progress callback receives after each commit (of one decision, or of a group).

    ``step`` decisions of the run are then durable."""

    step: int
    size: int
    target: int
    counts: dict[str, int]
    pairs_per_s: float
    eta_s: float | None


@dataclass
class CompressionReport:
    """The end report of a run (also stored with the run)."""

    run_id: str | None
    method: str
    metric: str
    mode: str
    target_bytes: int
    before: dict[str, int]
    after: dict[str, int]
    budget_met: bool
    stop_reason: str
    actions: dict[str, int] = field(default_factory=dict)
    sources: dict[str, int] = field(default_factory=dict)
    llm_calls: int = 0
    decisions: int = 0
    resumed: bool = False
    seconds: dict[str, float] = field(default_factory=dict)
    #: Entries other writers added while the run went on: ``{"entries": n, "bytes": size}``.
    added_during_run: dict[str, int] = field(default_factory=dict)
    #: Deferred deletes the run took to meet its budget (also in ``actions`` and ``sources``; the pairs
    #: deferred are the preserves of source ``deferred``).
    deferred_taken: int = 0
    #: Live mode: the highest insertion number up to which every entry has been judged against its
    #: nearest neighbours (the next live pass judges only entries inserted after it, and merged ones).
    judged_through_seq: int | None = None
    #: The bytes (in the run's metric) the run removed, by route: ``delete`` and ``merge`` (the judge's
    #: decisions; deferred deletes are deletes) and ``evict`` (eviction). A route not taken is absent.
    removed_bytes: dict[str, int] = field(default_factory=dict)

    @property
    def stop(self) -> StopReason:
        """Why the run ended, as a :class:`StopReason` (``stop_reason`` is its text)."""
        return StopReason.of(self.stop_reason)

    @property
    def realized_ratio(self) -> float:
        """Size after / size before, in the run's metric."""
        key = f"{self.metric}_bytes"
        return self.after[key] / self.before[key] if self.before[key] else 1.0

    def as_dict(self) -> dict[str, Any]:
        """The report as stored with the run: its fields and the realized ratios in every metric."""
        out = dict(self.__dict__)
        out["realized_ratio"] = round(self.realized_ratio, 6)
        out["realized_ratio_json"] = round(self.after["json_bytes"] / max(1, self.before["json_bytes"]), 6)
        out["realized_ratio_disk"] = round(self.after["disk_bytes"] / max(1, self.before["disk_bytes"]), 6)
        return out
