"""A fleet job's results: one row per store (:class:`StoreResult`), the JSON-lines file, the summary.

The result file has one JSON object a line, written as each store ends (so
a job stopped half-way leaves the rows of every store it finished).
:func:`summarize` reads rows one at a time: totals, outcomes, and the
percentiles of the size ratio and of the seconds per store.
"""

from __future__ import annotations

import json
import os
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from pathlib import Path
from typing import Any

import numpy as np

from memrefine_edge.core import ExportError, ImportFormatError

__all__ = ["Outcome", "StoreResult", "FleetSummary", "summarize", "read_results", "ResultWriter"]


class Outcome(StrEnum):
    """How a store's task ended."""

    #: The compression ran to its end (the budget met, or the run's stop reason says why not).
    DONE = "done"
    #: The store could not be compressed (not a store, a corrupt file, a full disk ...): ``error`` says why.
    FAILED = "failed"
    #: Another process held the store's run lock (its own assistant compressing it): left for the next job.
    SKIPPED = "skipped"
    #: Stopped by the user before it ended: the committed part of its run is kept, the next job resumes it.
    INTERRUPTED = "interrupted"


@dataclass
class StoreResult:
    """One store's row: what it was asked, what its run did, where it ran.

    Sizes are in the run's ``metric`` (``json`` or ``disk``). ``decisions``
    counts the whole run (a resumed run included, ``resumed``); ``seconds``
    is the task's time in the worker; ``error`` says why a store failed or
    was skipped; ``message`` is the budget note the command line prints
    (``budget changed: ...``). ``peak_rss_mb`` is the worker process's peak so far.
    """

    path: str
    outcome: Outcome
    error: str | None = None
    budget: str | None = None
    metric: str | None = None
    mode: str | None = None
    run_id: str | None = None
    target_bytes: int | None = None
    before_bytes: int | None = None
    after_bytes: int | None = None
    before_entries: int | None = None
    after_entries: int | None = None
    budget_met: bool | None = None
    stop_reason: str | None = None
    decisions: int = 0
    actions: dict[str, int] = field(default_factory=dict)
    resumed: bool = False
    seconds: float = 0.0
    message: str | None = None
    source: str | None = None
    host: str | None = None
    pid: int | None = None
    peak_rss_mb: float | None = None
    finished_at: float | None = None

    @property
    def saved_bytes(self) -> int:
        """Bytes the run took off the store (0 unless it is done)."""
        if self.outcome is not Outcome.DONE or self.before_bytes is None or self.after_bytes is None:
            return 0
        return self.before_bytes - self.after_bytes

    @property
    def ratio(self) -> float | None:
        """Size after over size before (None unless it is done and had a size)."""
        if self.outcome is not Outcome.DONE or not self.before_bytes or self.after_bytes is None:
            return None
        return self.after_bytes / self.before_bytes

    def as_dict(self) -> dict[str, Any]:
        """The row as JSON-ready values (the outcome as its text)."""
        out = asdict(self)
        out["outcome"] = self.outcome.value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "StoreResult":
        """A row read back; unknown keys are ignored, a missing path or outcome is refused."""
        known = {f.name for f in fields(cls)}
        if not isinstance(data.get("path"), str) or data.get("outcome") not in {o.value for o in Outcome}:
            raise ValueError("a result row has a \"path\" and an \"outcome\" (done, failed, skipped, interrupted)")
        values = {k: v for k, v in data.items() if k in known}
        values["outcome"] = Outcome(values["outcome"])
        return cls(**values)


class ResultWriter:
    """Appends rows to a new JSON-lines file, each flushed as it is written.

    An existing file is refused (a result file is never overwritten): the
    caller picks another name.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        try:
            self._fh = open(self.path, "x", encoding="utf-8")  # noqa: SIM115 - closed by close()
        except FileExistsError:
            raise ExportError(f"{self.path} exists: a result file is never overwritten; name another") from None
        except OSError as exc:
            raise ExportError(f"cannot write the result file {self.path}: {exc.strerror or exc}") from None

    def write(self, row: StoreResult) -> None:
        self._fh.write(json.dumps(row.as_dict(), ensure_ascii=False) + "\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> "ResultWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_results(path: str | os.PathLike[str]) -> Iterator[StoreResult]:
    """The rows of a result file, one at a time; a line that is not a row is an :class:`ImportFormatError`."""
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                if not isinstance(data, dict):
                    raise ValueError("not a JSON object")
                yield StoreResult.from_dict(data)
            except ValueError as exc:
                raise ImportFormatError(f"{path} is not a fleet result file: {exc}", line=number) from None


_PERCENTILES = (50, 90, 99)


def _spread(values: array) -> dict[str, float] | None:
    if not len(values):
        return None
    a = np.frombuffer(values, dtype=np.float64)
    out = {f"p{p}": round(float(np.percentile(a, p)), 4) for p in _PERCENTILES}
    out.update(min=round(float(a.min()), 4), max=round(float(a.max()), 4))
    return out


@dataclass
class FleetSummary:
    """Totals of a fleet job's rows.

    ``outcomes`` counts each :class:`Outcome`; the byte totals and
    ``budget_met`` are over the stores done; ``ratio`` (after over before)
    and ``seconds`` are percentiles (p50, p90, p99, min, max) over the
    stores done. ``problems``: the first few failed or skipped stores with
    why. ``wall_seconds``: from the first row's end to the last's, plus the
    first row's own seconds (None without timestamps).
    """

    stores: int
    outcomes: dict[str, int]
    budget_met: int
    budget_not_met: int
    before_bytes: int
    after_bytes: int
    saved_bytes: int
    decisions: int
    resumed: int
    ratio: dict[str, float] | None
    seconds: dict[str, float] | None
    task_seconds: float
    wall_seconds: float | None
    problems: list[dict[str, str]]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def text(self) -> str:
        """The summary as a few lines for a person."""
        o = self.outcomes
        lines = [
            f"stores      {self.stores:,}: done {o.get('done', 0):,}, failed {o.get('failed', 0):,}, "
            f"skipped {o.get('skipped', 0):,}, interrupted {o.get('interrupted', 0):,}",
            f"budget met  {self.budget_met:,} of {self.budget_met + self.budget_not_met:,} done "
            f"({self.resumed:,} resumed an interrupted run)",
            f"bytes       {self.before_bytes:,} -> {self.after_bytes:,} ({self.saved_bytes:,} saved), "
            f"{self.decisions:,} decisions",
        ]
        if self.ratio:
            r = self.ratio
            lines.append(f"ratio       p50 {r['p50']:.1%}  p90 {r['p90']:.1%}  p99 {r['p99']:.1%}  "
                         f"min {r['min']:.1%}  max {r['max']:.1%}")
        if self.seconds:
            s = self.seconds
            lines.append(f"seconds     p50 {s['p50']:.2f}  p90 {s['p90']:.2f}  p99 {s['p99']:.2f}  "
                         f"max {s['max']:.2f} per store")
        if self.wall_seconds:
            rate = self.stores / self.wall_seconds if self.wall_seconds > 0 else 0.0
            lines.append(f"wall        {self.wall_seconds:.1f} s ({rate:.2f} stores/s), {self.task_seconds:.1f} s "
                         "in tasks")
        lines += [f"{p['outcome']:11} {p['path']}: {p['error']}" for p in self.problems]
        return "\n".join(lines)


def summarize(rows: Iterable[StoreResult], *, problems: int = 10) -> FleetSummary:
    """Totals and percentiles of ``rows``, read one at a time (two floats kept per store done)."""
    outcomes: Counter[str] = Counter()
    ratios, seconds = array("d"), array("d")
    met = not_met = before = after = decisions = resumed = 0
    task_seconds = 0.0
    first_end: float | None = None
    last_end: float | None = None
    first_seconds = 0.0
    shown: list[dict[str, str]] = []
    for row in rows:
        outcomes[row.outcome.value] += 1
        task_seconds += row.seconds or 0.0
        if row.finished_at is not None:
            if first_end is None or row.finished_at < first_end:
                first_end, first_seconds = row.finished_at, row.seconds or 0.0
            last_end = max(last_end or row.finished_at, row.finished_at)
        if row.outcome is not Outcome.DONE:
            if len(shown) < problems:
                shown.append({"path": row.path, "outcome": row.outcome.value, "error": row.error or ""})
            continue
        met += bool(row.budget_met)
        not_met += not row.budget_met
        before += row.before_bytes or 0
        after += row.after_bytes or 0
        decisions += row.decisions
        resumed += row.resumed
        if row.ratio is not None:
            ratios.append(row.ratio)
        seconds.append(row.seconds)
    wall = (last_end - first_end + first_seconds) if first_end is not None and last_end is not None else None
    return FleetSummary(
        stores=sum(outcomes.values()), outcomes=dict(outcomes), budget_met=met, budget_not_met=not_met,
        before_bytes=before, after_bytes=after, saved_bytes=before - after, decisions=decisions, resumed=resumed,
        ratio=_spread(ratios), seconds=_spread(seconds), task_seconds=round(task_seconds, 3),
        wall_seconds=round(wall, 3) if wall is not None else None, problems=shown,
    )
