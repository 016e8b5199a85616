"""One store compressed as ``memrefine compress`` does it: the run lock, the pipeline, the standing budget.

The command line and the fleet job (:mod:`memrefine_edge.fleet`) both call
:func:`compress_store`, so a store compressed by either ends the same way.
A budget given here becomes the store's standing budget once the run is
accepted; given again, the same budget reuses the recorded bytes, so
repeating a call finds the store within its budget and changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memrefine_edge.core import BudgetError, CompressionReport, Progress, StoreNotFoundError
from memrefine_edge.store import (
    MemoryStore,
    RunLock,
    check_path_kind,
    check_store_file,
    get_budget,
    parse_budget,
    resolve_target,
    set_budget,
)

from ._compressor import Compressor
from ._pipeline import Backends, PipelineConfig, build

if TYPE_CHECKING:  # pragma: no cover
    from memrefine_edge.backends import Encoder

__all__ = ["StoreRun", "compress_store"]


@dataclass(frozen=True)
class StoreRun:
    """What :func:`compress_store` did: the run's report, and what to tell the user about the budget.

    ``message``: ``None``, or one line saying the standing budget changed
    (``budget changed: ...``) or was kept because another command set it
    while the run started (``budget kept: ...``).
    """

    report: CompressionReport
    message: str | None


def compress_store(db: Path, *, budget: float | None = None, budget_bytes: int | None = None,
                   metric: str | None = None, mode: str = "live", neighbours: int = 8,
                   config: PipelineConfig | None = None,
                   backends: Backends | None = None, resume: bool = False, max_decisions: int | None = None,
                   min_similarity: float | None = None, progress: Callable[[Progress], None] | None = None,
                   embed_progress: Callable[[int, int], None] | None = None,
                   store_options: dict[str, Any] | None = None, encoder: "Encoder | None" = None,
                   max_merged_bytes: int | None = None) -> StoreRun:
    """Compress the store at ``db`` (which must exist) to its budget, continuing an interrupted run.

    ``budget`` (a ratio of the size now) or ``budget_bytes``; neither: the
    store's standing budget (a :class:`BudgetError` if it has none). ``mode``,
    ``neighbours`` and ``max_merged_bytes`` as :class:`Compressor` takes them (default: live mode).
    ``config``/``backends`` assemble the pipeline (:func:`build`;
    ``encoder``: one already loaded, to share between calls, instead of a new one);
    ``store_options`` go to :class:`MemoryStore` (``max_file_bytes``,
    ``synchronous``). A store whose run lock another process holds raises
    :class:`~memrefine_edge.core.RunLockedError` before any model loads; a
    path that names no store raises :class:`~memrefine_edge.core.StoreNotFoundError`
    or :class:`~memrefine_edge.core.NotAStoreError` with nothing created beside it.
    """
    check_path_kind(db)
    if not Path(db).exists():
        raise StoreNotFoundError(f"no memory store at {db} (create one with `memrefine import`)")
    check_store_file(db)  # a file that is not a store is refused untouched: no lock file made beside it
    with RunLock(db):  # fail fast: a busy store is reported before the models load (Compressor.run locks again)
        pass
    parts = build(config, backends=backends, encoder=encoder)
    with MemoryStore(db, create=False, **(store_options or {})) as store:
        unfinished = store.journal.unfinished_run()
        # An interrupted run started with exactly this budget (by the library, say) continues as it was.
        as_started = unfinished is not None and (budget, budget_bytes) != (None, None) and (
            unfinished.params.get("budget"), unfinished.params.get("budget_bytes")) == (budget, budget_bytes)
        change = None
        if not resume and not as_started:
            budget_bytes, metric, change = _standing_target(store, budget=budget, budget_bytes=budget_bytes,
                                                            metric=metric, encoder=parts.encoder)
            budget = None
        comp = Compressor(store, encoder=parts.encoder, method=parts.method, merger=parts.merger,
                          metric=metric or "json", mode=mode, neighbours=neighbours, min_similarity=min_similarity,
                          max_merged_bytes=max_merged_bytes, progress=progress,
                          embed_progress=embed_progress)
        # A new standing budget is recorded only once the run is accepted, with the run's start: a
        # call refused or failed before it (a broken model file, an interrupted run with another
        # budget) leaves the standing budget as it was.
        report = comp.run(budget=budget, budget_bytes=budget_bytes, resume=resume, max_decisions=max_decisions,
                          on_accept=change.record if change is not None else None)
    return StoreRun(report=report, message=change.message if change is not None else None)


class _BudgetChange:
    """A standing budget to record when the run is accepted (:meth:`record`), and what to say then.

    ``seen`` is the standing budget when the target was worked out: if another
    command (`memrefine budget set`) changed it meanwhile, that one stays,
    and the run goes on to its own target.
    """

    def __init__(self, store: MemoryStore, *, target: int, metric: str, spec: str, seen: Any,
                 message: str | None) -> None:
        self.store, self.target, self.metric, self.spec, self.seen = store, target, metric, spec, seen
        self.message = message

    def record(self) -> None:
        now = get_budget(self.store)
        if now != self.seen:
            self.message = (f"budget kept: it was set to {now.spec if now else 'none'} while this run started; "
                            f"the run compresses to its own target ({self.target:,} B {self.metric})")
            return
        set_budget(self.store, target_bytes=self.target, metric=self.metric, spec=self.spec)


def _standing_target(store: MemoryStore, *, budget: float | None, budget_bytes: int | None, metric: str | None,
                     encoder: "Encoder") -> tuple[int, str, _BudgetChange | None]:
    """The byte target of a compress call, through the store's standing budget.

    No budget given: the standing one (an error if there is none). A budget
    given: the same one as recorded (same value, same metric) reuses the
    recorded bytes, so repeating a command does not compress further; another
    one is validated against the store as it is now, and returned as the
    change to record once the run is accepted (nothing is written here).
    """
    standing = get_budget(store)
    if budget is None and budget_bytes is None:
        if standing is None:
            raise BudgetError(f"{store.path} has no budget: give --budget RATIO or --budget-bytes N, or set one "
                              "with `memrefine budget set`")
        if metric is not None and metric != standing.metric:
            raise BudgetError(f"the store's budget is in the {standing.metric} metric, not {metric}; set another "
                              "with `memrefine budget set --metric`")
        return standing.bytes, standing.metric, None
    metric = metric or "json"
    spec = f"{Decimal(repr(budget)):f}" if budget is not None else str(budget_bytes)
    if standing is not None and standing.metric == metric and _same_budget(standing.spec, budget, budget_bytes):
        return standing.bytes, metric, None
    target = resolve_target(store, metric=metric, budget=budget, budget_bytes=budget_bytes, dim=encoder.dim)
    message = (f"budget changed: {standing.spec} ({standing.bytes:,} B {standing.metric}) -> {spec} "
               f"({target:,} B {metric})") if standing is not None else None
    return target, metric, _BudgetChange(store, target=target, metric=metric, spec=spec, seen=standing,
                                         message=message)


def _same_budget(spec: str, budget: float | None, budget_bytes: int | None) -> bool:
    """Whether the recorded budget text ``spec`` says the same as the budget given (``0.5`` is ``50%``)."""
    try:
        return parse_budget(spec) == (budget, budget_bytes)
    except BudgetError:  # recorded under older, looser rules: not the same
        return False
