"""One store's task: the compression a user runs (:func:`memrefine_edge.engine.compress_store`), as a row.

This is what each worker runs; it imports no distributed runtime, so it is
the same code a sequential loop runs. Every way a store can end becomes a
:class:`StoreResult`: a store whose run lock is held is skipped, one that
cannot be compressed fails with the reason, Ctrl-C in the worker marks it
interrupted (its committed decisions are kept, the next job resumes it).
Only a dead worker escapes this: the caller retries the task, and the
store's interrupted run continues where its last commit left it.
"""

from __future__ import annotations

import os
import resource
import socket
import sqlite3
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memrefine_edge.core import MemRefineError, RunLockedError, StoreBusyError
from memrefine_edge.engine import Backends, PipelineConfig, compress_store
from memrefine_edge.store import parse_budget

from ._inputs import StoreJob
from ._results import Outcome, StoreResult

if TYPE_CHECKING:  # pragma: no cover
    from memrefine_edge.backends import Encoder

__all__ = ["FleetSettings", "compress_one"]


@dataclass(frozen=True)
class FleetSettings:
    """What every store of a job is compressed with (a store's own manifest budget wins over ``budget``).

    ``budget``: a ratio or a size as ``memrefine budget set`` reads it
    (``"0.5"``, ``"50%"``, ``"80KB"``); None: each store's standing budget.
    ``config`` and ``backends`` assemble the pipeline (``engine.build``);
    ``config.threads`` defaults to 1 here (a task has one CPU).
    ``store_options`` go to each :class:`~memrefine_edge.store.MemoryStore`.
    """

    budget: str | None = None
    metric: str | None = None
    mode: str = "live"
    config: PipelineConfig = field(default_factory=lambda: PipelineConfig(threads=1))
    backends: Backends | None = None
    store_options: dict[str, Any] = field(default_factory=dict)
    #: Names the job: a worker loads the job's encoder once and shares it between the job's stores.
    job_id: str = field(default_factory=lambda: uuid.uuid4().hex)


#: The encoder of the last job this process ran a store of: (job id, encoder).
_ENCODER: list[tuple[str, "Encoder"]] = []


def _shared_encoder(settings: FleetSettings) -> "Encoder":
    """The job's encoder, loaded by this process's first store of the job (an encoder holds no state of a run)."""
    if not _ENCODER or _ENCODER[0][0] != settings.job_id:
        _ENCODER[:] = [(settings.job_id, (settings.backends or Backends()).encoder(settings.config))]
    return _ENCODER[0][1]


def _peak_rss_mb() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return round(peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024, 1)


def compress_one(job: StoreJob, settings: FleetSettings) -> StoreResult:
    """Compress the store of ``job`` and return its row (never raises for a store's own problems)."""
    started = time.perf_counter()
    budget = job.budget if job.budget is not None else settings.budget
    row = StoreResult(path=job.path, outcome=Outcome.FAILED, budget=budget, mode=settings.mode, source=job.source,
                      host=socket.gethostname(), pid=os.getpid())
    try:
        if job.problem is not None:
            raise _Unreadable(job.problem)
        ratio, size = parse_budget(budget) if budget is not None else (None, None)
        done = compress_store(Path(job.path), budget=ratio, budget_bytes=size, metric=settings.metric,
                              mode=settings.mode, config=settings.config, backends=settings.backends,
                              store_options=settings.store_options, encoder=_shared_encoder(settings))
        report = done.report
        metric = report.metric
        row.outcome = Outcome.DONE
        row.metric, row.mode, row.run_id, row.target_bytes = metric, report.mode, report.run_id, report.target_bytes
        row.before_bytes = report.before.get(f"{metric}_bytes")
        row.after_bytes = report.after.get(f"{metric}_bytes")
        row.before_entries, row.after_entries = report.before.get("entries"), report.after.get("entries")
        row.budget_met, row.stop_reason, row.decisions = report.budget_met, report.stop_reason, report.decisions
        row.actions, row.resumed, row.message = dict(report.actions), report.resumed, done.message
    except (RunLockedError, StoreBusyError) as exc:
        row.outcome, row.error = Outcome.SKIPPED, str(exc)
    except _Unreadable as exc:
        row.error = str(exc)
    except MemRefineError as exc:
        row.error = f"{type(exc).__name__}: {exc}"
    except (OSError, sqlite3.Error) as exc:  # what the system still says no with (a full disk, an I/O error)
        row.error = f"{type(exc).__name__}: {exc}"
    except KeyboardInterrupt:
        row.outcome, row.error = Outcome.INTERRUPTED, "stopped before it ended; the next job resumes its run"
    except Exception as exc:  # noqa: BLE001 - a defect on one store must not stop the others: its row says it
        row.error = f"unexpected {type(exc).__name__}: {exc}"
    row.seconds = round(time.perf_counter() - started, 4)
    row.peak_rss_mb = _peak_rss_mb()
    row.finished_at = time.time()
    return row


class _Unreadable(Exception):
    """A manifest line that named no store."""
