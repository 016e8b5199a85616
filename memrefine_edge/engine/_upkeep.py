"""Upkeep: a store that keeps itself under a size as entries are added (off unless installed).

A hook on :meth:`MemoryStore.add <memrefine_edge.store.MemoryStore.add>`: when an add takes the
store above a high watermark, an ordinary compression run (:class:`~memrefine_edge.engine._compressor.Compressor`)
takes it down to a low one. Every pass is audited and undoable like any run.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

from memrefine_edge.core import BudgetError, CompressionReport, RunInterruptedError, RunLockedError
from memrefine_edge.store import check_budget_bytes, get_budget

if TYPE_CHECKING:  # pragma: no cover
    from memrefine_edge.store import MemoryStore

    from ._compressor import Compressor

__all__ = ["Upkeep"]


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

    An add never fails because of upkeep: the entry is committed before the
    pass starts, and an add that raised would say it was not stored. While
    another process compresses the store, or while an interrupted run with
    other arguments waits on it (a crashed ``memrefine compress``), the pass
    is skipped. In the second case :attr:`blocked_by` names that run and a
    ``RuntimeWarning`` is issued once per run: finish it or undo it, and the
    next add above the watermark compresses again. Any other error of a pass
    (a model that fails, a budget recorded unreadably, a full disk) is kept
    in :attr:`error` and issued as a ``RuntimeWarning`` once per distinct
    error; the next add above the watermark tries again.
    """

    def __init__(self, compressor: Compressor, *, high_bytes: int | None = None, low_bytes: int | None = None,
                 headroom: float = 0.1) -> None:
        if (high_bytes is None) != (low_bytes is None):
            raise BudgetError("give both high_bytes and low_bytes, or neither (the store's standing budget)")
        if high_bytes is not None:
            check_budget_bytes(high_bytes)
            check_budget_bytes(low_bytes)
        if high_bytes is not None and not 0 < low_bytes <= high_bytes:  # type: ignore[operator]
            raise BudgetError(f"need 0 < low_bytes <= high_bytes, got low {low_bytes!r}, high {high_bytes!r}")
        if not 0 <= headroom < 1:
            raise BudgetError(f"headroom must be in [0, 1), got {headroom!r}")
        self.headroom = headroom
        self.compressor = compressor
        self.high_bytes = high_bytes
        self.low_bytes = low_bytes
        self.reports: list[CompressionReport] = []
        #: The interrupted run that made the last pass skip, or None.
        self.blocked_by: str | None = None
        #: The error that made the last pass fail, or None (the add itself succeeded).
        self.error: Exception | None = None
        self._running = False

    def install(self) -> "Upkeep":
        """Hook into the compressor's store; returns self."""
        self.compressor.store.after_add.append(self)
        return self

    def uninstall(self) -> None:
        """Remove the hook."""
        self.compressor.store.after_add.remove(self)

    def watermarks(self, store: MemoryStore) -> tuple[int, int] | None:
        """``(high, low)`` in bytes now: the given ones, or from the standing budget (None: no budget)."""
        if self.high_bytes is not None and self.low_bytes is not None:
            return self.high_bytes, self.low_bytes
        standing = get_budget(store)
        if standing is None or standing.metric != self.compressor.metric:
            return None
        return standing.bytes, max(1, int(standing.bytes * (1 - self.headroom)))

    def __call__(self, store: MemoryStore) -> CompressionReport | None:
        # A merge inside the pass adds an entry too: never start a pass from within one.
        if self._running:
            return None
        self._running = True
        try:
            marks = self.watermarks(store)
            if marks is None or store.running_size(self.compressor.metric) <= marks[0]:
                return None
            report = self.compressor.run(budget_bytes=marks[1])
        except RunLockedError:
            # Another process is compressing this store: the add is committed and
            # must not look failed; the next add above the watermark tries again.
            return None
        except RunInterruptedError as exc:
            # Not ours to finish or undo: that run has its own method and budget.
            if self.blocked_by != exc.run_id:
                warnings.warn(f"memory upkeep skipped: {exc}", RuntimeWarning, stacklevel=2)
            self.blocked_by = exc.run_id
            return None
        except Exception as exc:  # the add is committed: raising would say it was not stored
            if self.error is None or (type(exc), str(exc)) != (type(self.error), str(self.error)):
                warnings.warn(f"memory upkeep failed (the entry was stored; the next add tries again): "
                              f"{type(exc).__name__}: {exc}", RuntimeWarning, stacklevel=2)
            self.error = exc
            return None
        finally:
            self._running = False
        self.blocked_by = None
        self.error = None
        self.reports.append(report)
        return report
