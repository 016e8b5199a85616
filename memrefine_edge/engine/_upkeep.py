"""Upkeep: a store that keeps itself under a size as entries are added (off unless installed).

Installed on a store, :class:`Upkeep` runs a worker thread with its own connection to the
store's file (:mod:`memrefine_edge.engine._upkeep_worker`): it embeds new entries and, when
the store is above its high watermark, runs ordinary compression passes
(:class:`~memrefine_edge.engine._compressor.Compressor`) down to the low one, while
:meth:`MemoryStore.add <memrefine_edge.store.MemoryStore.add>` returns as soon as its entry is
committed. Every pass is audited and undoable like any run.

The guarantee (sizes in the compressor's metric):

* whenever the worker is idle (:meth:`Upkeep.wait_idle` returned True), the store is at or
  under ``high_bytes``, unless a pass could not get there (its report says so: paper mode
  with no candidate left), another run blocks it (:attr:`Upkeep.blocked_by`) or it failed
  (:attr:`Upkeep.error`);
* at the return of every add, the store is at most ``high_bytes + max_lag_bytes``: an add
  that leaves it above waits for the worker, at most ``max_wait_s``. An add does not wait
  when the worker cannot help: it is blocked, failing, or its last pass could not meet its
  budget.
"""

from __future__ import annotations

import atexit
import threading
import time
import warnings
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from memrefine_edge.core import (
    BudgetError,
    CompressionReport,
    ConfigurationError,
    RunInterruptedError,
    RunLockedError,
)
from memrefine_edge.store import check_budget_bytes, get_budget

from ._upkeep_worker import Stopped, UpkeepWorker

if TYPE_CHECKING:  # pragma: no cover
    from memrefine_edge.store import MemoryStore

    from ._compressor import Compressor

__all__ = ["Upkeep", "DEFAULT_MAX_WAIT_S"]

#: How long an add waits at most for the worker to bring the store back within the lag (seconds).
DEFAULT_MAX_WAIT_S = 10.0
#: The default lag, as a share of the high watermark (at least; see :class:`Upkeep`).
DEFAULT_LAG_SHARE = 0.1

_INSTALLED: weakref.WeakSet[Upkeep] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    """At interpreter exit, stop the workers of stores left open (each at its next step, resumable)."""
    for upkeep in list(_INSTALLED):
        upkeep.close()


class Upkeep:
    """Keep a store under a size by itself, as entries are added (off unless installed).

    Watermarks, in bytes of the compressor's metric: when an add takes the
    store above ``high_bytes``, a compression pass runs down to
    ``low_bytes`` (a gap between the two keeps passes rare). Without
    watermarks, the store's standing budget (:mod:`memrefine_edge.store._budget`)
    is the high one and ``headroom`` below it the low one, read at every add,
    so ``memrefine budget set`` changes them for a running assistant; with no
    standing budget (or one in another metric) no pass runs. Install it with
    :meth:`install`; every pass is an ordinary audited, undoable run.

    Background (the default): a worker thread with its own connection to the
    store's file embeds new entries and runs the passes; an add only commits
    its entry and wakes the worker. ``max_lag_bytes`` (default: the gap
    between the watermarks, at least a tenth of the high one) bounds how far
    above ``high_bytes`` an add may leave the store: one that leaves it
    further waits for the worker, at most ``max_wait_s`` seconds (``None``:
    as long as the worker works). :meth:`wait_idle` waits until the worker
    has nothing left to do. The worker stops with the store (:meth:`MemoryStore.close
    <memrefine_edge.store.MemoryStore.close>`) or with :meth:`close`: a pass
    in progress stops after its current step and resumes at the next start
    (the run journal keeps it). A worker that dies is started again by the
    next add (or :meth:`wait_idle`); its interrupted pass resumes then.
    ``background=False``: the pass runs inside the add that crossed the
    watermark, on the caller's connection (the add blocks for it).

    An add never fails because of upkeep. While another process compresses
    the store the worker tries again shortly (an inline pass is skipped).
    While an interrupted run with other arguments waits on the store (a
    crashed ``memrefine compress``), passes are skipped: :attr:`blocked_by`
    names that run and a ``RuntimeWarning`` is issued once per run; finish it
    or undo it, and the next add above the watermark compresses again. Any
    other error of a pass (a model that fails, a budget recorded unreadably, a
    full disk) is kept in :attr:`error` and issued as a ``RuntimeWarning``
    once per distinct error; the next add above the watermark tries again.
    The worker's warnings are issued on the caller's thread, by the next add
    or :meth:`wait_idle`.
    """

    def __init__(self, compressor: Compressor, *, high_bytes: int | None = None, low_bytes: int | None = None,
                 headroom: float = 0.1, max_lag_bytes: int | None = None,
                 max_wait_s: float | None = DEFAULT_MAX_WAIT_S, background: bool = True) -> None:
        if (high_bytes is None) != (low_bytes is None):
            raise BudgetError("give both high_bytes and low_bytes, or neither (the store's standing budget)")
        if high_bytes is not None:
            check_budget_bytes(high_bytes)
            check_budget_bytes(low_bytes)
        if high_bytes is not None and not 0 < low_bytes <= high_bytes:  # type: ignore[operator]
            raise BudgetError(f"need 0 < low_bytes <= high_bytes, got low {low_bytes!r}, high {high_bytes!r}")
        if not 0 <= headroom < 1:
            raise BudgetError(f"headroom must be in [0, 1), got {headroom!r}")
        if max_lag_bytes is not None and (isinstance(max_lag_bytes, bool) or not isinstance(max_lag_bytes, int)
                                          or max_lag_bytes < 0):
            raise BudgetError(f"max_lag_bytes must be a whole number of bytes >= 0, got {max_lag_bytes!r}")
        if max_wait_s is not None and (isinstance(max_wait_s, bool) or not isinstance(max_wait_s, (int, float))
                                       or not max_wait_s >= 0):
            raise ConfigurationError(f"max_wait_s must be a number of seconds >= 0 or None, got {max_wait_s!r}")
        self.headroom = headroom
        self.compressor = compressor
        self.high_bytes = high_bytes
        self.low_bytes = low_bytes
        self.max_lag_bytes = max_lag_bytes
        self.max_wait_s = max_wait_s
        #: Whether passes run on a worker thread (else inside the add that crossed the watermark).
        self.background = bool(background)
        self.reports: list[CompressionReport] = []
        #: The interrupted run that made the last pass skip, or None.
        self.blocked_by: str | None = None
        #: The error that made the last pass fail, or None (the add itself succeeded).
        self.error: Exception | None = None
        #: Adds that waited for the worker (the store was more than the lag above ``high_bytes``).
        self.waits = 0
        #: Of those, adds that returned after ``max_wait_s`` with the store still beyond the lag.
        self.wait_timeouts = 0
        #: Times the worker thread died of an error outside a pass and was started again.
        self.restarts = 0
        self._running = False  # an inline pass is in progress (background=False)
        self._cond = threading.Condition()
        self._worker: UpkeepWorker | None = None
        self._installed = False
        self._notes: list[str] = []  # warnings of the worker, issued on the caller's thread
        self._checkpoint_saved: int | None = None  # the store's wal_autocheckpoint before install
        self._last_crash: tuple[type, str] | None = None  # how the worker last died (said once)

    # --- installation --------------------------------------------------------

    def install(self) -> "Upkeep":
        """Hook into the compressor's store (and start the worker); returns self."""
        store = self.compressor.store
        if store.read_only:
            raise ConfigurationError("upkeep needs a store opened for writing, not read-only")
        if self._installed:
            return self
        store.after_add.append(self)
        store.before_close.append(self._store_closing)
        if self.background:
            store.add_guards.append(self._caller_busy)
            store.search_guards.append(self._caller_busy)
            # The worker's commits copy the write-ahead log into the file; the caller's adds never do.
            self._checkpoint_saved = int(store.pragma("wal_autocheckpoint"))
            store.pragma("wal_autocheckpoint", 0)
        self._installed = True
        _INSTALLED.add(self)
        if self.background:
            self._start_worker(resume=True)
        return self

    def uninstall(self) -> None:
        """Stop the worker (see :meth:`close`) and remove the hooks."""
        self.close()

    def close(self) -> None:
        """Stop the worker and remove the hooks; returns once no thread of this upkeep runs.

        A pass in progress stops after its current step (a decision, an
        embedding batch) and stays resumable: the next start finishes it.
        Closing the store closes its upkeep.
        """
        with self._cond:
            worker = self._worker
            if worker is not None:
                worker.stopping = True
            self._cond.notify_all()
        if worker is not None and worker is not threading.current_thread():
            worker.join()
        self._worker = None
        if not self._installed:
            return
        self._installed = False
        _INSTALLED.discard(self)
        store = self.compressor.store
        while self in store.after_add:
            store.after_add.remove(self)
        while self._store_closing in store.before_close:
            store.before_close.remove(self._store_closing)
        while self._caller_busy in store.add_guards:
            store.add_guards.remove(self._caller_busy)
        while self._caller_busy in store.search_guards:
            store.search_guards.remove(self._caller_busy)
        if self._checkpoint_saved is not None:
            try:
                store.pragma("wal_autocheckpoint", self._checkpoint_saved)
            except Exception:  # a store whose connection is gone: nothing to restore
                pass
            self._checkpoint_saved = None

    def __enter__(self) -> "Upkeep":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _store_closing(self, store: MemoryStore) -> None:
        self.close()

    # --- sizes ---------------------------------------------------------------

    def watermarks(self, store: MemoryStore) -> tuple[int, int] | None:
        """``(high, low)`` in bytes now: the given ones, or from the standing budget (None: no budget)."""
        if self.high_bytes is not None and self.low_bytes is not None:
            return self.high_bytes, self.low_bytes
        standing = get_budget(store)
        if standing is None or standing.metric != self.compressor.metric:
            return None
        return standing.bytes, max(1, int(standing.bytes * (1 - self.headroom)))

    def lag_bytes(self, marks: tuple[int, int]) -> int:
        """How far above the high watermark an add may leave the store (``max_lag_bytes`` or its default)."""
        if self.max_lag_bytes is not None:
            return self.max_lag_bytes
        high, low = marks
        return max(high - low, int(high * DEFAULT_LAG_SHARE))

    # --- the add hook --------------------------------------------------------

    def __call__(self, store: MemoryStore) -> CompressionReport | None:
        """After a committed add: wake the worker, and wait for it while the store is beyond the lag
        (background); or run the pass here (``background=False``)."""
        if not self.background:
            return self._inline(store)
        self._say()
        with self._cond:
            worker = self._worker
            if worker is None or not worker.is_alive():
                if not self._installed:
                    return None
                worker = self._start_worker(resume=True, locked=True)
            worker.wanted = True
            self._cond.notify_all()
        try:
            self._hold_lag(store)
        except Exception as exc:  # a budget recorded unreadably, say: the add is committed and must not fail
            self.failed(exc)
        self._say()
        return None

    @contextmanager
    def _caller_busy(self, store: MemoryStore) -> Iterator[None]:
        """Around every add and search on the caller's store: the worker steps aside (see
        UpkeepWorker.step_done)."""
        worker = self._worker
        if worker is None:
            yield
            return
        with self._cond:
            worker.caller_busy += 1
        try:
            yield
        finally:
            with self._cond:
                worker.caller_busy -= 1
                if not worker.caller_busy:
                    self._cond.notify_all()

    def _hold_lag(self, store: MemoryStore) -> None:
        """Wait while the store is more than the lag above the high watermark and the worker can help."""
        marks = self.watermarks(store)
        if marks is None:
            return
        limit = marks[0] + self.lag_bytes(marks)
        metric = self.compressor.metric
        if store.running_size(metric) <= limit:
            return
        deadline = None if self.max_wait_s is None else time.monotonic() + self.max_wait_s
        counted: UpkeepWorker | None = None  # the worker told that this add waits (its pass hurries)
        with self._cond:
            try:
                while store.running_size(metric) > limit:
                    worker = self._worker
                    if worker is None or not worker.can_help():
                        return
                    if counted is None:
                        self.waits += 1
                        counted = worker
                        worker.waiting += 1
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        self.wait_timeouts += 1
                        return
                    # The worker wakes this add once the size is down to the limit (or its state changes);
                    # the timeout only bounds a missed wake-up.
                    worker.watch.append(limit)
                    try:
                        self._cond.wait(0.5 if left is None else min(left, 0.5))
                    finally:
                        worker.watch.remove(limit)
            finally:
                if counted is not None:
                    counted.waiting -= 1

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until the worker has nothing left to do; True if it has, False if ``timeout`` ran out first
        or the worker died twice meanwhile (an error outside a pass: see the warnings and :attr:`restarts`).

        Then the store is within ``high_bytes``, unless the last pass could not get there
        (``reports[-1].budget_met``), another run blocks upkeep (:attr:`blocked_by`) or it failed
        (:attr:`error`). The worker's warnings are issued here. Without a worker (not installed,
        ``background=False``) it returns True at once.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        restarted = False
        try:
            with self._cond:
                while True:
                    worker = self._worker
                    if worker is None or not self._installed:
                        return True
                    if not worker.is_alive():
                        if not worker.wanted:
                            return True
                        if restarted:
                            return False
                        worker = self._start_worker(resume=True, locked=True)
                        restarted = True
                    if not worker.wanted and not worker.busy:
                        return True
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        return False
                    self._cond.wait(0.5 if left is None else min(left, 0.5))
        finally:
            self._say()

    # --- passes --------------------------------------------------------------

    def _start_worker(self, *, resume: bool, locked: bool = False) -> UpkeepWorker:
        """A new worker thread (the previous one, if any, has ended); ``resume``: it looks for an
        interrupted pass first."""
        def start() -> UpkeepWorker:
            old = self._worker
            if old is not None and old.crashed is not None:
                self.restarts += 1
            worker = UpkeepWorker(self, cond=self._cond, resume=resume)
            self._worker = worker
            worker.start()
            return worker

        if locked:
            return start()
        with self._cond:
            return start()

    def _inline(self, store: MemoryStore) -> CompressionReport | None:
        # A merge inside the pass adds an entry too: never start a pass from within one.
        if self._running:
            return None
        self._running = True
        try:
            marks = self.watermarks(store)
            if marks is None or store.running_size(self.compressor.metric) <= marks[0]:
                return None
            outcome = self.attempt(self.compressor, marks[1])
        finally:
            self._running = False
        self._say(stacklevel=4)
        return outcome if isinstance(outcome, CompressionReport) else None

    def attempt(self, compressor: Compressor, low: int) -> CompressionReport | RunLockedError | None:
        """One pass down to ``low``: its report; the :class:`RunLockedError` when another compression holds
        the store; None when it was skipped or failed (:attr:`blocked_by`, :attr:`error`, a warning noted)."""
        try:
            report = compressor.run(budget_bytes=low)
        except RunLockedError as exc:
            # Another process is compressing this store: the add is committed and must not look failed.
            return exc
        except RunInterruptedError as exc:
            # Not ours to finish or undo: that run has its own method and budget.
            if self.blocked_by != exc.run_id:
                self.note(f"memory upkeep skipped: {exc}")
            self.blocked_by = exc.run_id
            return None
        except Stopped:
            raise
        except Exception as exc:  # the add is committed: raising would say it was not stored
            self.failed(exc)
            return None
        self.blocked_by = None
        self.error = None
        self.reports.append(report)
        return report

    # --- warnings ------------------------------------------------------------

    def failed(self, exc: Exception) -> None:
        """Keep an error of upkeep in :attr:`error`, and say it once per distinct error."""
        if self.error is None or (type(exc), str(exc)) != (type(self.error), str(self.error)):
            self.note(f"memory upkeep failed (the entry was stored; the next add tries again): "
                      f"{type(exc).__name__}: {exc}")
        self.error = exc

    def crashed(self, exc: BaseException) -> None:
        """The worker thread died of ``exc`` outside a pass's error handling: say so, once per distinct error."""
        key = (type(exc), str(exc))
        if key != self._last_crash:
            self.note(f"memory upkeep worker stopped ({type(exc).__name__}: {exc}); the next add starts it again "
                      "and resumes its pass")
        self._last_crash = key

    def note(self, message: str) -> None:
        """A warning for the user, issued on the caller's thread (inline: at once; else by the next add or
        :meth:`wait_idle`)."""
        with self._cond:
            self._notes.append(message)

    def _say(self, stacklevel: int = 3) -> None:
        with self._cond:
            notes, self._notes = self._notes, []
        for message in notes:
            warnings.warn(message, RuntimeWarning, stacklevel=stacklevel)
