"""The fleet job on Ray: one task with one CPU per store, a bounded window of tasks in flight.

The only module of the package that imports Ray, and only when a job
starts (:func:`require_ray`): without the ``fleet`` extra everything else
works, and a fleet job fails with one line naming the extra.

Ray's local mode is the default (a Ray instance on this machine, started
and stopped with the job); ``address`` joins a running cluster instead,
and a Ray the caller already started is used as it is. Tasks are submitted
while fewer than ``window`` are in flight, so a job of millions of stores
holds a window of tasks, not the job. A worker that dies mid-store (killed,
out of memory, its node lost) is retried by Ray (``max_retries``), and the
store's interrupted run continues from its last commit.

Ctrl-C (SIGINT in the driver) stops submitting; the tasks in flight end
their stores and their rows come back. A second Ctrl-C cancels them: each
stops at a decision boundary, keeping what it committed (the next job
resumes it). Then :class:`KeyboardInterrupt` is raised to the caller, after
the last row.
"""

from __future__ import annotations

import logging
import signal
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from memrefine_edge.core import ConfigurationError, MissingExtraError

from ._inputs import StoreJob
from ._results import Outcome, StoreResult
from ._task import FleetSettings, compress_one

__all__ = ["require_ray", "run_on_ray"]

_POLL_S = 0.25
_CONNECT_S = 5.0


def require_ray() -> Any:
    """The ``ray`` module, or :class:`MissingExtraError` naming the ``fleet`` extra."""
    try:
        import ray
    except ImportError:
        raise MissingExtraError("the fleet job runs on Ray, which is not installed: pip install "
                                "'memrefine-edge[fleet]'", extra="fleet") from None
    return ray


class _Stop:
    """Counts Ctrl-C presses while a job runs (a handler of SIGINT in the main thread)."""

    def __init__(self) -> None:
        self.presses = 0

    def press(self, signum: int, frame: object) -> None:  # noqa: ARG002 - a signal handler's signature
        self.presses += 1


@contextmanager
def _catch_ctrl_c(stop: _Stop) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread has signal handlers: the caller's Ctrl-C handling stays
        return
    previous = signal.signal(signal.SIGINT, stop.press)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _reachable(address: str) -> None:
    """Refuse an address nothing answers at, at once (Ray itself retries for minutes)."""
    if address == "auto":
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise ConfigurationError(f"--address {address!r} is not HOST:PORT, ray://HOST:PORT or auto")
    try:
        socket.create_connection((host, int(port)), timeout=_CONNECT_S).close()
    except OSError as exc:
        raise ConfigurationError(f"no Ray cluster answers at {address} ({exc.strerror or exc}); check --address, "
                                 "or leave it out to run on this machine") from None


def _connect(ray: Any, *, address: str | None, num_cpus: int | None) -> bool:
    """Start or join Ray; whether this job started it (and so stops it at the end)."""
    if ray.is_initialized():
        return False
    quiet = {"logging_level": logging.ERROR, "log_to_driver": False}
    if address:
        _reachable(address)
        try:
            ray.init(address=address, **quiet)
        except ConnectionError as exc:
            raise ConfigurationError(f"cannot join the Ray cluster at {address}: {exc}") from None
    else:
        ray.init(num_cpus=num_cpus, include_dashboard=False, **quiet)
    return True


def _row_of(ray: Any, ref: Any, job: StoreJob, *, retries: int) -> StoreResult:
    """The row a finished task returned, or one that says how its task ended without one."""
    exc_types = ray.exceptions
    try:
        return ray.get(ref)
    except exc_types.TaskCancelledError:
        outcome, error = Outcome.INTERRUPTED, "cancelled before it ended; the next job resumes its run"
    except exc_types.RayTaskError as exc:
        outcome, error = Outcome.FAILED, f"the task failed: {str(exc).strip().splitlines()[-1]}"
    except exc_types.RayError as exc:  # the worker (or its node) died on every try
        outcome, error = Outcome.FAILED, (f"its worker died {retries + 1} time(s) ({type(exc).__name__}); the "
                                          "committed part of its run is kept and the next job resumes it")
    return StoreResult(path=job.path, outcome=outcome, error=error, budget=job.budget, source=job.source,
                       finished_at=time.time())


def run_on_ray(jobs: Iterator[StoreJob], settings: FleetSettings, *, address: str | None = None,
               num_cpus: int | None = None, window: int | None = None,
               max_retries: int = 3) -> Iterator[StoreResult]:
    """Run :func:`~memrefine_edge.fleet._task.compress_one` on Ray for each job; rows as stores end.

    ``window``: tasks in flight at most (default: twice the cluster's CPUs).
    Ray is started or joined here, before the first row is asked for (a
    cluster that cannot be joined fails now); the rows' generator raises
    :class:`KeyboardInterrupt` after the last row when Ctrl-C stopped the job.
    """
    ray = require_ray()
    started = _connect(ray, address=address, num_cpus=num_cpus)
    return _rows(ray, started, jobs, settings, window=window, max_retries=max_retries)


def _rows(ray: Any, started: bool, jobs: Iterator[StoreJob], settings: FleetSettings, *, window: int | None,
          max_retries: int) -> Iterator[StoreResult]:
    stop = _Stop()
    pending: dict[Any, StoreJob] = {}
    try:
        task = ray.remote(num_cpus=1, max_retries=max_retries, retry_exceptions=False)(compress_one)
        shared = ray.put(settings)
        window = window or max(2, 2 * int(ray.cluster_resources().get("CPU", 1)))
        cancelled = False
        with _catch_ctrl_c(stop):
            more = True
            while True:
                while more and not stop.presses and len(pending) < window:
                    job = next(jobs, None)
                    if job is None:
                        more = False
                    elif job.problem is not None:  # a manifest line that names no store: no task for it
                        yield StoreResult(path=job.path, outcome=Outcome.FAILED, error=job.problem,
                                          budget=job.budget, source=job.source, finished_at=time.time())
                    else:
                        pending[task.remote(job, shared)] = job
                if not pending:
                    break
                if stop.presses >= 2 and not cancelled:
                    for ref in pending:
                        ray.cancel(ref)
                    cancelled = True
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=_POLL_S)
                if ready:  # and every other one that is ready now
                    ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=0)
                for ref in ready:
                    yield _row_of(ray, ref, pending.pop(ref), retries=max_retries)
    finally:
        for ref in pending:  # left early (the caller stopped reading): stop what is still running
            ray.cancel(ref)
        if started:
            ray.shutdown()
    if stop.presses:
        raise KeyboardInterrupt
