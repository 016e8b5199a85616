"""What the run journal records and returns: a run (:class:`RunInfo`), an audited decision
(:class:`DecisionRecord`) and what an applied decision changed (:class:`Effect`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DecisionRecord", "Effect", "RunInfo", "run_info"]


@dataclass(frozen=True)
class Effect:
    """What one applied decision changed: entries removed and created, and the size before it."""

    removed: tuple[str, ...]
    created: tuple[str, ...]
    size_before: int


@dataclass(frozen=True)
class RunInfo:
    """One compression run as recorded."""

    run_id: str
    started_at: str
    finished_at: str | None
    status: str
    method: str
    params: dict[str, Any]
    cursor: int
    report: dict[str, Any] | None
    #: The run's preserve decisions without an audit row, by source (see :meth:`RunJournal.preserve_counts`).
    preserved: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class DecisionRecord:
    """One audited decision."""

    run_id: str
    step: int
    a_id: str | None
    b_id: str | None
    similarity: float | None
    action: str
    target: str | None
    source: str
    reason: str
    merge_instruction: str
    created_ids: list[str]
    removed_ids: list[str]
    size_before: int
    size_after: int
    latency_ms: float
    at: str



def run_info(row: Sequence[Any]) -> RunInfo:
    """A :class:`RunInfo` from a ``runs`` row (run_id, started_at, finished_at, status, method, params,
    cursor, report, preserved)."""
    return RunInfo(
        run_id=row[0], started_at=row[1], finished_at=row[2], status=row[3], method=row[4],
        params=json.loads(row[5]), cursor=row[6], report=json.loads(row[7]) if row[7] else None,
        preserved=json.loads(row[8]) if row[8] else {},
    )
