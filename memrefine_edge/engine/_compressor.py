"""The compression engine: Algorithm 1 of the paper, made resumable and auditable.

Loop: while the store is above budget, take the most cosine-similar pair of
live entries that has not been judged (:class:`~memrefine_edge.index._pairs.PairQueue`),
ask the method for a decision, apply it. The run goes through phases
(:mod:`memrefine_edge.engine._run`): the identical pairs
(:mod:`~memrefine_edge.engine._identical`), the most similar pairs
(:mod:`~memrefine_edge.engine._similar`), the deferred deletes and, in strict
mode, eviction; each works on the run's state alone and decides through one
path (:mod:`~memrefine_edge.engine._apply`). Each decision commits in one
transaction with its effects and the run's cursor (see
:mod:`memrefine_edge.store._journal`), so a run killed at any moment continues where
it stopped when the same command is given again.

Deferred deletes: a method may preserve a pair for now with
``source="deferred"`` (the memrefine method does so with ``defer_last_copies``,
:mod:`memrefine_edge.text._lastcopy`). When the candidate pairs run out with the
store still above budget, in every mode, the run takes those deletes after
all until the budget holds: the *deferred phase* (:mod:`memrefine_edge.engine._deferred`).
A run that meets its budget with the candidate pairs never takes a deferred delete.

Budget modes (:class:`~memrefine_edge.core.Mode`):

``live`` (default)
    Bounded work, hard budget. Only the entries that changed since the
    store's last live run (new ones, and the run's merges) are judged, each
    against its ``neighbours`` nearest live entries
    (:class:`~memrefine_edge.index.LocalPairs`); pairs judged before are never
    proposed again. A merge must free ``min_merge_saving`` of the shorter
    entry's text. Then deferred deletes, then eviction as in ``strict``.
    In ``live`` and ``strict`` mode a merged text may be at most
    ``max_merged_bytes`` long (default 1,000 bytes; 0: no limit), else the
    pair is preserved (source ``length``): an entry a small reader context
    takes whole, which eviction need not drop with many facts at once.
    Eviction counts how often searches returned an entry
    (:meth:`MemoryStore.uses <memrefine_edge.store.MemoryStore.uses>`) with
    ``use_weight`` (default :data:`~memrefine_edge.engine._eviction.EVICT_USE_WEIGHT`;
    0: not at all): an entry the assistant keeps finding goes later.
``paper``
    The paper's algorithm: every pair, most similar first. Stop when the
    budget is met or when no candidate pair (and no deferred delete) is
    left, even above budget: facts take precedence over the budget (paper
    §3.2, Termination). The report says which.
``strict``
    The paper's order with a hard budget. When candidates and deferred
    deletes run out above budget, entries are evicted one at a time, each
    eviction audited, least valuable first (:mod:`memrefine_edge.engine._eviction`),
    so the loop ends at or under the budget and never empties the store: a
    budget below the smallest entry the run can keep (small talk is not kept)
    is an error before anything changes, and no decision takes the run's last
    entry that fits the budget alone (a pair holding it is not proposed).
    Live mode keeps the same floor.
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memrefine_edge.core import (
    BudgetError,
    CompressionReport,
    ConfigurationError,
    EntryNotFoundError,
    Metric,
    Mode,
    Progress,
    ResumeError,
    RunInterruptedError,
    StopReason,
    pin_mmap_threshold,
    release_free_memory,
)
from memrefine_edge.methods import Method, get_method
from memrefine_edge.store import MemoryStore, RunLock, resolve_target, stored_embedding_bytes

from ._apply import DecisionPath
from ._deferred import take_deferred
from ._eviction import EVICT_USE_WEIGHT, evict_to_budget
from ._floor import StrictFloor, require_strict_floor
from ._identical import take_identical
from ._pipeline import Backends, PipelineConfig
from ._run import Outsiders, RunPlan, RunState
from ._similar import take_similar

if TYPE_CHECKING:  # pragma: no cover
    from memrefine_edge.backends import Encoder
    from memrefine_edge.judging import Merger

__all__ = ["Compressor", "MODES"]

#: The budget modes, by name (:class:`~memrefine_edge.core.Mode`).
MODES: tuple[str, ...] = tuple(m.value for m in Mode)

#: How long decisions may wait in one transaction before it commits (see :class:`Compressor`).
COMMIT_WINDOW_S = 0.05

#: Live mode's default ``min_merge_saving``: a merge must free a tenth of the shorter entry's text.
LIVE_MIN_MERGE_SAVING = 0.1
#: Live and strict mode's default ``max_merged_bytes``: a merged entry fits a 1,000-byte reader context whole
#: (the smaller context the evaluation reads; set from it, not fitted: see docs/budgets.md).
HARD_MAX_MERGED_BYTES = 1000


class Compressor:
    """Compress one store to a budget with one method.

    ``encoder`` embeds entries (and merged entries); ``method`` is a name from
    the method registry (``memrefine``, ...) or a :class:`Method` (default:
    the method a default pipeline builds, :func:`~memrefine_edge.engine.build`);
    ``merger`` writes merged entries (default: the deterministic, fact-keeping
    merge of a default pipeline). ``metric`` is the size metric of a new run
    (a resumed run keeps its own). ``min_similarity`` (default: none, as
    in the paper) ends the candidate list at pairs below that cosine; a
    popped pair below it is left unjudged. ``progress`` is called after
    every commit with a :class:`Progress`; ``embed_progress`` with
    ``(done, total)`` while entries are embedded (each batch is committed, so
    an interrupted embedding pass resumes where it stopped).

    Each decision is applied all or nothing with the run's cursor. While
    decisions come fast (no model called), they share a transaction that
    commits once it is ``commit_window_s`` old (default 50 ms): a crash then
    loses at most that much work, which the resumed run decides again, and
    other writers wait at most about that long. Once the judge or the merger
    calls a model, every decision commits on its own. ``commit_window_s=0``:
    always one commit per decision.

    A finished run ends with :meth:`MemoryStore.compact`: a VACUUM when the
    free pages and the bytes the run removed are at least a tenth of the file (``vacuum=False``: never).

    ``hurry`` (live mode) is asked between the similar phase's decisions; when
    it returns True the phase ends there: the run evicts to its target at once
    and leaves the pairs it did not judge to the next live pass (its
    ``judged_through_seq`` does not move). :class:`Upkeep` sets it to "an add
    waits beyond the lag", so a pass with many new entries does not hold the
    caller while it judges them all. ``pause`` is called between blocks of
    a run's long computations, where no decision is pending (the tiles of a
    neighbour-list build, blocks of rescanned rows, of the entries eviction
    reads): it may block, to leave the cores to another thread, or raise, to
    stop the run there (it stays resumable). :class:`Upkeep` parks its worker
    there while the caller adds or searches.

    Entries that another connection removes while a run goes on are skipped
    (their pairs drop out of the queue); entries added meanwhile are not part
    of the run (see :meth:`run`).
    """

    def __init__(
        self,
        store: MemoryStore,
        *,
        encoder: "Encoder",
        method: str | Method | None = None,
        merger: "Merger | None" = None,
        metric: str = "json",
        mode: str = "live",
        k: int = 16,
        neighbours: int = 8,
        min_similarity: float | None = None,
        min_merge_saving: float | None = None,
        max_merged_bytes: int | None = None,
        use_weight: float | None = None,
        progress: Callable[[Progress], None] | None = None,
        embed_progress: Callable[[int, int], None] | None = None,
        method_options: dict[str, Any] | None = None,
        vacuum: bool = True,
        commit_window_s: float = COMMIT_WINDOW_S,
        hurry: Callable[[], bool] | None = None,
        pause: Callable[[], None] | None = None,
    ) -> None:
        if metric not in Metric.__members__.values():
            raise ConfigurationError(f"unknown metric {metric!r}; use one of {', '.join(Metric)}")
        if mode not in Mode.__members__.values():
            raise ConfigurationError(f"unknown budget mode {mode!r}; use one of {', '.join(Mode)}")
        self.store = store
        self.encoder = encoder
        if method is None and not method_options:
            method = Backends().method(PipelineConfig())  # as a default pipeline builds it
        elif method is None:
            method = PipelineConfig().method
        self.method = method if isinstance(method, Method) else get_method(method, **(method_options or {}))
        self.merger = merger if merger is not None else Backends().merger(PipelineConfig())
        #: The size metric of a new run.
        self.metric = Metric(metric)
        #: The budget mode of a new run.
        self.mode = Mode(mode)
        self.k = k
        if not isinstance(neighbours, int) or isinstance(neighbours, bool) or neighbours < 1:
            raise ConfigurationError(f"neighbours must be a positive integer, got {neighbours!r}")
        #: Live mode: how many nearest live neighbours each changed entry is judged against.
        self.neighbours = neighbours
        if min_similarity is not None and not -1.0 <= min_similarity <= 1.0:
            raise BudgetError(f"min_similarity must be in [-1, 1], got {min_similarity!r}")
        self.min_similarity = min_similarity
        if min_merge_saving is None:
            min_merge_saving = LIVE_MIN_MERGE_SAVING if self.mode is Mode.LIVE else 0.0
        if isinstance(min_merge_saving, bool) or not (isinstance(min_merge_saving, (int, float))
                                                      and 0.0 <= min_merge_saving <= 1.0):
            raise ConfigurationError(f"min_merge_saving must be a share in [0, 1], got {min_merge_saving!r}")
        #: The share of the shorter entry's text a merge must free, else the pair is preserved.
        self.min_merge_saving = float(min_merge_saving)
        if max_merged_bytes is None:
            max_merged_bytes = 0 if self.mode is Mode.PAPER else HARD_MAX_MERGED_BYTES
        if isinstance(max_merged_bytes, bool) or not isinstance(max_merged_bytes, int) or max_merged_bytes < 0:
            raise ConfigurationError(f"max_merged_bytes must be a whole number of bytes (0: no limit), got "
                                     f"{max_merged_bytes!r}")
        #: The longest merged text (UTF-8 bytes) a merge may write, else the pair is preserved (None: no limit).
        self.max_merged_bytes: int | None = max_merged_bytes or None
        if use_weight is None:
            use_weight = EVICT_USE_WEIGHT
        if isinstance(use_weight, bool) or not (isinstance(use_weight, (int, float)) and 0.0 <= use_weight <= 10.0):
            raise ConfigurationError(f"use_weight must be a number in [0, 10], got {use_weight!r}")
        #: Eviction's weight of ln(1 + how often searches returned an entry) (0: uses do not count).
        self.use_weight = float(use_weight)
        self.progress = progress
        self.embed_progress = embed_progress
        self.vacuum = vacuum
        if not (isinstance(commit_window_s, (int, float)) and 0 <= commit_window_s <= 10):
            raise ConfigurationError(f"commit_window_s must be between 0 and 10 seconds, got {commit_window_s!r}")
        self.commit_window_s = float(commit_window_s)
        #: Live mode: asked between the similar phase's decisions (see the class docstring).
        self.hurry = hurry
        #: Called between blocks of a run's long computations (see the class docstring).
        self.pause = pause

    # --- budget --------------------------------------------------------------

    def target_bytes(self, *, budget: float | None = None, budget_bytes: int | None = None) -> int:
        """Validate a budget (ratio of the current size, or bytes) and return it in bytes (:func:`resolve_target`).

        In ``strict`` mode the budget must also hold an entry the run can keep
        (:func:`~memrefine_edge.engine._floor.strict_floor_bytes`): one that states
        something and fits it alone. Otherwise :class:`BudgetError` names the
        smallest such size, before anything changes.
        """
        target = resolve_target(self.store, metric=self.metric, budget=budget, budget_bytes=budget_bytes,
                                dim=self.encoder.dim)
        if self.mode.hard:
            require_strict_floor(self.store, metric=self.metric, target=target,
                                 embedding_bytes=stored_embedding_bytes(self.encoder.dim))
        return target

    # --- the loop ------------------------------------------------------------

    def run(
        self,
        *,
        budget: float | None = None,
        budget_bytes: int | None = None,
        resume: bool = False,
        max_decisions: int | None = None,
        on_accept: Callable[[], None] | None = None,
    ) -> CompressionReport:
        """Compress to the budget; continue an interrupted run if there is one.

        An interrupted run with the same method, metric, mode and budget is
        continued automatically (its recorded byte target is kept, so the
        result is the same as an uninterrupted run). A ratio ``budget`` is of
        the store's size now: calling this again compresses further (the CLI
        keeps a standing budget instead, see :mod:`memrefine_edge.store._budget`).
        Entries other writers add while the run goes on are left to the next
        run: they are not compressed, and their bytes do not count against
        this run's target (``added_during_run`` in the report). ``resume=True``
        continues it whatever budget was given now. ``max_decisions`` stops
        early (the run stays resumable).

        ``on_accept`` is called once the run is accepted (every model loaded,
        the budget valid, no other run in its way) and before it changes the
        memory: inside the transaction that records a new run, so what it
        writes commits with the run's start or not at all; or when the store
        is found within the budget. A refused or failed command never calls it
        (the CLI records a new standing budget this way).
        """
        with RunLock(self.store.path):
            # Every model loads before anything is recorded: a broken model file
            # fails here and leaves no run behind.
            self.method.load()
            self.merger.load()
            return self._run(budget=budget, budget_bytes=budget_bytes, resume=resume, max_decisions=max_decisions,
                             on_accept=on_accept)

    def _plan(self, *, budget: float | None, budget_bytes: int | None, resume: bool) -> RunPlan:
        """The run to do: the interrupted one (with its recorded settings), or a new one (not yet recorded)."""
        journal = self.store.journal
        # Method options (tau, ...) are part of what must match for an
        # automatic resume: continuing with another threshold would silently
        # change the run.
        args = {"method": self.method.name, "metric": self.metric.value, "mode": self.mode.value,
                "budget": budget, "budget_bytes": budget_bytes, "min_similarity": self.min_similarity,
                "options": json.loads(json.dumps(self.method.describe(), default=str))}
        unfinished = journal.unfinished_run()
        if unfinished is None:
            if resume:
                raise ResumeError("there is no interrupted run to resume on this store")
            target = self.target_bytes(budget=budget, budget_bytes=budget_bytes)
            return RunPlan(None, target, 0, None, self.metric, self.mode, self.min_similarity, args)
        recorded = {k: unfinished.params.get(k) for k in args}
        if not resume and recorded != args:
            raise RunInterruptedError(
                f"run {unfinished.run_id} on this store was interrupted ({_describe(recorded)}); "
                f"rerun with the same arguments or --resume to finish it, or `memrefine undo "
                f"{unfinished.run_id}` to roll it back",
                run_id=unfinished.run_id,
            )
        if unfinished.params.get("method") != self.method.name:
            raise ResumeError(
                f"run {unfinished.run_id} was started with method {unfinished.params.get('method')!r}; "
                "resume it with that method"
            )
        # A resumed run keeps its own settings (whatever this compressor was given).
        params = unfinished.params
        return RunPlan(unfinished.run_id, int(params["target_bytes"]), unfinished.cursor, params["before"],
                       Metric(params["metric"]), Mode(params["mode"]), params.get("min_similarity"), args)

    def _run(self, *, budget: float | None, budget_bytes: int | None, resume: bool, max_decisions: int | None,
             on_accept: Callable[[], None] | None = None) -> CompressionReport:
        store, journal = self.store, self.store.journal
        clock: dict[str, float] = defaultdict(float)  # seconds per stage
        plan = self._plan(budget=budget, budget_bytes=budget_bytes, resume=resume)
        pin_mmap_threshold()  # big temporaries all along the run: map them apart (see memrefine_edge.core._memory)
        t = time.perf_counter()
        store.ensure_embeddings(self.encoder, progress=self.embed_progress)
        clock["embed"] += time.perf_counter() - t
        if plan.run_id is None:  # measured with every embedding in place, as the disk target was
            plan.before = self._sizes()
            if store.size(plan.metric) <= plan.target:
                if on_accept is not None:
                    on_accept()
                return self._report(plan, None, StopReason.ALREADY_WITHIN_BUDGET, Counter(), Counter(), 0, clock)
            with store.atomic():  # the run's start and what on_accept writes: both or neither
                if on_accept is not None:
                    on_accept()
                plan.run_id = journal.start_run(
                    self.method.name, {**plan.args, "target_bytes": plan.target, "before": plan.before, "k": self.k,
                                       "encoder": self.encoder.model_id, "start_seq": store.max_seq(),
                                       "min_merge_saving": self.min_merge_saving,
                                       "max_merged_bytes": self.max_merged_bytes,
                                       "use_weight": self.use_weight},
                )
        elif on_accept is not None:
            on_accept()
        run_id = plan.run_id
        params = journal.run(run_id).params
        created = {c for d in journal.decisions(run_id) for c in d.created_ids}
        # Runs recorded before start_seq existed: every entry then live was the run's.
        outsiders = Outsiders(store, plan.metric, int(params.get("start_seq", 1 << 62)), created)

        self.method.prepare(store)

        actions: Counter[str] = Counter()
        sources: Counter[str] = Counter()
        # A delete of a deferred pair is a deferred delete taken: a preserved pair is never proposed again.
        deferred = {(a, b) for a, b, _ in journal.deferrals()}
        deferred_taken = 0
        for d in journal.decisions(run_id):  # a resumed run reports the whole run
            actions[d.action] += 1
            sources[d.source] += 1
            if d.action == "delete" and (d.a_id, d.b_id) in deferred:
                deferred_taken += 1
        for source, n in journal.preserve_counts(run_id).items():  # preserves are counted, not audited
            actions["preserve"] += n
            sources[source] += n
        del deferred
        llm_calls_before = self.method.llm_calls
        with store.long_write():  # one commit per decision, fewer copies of the log into the file
            # A resumed run keeps its own share (runs recorded before it existed took every merge).
            path = DecisionPath(store=store, method=self.method, merger=self.merger, encoder=self.encoder,
                                run_id=run_id, metric=plan.metric, clock=clock, created=outsiders.created,
                                min_merge_saving=float(params.get("min_merge_saving", 0.0)),
                                max_merged_bytes=params.get("max_merged_bytes"))
            floor = None
            later = store.sizes_after(outsiders.start_seq) if plan.mode.hard else {}
            if plan.mode.hard:  # the run's own entries when it started (those inserted up to its start)
                floor = StrictFloor(store, metric=plan.metric, target=plan.target,
                                    originals=[i for i in store.ids() if i not in later])
            changed: set[str] = set()
            since = 0
            if plan.mode is Mode.LIVE:  # the run's entries inserted since the last live pass, and its merges
                since = self._judged_through(run_id)
                changed = {i for i in store.sizes_after(since) if i not in later or i in outsiders.created}
            state = RunState(store=store, plan=plan, path=path, outsiders=outsiders, actions=actions,
                             sources=sources, deferred_taken=deferred_taken, clock=clock, floor=floor, k=self.k,
                             model_id=self.encoder.model_id, commit_window_s=self.commit_window_s,
                             max_decisions=max_decisions, progress=self.progress,
                             neighbours=self.neighbours if plan.mode is Mode.LIVE else None, changed=changed,
                             changed_after=since, hurry=self.hurry, pause=self.pause,
                             use_weight=float(params.get("use_weight", 0.0)))
            stop = self._loop(state)
        release_free_memory()  # what the run's queue left in the allocator (see memrefine_edge.core._memory)
        llm_calls = self.method.llm_calls - llm_calls_before
        removed = journal.removed_bytes(run_id)  # the run's decisions are all made: read once
        mark = self._judged_mark(plan, state, stop)  # as final: computed once, reported each time
        report = self._report(plan, state, stop, actions, sources, llm_calls, clock, removed, mark)
        if not stop.resumable:  # a run stopped by max_decisions stays resumable
            journal.finish_run(run_id, report.as_dict())
            # Deletes and merges left pages part-empty: pack the file when that pays (MemoryStore.compact).
            t = time.perf_counter()
            # The run's removals left room inside pages: about the disk bytes the memory lost.
            freed = int(plan.before.get("disk_bytes", 0)) - int(report.after["disk_bytes"]) if plan.before else 0
            if self.vacuum and store.compact(freed_bytes=freed):
                clock["vacuum"] += time.perf_counter() - t
            # The sizes as the run leaves the file: with its report written (and the VACUUM, if any). A
            # report of another length can move the file across a page: measure again until it holds still.
            for _ in range(4):
                written = report
                report = self._report(plan, state, stop, actions, sources, llm_calls, clock, removed, mark)
                journal.finish_run(run_id, report.as_dict())
                if report.after == written.after:
                    break
        return report

    @staticmethod
    def _loop(run: RunState) -> StopReason:
        """Decide pairs until the budget holds or none is left; returns why it stopped.

        First the pairs of identical entries (:mod:`memrefine_edge.engine._identical`), then the most
        similar pairs (:mod:`memrefine_edge.engine._similar`), then deferred deletes and, in strict mode,
        eviction (:mod:`memrefine_edge.engine._eviction`).
        """
        stopped = take_identical(run).stop
        if stopped:
            return stopped
        stop = StopReason.BUDGET_MET
        if run.over():
            stop = take_similar(run).stop or stop
        if stop.resumable:
            return stop
        if stop is StopReason.BUDGET_MET and run.plan.resumed and run.done == 0:
            # Resumed after the last change: said as the uninterrupted run said it.
            if run.actions["evict"]:
                stop = StopReason.BUDGET_MET_BY_EVICTION_LIVE if run.plan.mode is Mode.LIVE else \
                    StopReason.BUDGET_MET_BY_EVICTION
            elif run.deferred_taken:
                stop = StopReason.BUDGET_MET_BY_DEFERRED
        if not run.over():
            return stop
        taken = run.deferred_taken
        stopped = take_deferred(run).stop
        if stopped:
            return stopped
        if not run.over():
            return StopReason.BUDGET_MET_BY_DEFERRED if run.deferred_taken > taken else StopReason.BUDGET_MET
        if run.plan.mode.hard:
            evict_to_budget(run)
            met = StopReason.BUDGET_MET_BY_EVICTION_LIVE if run.plan.mode is Mode.LIVE else \
                StopReason.BUDGET_MET_BY_EVICTION
            stop = met if not run.over() else StopReason.NO_ENTRY_FITS
        return stop

    def _judged_through(self, run_id: str) -> int:
        """The insertion number up to which every entry was judged against its nearest neighbours: the
        highest a finished live run (not undone) recorded, other than ``run_id`` (0: none yet)."""
        marks = [int(r.report.get("judged_through_seq") or 0) for r in self.store.journal.runs()
                 if r.run_id != run_id and r.status == "done" and r.report
                 and r.params.get("mode") == Mode.LIVE.value]
        return max(marks, default=0)

    # --- reporting -----------------------------------------------------------

    def _sizes(self) -> dict[str, int]:
        store = self.store
        disk = store.refresh_disk() if not store.read_only else store.disk_bytes()
        return {"entries": len(store), "json_bytes": store.json_bytes(), "disk_bytes": disk,
                "file_bytes": store.file_bytes()}

    def _report(self, plan: RunPlan, run: RunState | None, stop: StopReason, actions: Counter[str],
                sources: Counter[str], llm_calls: int, clock: dict[str, float],
                removed: dict[str, int] | None = None, judged_mark: int | None = None) -> CompressionReport:
        """The report of ``plan``'s run (``run``: its state in this session; None when no run was recorded;
        ``removed``: the bytes its decisions removed, by action; ``judged_mark``: its
        :meth:`_judged_mark`)."""
        after = self._sizes()
        outsiders = run.outsiders.bytes() if run is not None else 0
        return CompressionReport(
            run_id=plan.run_id, method=self.method.name, metric=plan.metric.value, mode=plan.mode.value,
            target_bytes=plan.target, before=plan.before or {}, after=after,
            budget_met=after[f"{plan.metric.value}_bytes"] - outsiders <= plan.target,
            stop_reason=stop.describe(min_similarity=plan.min_similarity), actions=dict(actions),
            sources=dict(sources), llm_calls=llm_calls, decisions=sum(actions.values()), resumed=plan.resumed,
            seconds={k: round(v, 3) for k, v in clock.items()},
            added_during_run={"entries": len(run.outsiders.sizes), "bytes": outsiders} if run is not None else {},
            deferred_taken=run.deferred_taken if run is not None else 0,
            judged_through_seq=judged_mark,
            removed_bytes=dict(removed or {}),
        )

    def _judged_mark(self, plan: RunPlan, run: RunState | None, stop: StopReason) -> int | None:
        """Live mode: how far this run leaves every entry judged. When its candidates ran out, every entry
        it started with was judged (the next pass starts after them); when the budget held first, no
        further than before."""
        if run is None or plan.mode is not Mode.LIVE:
            return None
        before = run.changed_after  # the mark the run started from (_judged_through, read once)
        if run.cut_short is not None:  # up to the first entry it left not fully judged: the next pass's
            left = []
            for entry_id in run.cut_short:
                try:
                    left.append(self.store.seq_of(entry_id))
                except EntryNotFoundError:  # evicted since: nothing left to judge of it
                    continue
            return max(before, min([run.outsiders.start_seq, *(s - 1 for s in left)]))
        judged_all = run.actions["evict"] > 0 or stop.out_of_candidates or stop in (
            StopReason.BUDGET_MET_BY_DEFERRED, StopReason.BUDGET_MET_BY_EVICTION_LIVE, StopReason.NO_ENTRY_FITS)
        return max(before, run.outsiders.start_seq) if judged_all else before


def _describe(params: dict[str, Any]) -> str:
    budget = f"budget {params['budget']}" if params.get("budget") is not None else f"{params.get('budget_bytes')} bytes"
    return f"method {params.get('method')}, {budget}, metric {params.get('metric')}, mode {params.get('mode')}"
