"""The compression engine: Algorithm 1 of the paper, made resumable and auditable.

Loop: while the store is above budget, take the most cosine-similar pair of
live entries that has not been judged (:class:`~memrefine_edge.index._pairs.PairQueue`),
ask the method for a decision, apply it. Each decision commits in one
transaction with its effects and the run's cursor (see
:mod:`memrefine_edge.store._journal`), so a run killed at any moment continues where
it stopped when the same command is given again.

Deferred deletes: a method may preserve a pair for now with
``source="deferred"`` (the memrefine method does so with ``defer_last_copies``,
:mod:`memrefine_edge.text._lastcopy`). When the candidate pairs run out with the
store still above budget, in either mode, the run takes those deletes after
all until the budget holds: the *deferred phase* (:mod:`memrefine_edge.engine._deferred`).
A run that meets its budget with the candidate pairs never takes a deferred delete.

Budget modes:

``paper`` (default)
    Stop when the budget is met or when no candidate pair (and no deferred
    delete) is left, even above budget: facts take precedence over the
    budget (paper §3.2, Termination). The report says which.
``strict``
    The budget is hard. When candidates and deferred deletes run out above
    budget, entries are evicted one at a time, each eviction audited, least
    valuable first (:mod:`memrefine_edge.engine._eviction`), so the loop ends at or
    under the budget and never empties the store: a budget below the
    smallest entry the run can keep (small talk is not kept) is an error
    before anything changes, and no decision takes the run's last entry
    that fits the budget alone (a pair holding it is not proposed).
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memrefine_edge.core import (
    BudgetError,
    CompressionReport,
    ConfigurationError,
    Decision,
    DuplicateIdError,
    Entry,
    EntryNotFoundError,
    MergeOutputError,
    Progress,
    ResumeError,
    RunInterruptedError,
    pin_mmap_threshold,
    release_free_memory,
)
from memrefine_edge.judging import build_merged_entry, merged_entry_id
from memrefine_edge.methods import Method, PairContext, get_method
from memrefine_edge.store import (
    METRICS,
    MemoryStore,
    RunLock,
    quantize_embedding,
    resolve_target,
    stored_embedding_bytes,
)

from ._deferred import take_deferred
from ._eviction import StrictFloor, evict_to_budget, require_strict_floor
from ._identical import take_identical

if TYPE_CHECKING:  # pragma: no cover
    from memrefine_edge.backends import Encoder
    from memrefine_edge.judging import Merger

__all__ = ["Compressor", "MODES"]

MODES = ("paper", "strict")


@dataclass
class _Plan:
    """One run's settings: recorded ones when it resumes, the compressor's own when it is new."""

    run_id: str | None
    target: int
    step: int
    before: dict[str, int] | None
    metric: str
    mode: str
    min_similarity: float | None
    args: dict[str, Any]

    def __post_init__(self) -> None:
        self.resumed = self.run_id is not None


#: Decisions between two hand-backs of the allocator's free memory during a run (each a few ms).
TRIM_EVERY = 4096
#: How long decisions may wait in one transaction before it commits (see :class:`Compressor`).
COMMIT_WINDOW_S = 0.05


class _Tally:
    """One phase's decisions (:meth:`Compressor._phase`): its commit group, the journal step and the
    decisions made in this session; :meth:`count` books each applied decision."""

    def __init__(self, comp: Compressor, group: Any, target: int, actions: Counter[str], sources: Counter[str], *,
                 step: int, done: int, started: float, max_decisions: int | None) -> None:
        self.comp, self.group, self.target, self.actions, self.sources = comp, group, target, actions, sources
        self.step, self.done, self.started, self.max_decisions = step, done, started, max_decisions
        self.models = comp._model_calls()

    def capped(self) -> str | None:
        """Why to stop once this session has made ``max_decisions`` (the run stays resumable), else None."""
        if self.max_decisions is not None and self.done >= self.max_decisions:
            return "stopped after max_decisions (resumable)"
        return None

    def count(self, action: str, source: str) -> None:
        """An applied decision: into the report's counts, the next step; commit the group when due
        (each decision alone once a model decides)."""
        comp, group = self.comp, self.group
        self.actions[action] += 1
        self.sources[source] += 1
        self.step += 1
        self.done += 1
        comp._disk_dirty = True
        if group.window_s and comp._model_calls() != self.models:
            group.window_s = 0.0  # a model decides here: commit every decision from now on
        if group.commit_if_due():
            comp._tick(self.step, self.target, self.actions, self.started, self.done)


class _Outsiders:
    """Entries another writer added after the run started: not the run's to compress.

    They are not in the run's candidate pairs, and their bytes do not count
    against the run's target, so an assistant adding memories while a run
    goes on does not make it shrink the older entries further; the next run
    (or upkeep pass) takes them in. Kept up to date with two cheap checks per
    decision: the highest insertion number, and SQLite's ``data_version``.
    """

    def __init__(self, store: MemoryStore, metric: str, start_seq: int, created: set[str]) -> None:
        self.store, self.metric, self.start_seq, self.created = store, metric, start_seq, created
        self.sizes: dict[str, int] = {}
        self._version: int | None = None
        self._seen = start_seq

    def bytes(self) -> int:
        version, top = self.store.data_version(), self.store.max_seq()
        if version != self._version:  # another connection committed: count afresh
            self.sizes = {i: n for i, n in self.store.sizes_after(self.start_seq, self.metric).items()
                          if i not in self.created}
            self._version, self._seen = version, top
        elif top > self._seen:  # new rows on this connection: ours (merges) or another thread's
            self.sizes.update({i: n for i, n in self.store.sizes_after(self._seen, self.metric).items()
                               if i not in self.created})
            self._seen = top
        return sum(self.sizes.values())


class Compressor:
    """Compress one store to a budget with one method.

    ``encoder`` embeds entries (and merged entries); ``method`` is a name from
    the method registry (``memrefine``, ...) or a :class:`Method`;
    ``merger`` writes merged entries. ``min_similarity`` (default: none, as
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

    Entries that another connection removes while a run goes on are skipped
    (their pairs drop out of the queue); entries added meanwhile are not part
    of the run (see :meth:`run`).
    """

    def __init__(
        self,
        store: MemoryStore,
        *,
        encoder: "Encoder",
        method: str | Method = "memrefine",
        merger: "Merger | None" = None,
        metric: str = "json",
        mode: str = "paper",
        k: int = 16,
        min_similarity: float | None = None,
        progress: Callable[[Progress], None] | None = None,
        embed_progress: Callable[[int, int], None] | None = None,
        method_options: dict[str, Any] | None = None,
        vacuum: bool = True,
        commit_window_s: float = COMMIT_WINDOW_S,
    ) -> None:
        if metric not in METRICS:
            raise ConfigurationError(f"unknown metric {metric!r}; use one of {', '.join(METRICS)}")
        if mode not in MODES:
            raise ConfigurationError(f"unknown budget mode {mode!r}; use one of {', '.join(MODES)}")
        self.store = store
        self.encoder = encoder
        self.method = method if isinstance(method, Method) else get_method(method, **(method_options or {}))
        self.merger = merger
        self.metric = metric
        self._metric = metric  # the metric of the run in progress (a resumed run keeps its own)
        self.mode = mode
        self.k = k
        if min_similarity is not None and not -1.0 <= min_similarity <= 1.0:
            raise BudgetError(f"min_similarity must be in [-1, 1], got {min_similarity!r}")
        self.min_similarity = min_similarity
        self.progress = progress
        self.embed_progress = embed_progress
        self.vacuum = vacuum
        if not (isinstance(commit_window_s, (int, float)) and 0 <= commit_window_s <= 10):
            raise ConfigurationError(f"commit_window_s must be between 0 and 10 seconds, got {commit_window_s!r}")
        self.commit_window_s = float(commit_window_s)
        self._session_start_size: int | None = None
        self._deferred_taken = 0  # deferred deletes the run in progress took (see CompressionReport.deferred_taken)
        # Set by every change: the running disk estimate must be checked exactly before it may say "met".
        self._disk_dirty = True
        self._floor: StrictFloor | None = None  # the run in progress's, in strict mode (see _protected)

    # --- budget --------------------------------------------------------------

    def target_bytes(self, *, budget: float | None = None, budget_bytes: int | None = None) -> int:
        """Validate a budget (ratio of the current size, or bytes) and return it in bytes (:func:`resolve_target`).

        In ``strict`` mode the budget must also hold an entry the run can keep
        (:func:`~memrefine_edge.engine._eviction.strict_floor_bytes`): one that states
        something and fits it alone. Otherwise :class:`BudgetError` names the
        smallest such size, before anything changes.
        """
        target = resolve_target(self.store, metric=self.metric, budget=budget, budget_bytes=budget_bytes,
                                dim=self.encoder.dim)
        if self.mode == "strict":
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
            load_merger = getattr(self.merger, "load", None)  # a duck-typed merger may have none
            if load_merger is not None:
                load_merger()
            return self._run(budget=budget, budget_bytes=budget_bytes, resume=resume, max_decisions=max_decisions,
                             on_accept=on_accept)

    def _plan(self, *, budget, budget_bytes, resume) -> _Plan:
        """The run to do: the interrupted one (with its recorded settings), or a new one (not yet recorded)."""
        journal = self.store.journal
        # Method options (tau, ...) are part of what must match for an
        # automatic resume: continuing with another threshold would silently
        # change the run.
        args = {"method": self.method.name, "metric": self.metric, "mode": self.mode,
                "budget": budget, "budget_bytes": budget_bytes, "min_similarity": self.min_similarity,
                "options": json.loads(json.dumps(self.method.describe(), default=str))}
        unfinished = journal.unfinished_run()
        if unfinished is None:
            if resume:
                raise ResumeError("there is no interrupted run to resume on this store")
            target = self.target_bytes(budget=budget, budget_bytes=budget_bytes)
            return _Plan(None, target, 0, None, self.metric, self.mode, self.min_similarity, args)
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
        return _Plan(unfinished.run_id, int(params["target_bytes"]), unfinished.cursor, params["before"],
                     params["metric"], params["mode"], params.get("min_similarity"), args)

    def _run(self, *, budget, budget_bytes, resume, max_decisions, on_accept=None) -> CompressionReport:
        store, journal = self.store, self.store.journal
        clock: dict[str, float] = defaultdict(float)  # seconds per stage
        plan = self._plan(budget=budget, budget_bytes=budget_bytes, resume=resume)
        self._metric = plan.metric
        pin_mmap_threshold()  # big temporaries all along the run: map them apart (see memrefine_edge.core._memory)
        t = time.perf_counter()
        store.ensure_embeddings(self.encoder, progress=self.embed_progress)
        clock["embed"] += time.perf_counter() - t
        if plan.run_id is None:  # measured with every embedding in place, as the disk target was
            plan.before = self._sizes()
            if store.size(plan.metric) <= plan.target:
                if on_accept is not None:
                    on_accept()
                return self._report(None, plan, "already within budget", Counter(), Counter(), 0, clock)
            with store.atomic():  # the run's start and what on_accept writes: both or neither
                if on_accept is not None:
                    on_accept()
                plan.run_id = journal.start_run(
                    self.method.name, {**plan.args, "target_bytes": plan.target, "before": plan.before, "k": self.k,
                                       "encoder": self.encoder.model_id, "start_seq": store.max_seq()},
                )
        elif on_accept is not None:
            on_accept()
        run_id = plan.run_id
        params = journal.run(run_id).params
        created = {c for d in journal.decisions(run_id) for c in d.created_ids}
        # Runs recorded before start_seq existed: every entry then live was the run's.
        self._outsiders = _Outsiders(store, plan.metric, int(params.get("start_seq", 1 << 62)), created)

        self.method.prepare(store)

        actions: Counter[str] = Counter()
        sources: Counter[str] = Counter()
        # A delete of a deferred pair is a deferred delete taken: a preserved pair is never proposed again.
        deferred = {(a, b) for a, b, _ in journal.deferrals()}
        self._deferred_taken = 0
        for d in journal.decisions(run_id):  # a resumed run reports the whole run
            actions[d.action] += 1
            sources[d.source] += 1
            if d.action == "delete" and (d.a_id, d.b_id) in deferred:
                self._deferred_taken += 1
        del deferred
        llm_calls_before = self.method.llm_calls
        with store.long_write():  # one commit per decision, fewer copies of the log into the file
            stop = self._loop(plan, actions, sources, clock, max_decisions)
        release_free_memory()  # what the run's queue left in the allocator (see memrefine_edge.core._memory)
        llm_calls = self.method.llm_calls - llm_calls_before
        report = self._report(run_id, plan, stop, actions, sources, llm_calls, clock)
        if not stop.startswith("stopped"):  # a run stopped by max_decisions stays resumable
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
                report = self._report(run_id, plan, stop, actions, sources, llm_calls, clock)
                journal.finish_run(run_id, report.as_dict())
                if report.after == written.after:
                    break
        return report

    def _loop(self, plan: _Plan, actions: Counter[str], sources: Counter[str],
              clock: dict[str, float], max_decisions: int | None) -> str:
        """Decide pairs until the budget holds or none is left; returns why it stopped.

        First the pairs of identical entries (:mod:`memrefine_edge.engine._identical`), then the most
        similar pairs (:meth:`_similar`), then deferred deletes and, in strict mode, eviction.
        """
        assert plan.run_id is not None
        store, target, step = self.store, plan.target, plan.step
        started, done_here = time.perf_counter(), 0
        self._session_start_size = store.running_size(plan.metric)
        self._disk_dirty = True  # the running disk estimate is re-anchored when it first says "met"
        self._floor = None
        if plan.mode == "strict":  # the run's own entries when it started (those inserted up to its start)
            later = store.sizes_after(self._outsiders.start_seq)
            self._floor = StrictFloor(store, metric=plan.metric, target=target,
                                      originals=[i for i in store.ids() if i not in later])
        step, done_here, stopped = take_identical(self, plan, step, actions, sources, clock, started=started,
                                                  done=done_here, max_decisions=max_decisions)
        if stopped:
            return stopped
        stop = "budget met"
        if self._over(target):
            step, done_here, stop = self._similar(plan, step, actions, sources, clock, started=started,
                                                  done=done_here, max_decisions=max_decisions)
        if stop.startswith("stopped"):
            return stop
        if stop == "budget met" and plan.resumed and done_here == 0:
            # Resumed after the last change: said as the uninterrupted run said it.
            if actions["evict"]:
                stop = "budget met by eviction (strict mode)"
            elif self._deferred_taken:
                stop = "budget met by deferred deletes"
        if not self._over(target):
            return stop
        taken = self._deferred_taken
        step, done_here, stopped = take_deferred(self, plan, step, actions, sources, clock, started=started,
                                                 done=done_here, max_decisions=max_decisions)
        if stopped:
            return stopped
        if not self._over(target):
            return "budget met by deferred deletes" if self._deferred_taken > taken else "budget met"
        if plan.mode == "strict":
            assert self._floor is not None
            evict_to_budget(self, plan.run_id, step, target, actions, sources, floor=self._floor, started=started,
                            done=done_here)
            stop = ("budget met by eviction (strict mode)" if not self._over(target) else
                    "budget not met: no entry of the run fits the budget alone (strict mode)")
        return stop

    def _protected(self, entry_ids: tuple[str, ...]) -> bool:
        """Strict mode: whether a decision taking ``entry_ids`` might take the run's last entry that fits the
        budget alone (:class:`~memrefine_edge.engine._eviction.StrictFloor`); such a pair is not proposed."""
        return self._floor is not None and self._floor.protects(entry_ids)

    def _similar(self, plan: _Plan, step: int, actions: Counter[str], sources: Counter[str],
                 clock: dict[str, float], *, started: float, done: int,
                 max_decisions: int | None) -> tuple[int, int, str]:
        """The paper's loop: the most similar pair not yet judged, until the budget holds or none is left.

        Returns the next step, the decisions made in this session, and why it stopped.
        """
        from memrefine_edge.index import PairQueue

        assert plan.run_id is not None
        store, target = self.store, plan.target
        t = time.perf_counter()
        release_free_memory()  # the build's temporaries come on top of what is resident: free what can be
        # The queue takes the vectors as they are (no copy) and is their only holder, so it
        # may compact them in place.
        ids, matrix, scales = self._vectors()
        queue = PairQueue(ids, matrix, scales=scales, k=self.k, excluded=store.journal.live_preserved_pairs(),
                          writable=True)
        del ids, matrix, scales
        release_free_memory()  # the build's freed temporaries, which glibc would keep (memrefine_edge.core._memory)
        clock["pairs"] += time.perf_counter() - t
        stop = "budget met"
        # Decisions that come fast share a transaction (one commit, each still a savepoint of its
        # own): at 50k entries a commit per decision was a fifth of the journal's time. Once a
        # model is called (seconds per decision, other writers waiting), each commits alone.
        with self._phase(plan, actions, sources, step=step, done=done, started=started,
                         max_decisions=max_decisions) as tally:
            while self._over(target):
                capped = tally.capped()
                if capped:
                    stop = capped
                    break
                t = time.perf_counter()
                pair = queue.pop()
                clock["pairs"] += time.perf_counter() - t
                if pair is None:
                    stop = "no candidate pair left"
                    break
                if plan.min_similarity is not None and pair[2] < plan.min_similarity:
                    # Pairs come in descending similarity: every later one is below too.
                    stop = f"no candidate pair left above min_similarity {plan.min_similarity}"
                    break
                if self._protected((str(pair[0]), str(pair[1]))):
                    continue  # strict mode: it holds the last entry that fits the budget alone
                try:
                    action, source = self._decide_and_apply(plan.run_id, tally.step, pair, queue, clock)
                except EntryNotFoundError:
                    gone = [i for i in pair[:2] if i not in store]
                    if not gone:
                        raise
                    for entry_id in gone:  # removed by another connection: nothing to decide, nothing written
                        queue.remove(entry_id)
                    continue
                tally.count(action, source)
                if tally.done % TRIM_EVERY == 0:
                    # Merged entries' embeddings, refills and the judge free memory all along, and glibc
                    # keeps it resident: over a long run the loop's RSS climbs, most of it free heap.
                    release_free_memory()
        return tally.step, tally.done, stop

    @contextmanager
    def _phase(self, plan: _Plan, actions: Counter[str], sources: Counter[str], *, step: int, done: int,
               started: float, max_decisions: int | None) -> Iterator[_Tally]:
        """A phase of the run (identical pairs, candidate pairs, deferred deletes): its decisions share
        commit groups, and what is left commits (and is reported) when the block ends."""
        with self.store.grouped(window_s=self.commit_window_s) as group:
            tally = _Tally(self, group, plan.target, actions, sources, step=step, done=done, started=started,
                           max_decisions=max_decisions)
            yield tally
            if group.open:
                group.commit()
                self._tick(tally.step, plan.target, actions, started, tally.done)

    def _decide_and_apply(self, run_id, step, pair, queue, clock) -> tuple[str, str]:
        """Decide one pair and apply the decision; ``queue`` (None before it is built) follows the change."""
        store, journal = self.store, self.store.journal
        a_id, b_id, sim = pair
        a, b = store.get(a_id), store.get(b_id)
        t = time.perf_counter()
        decision = self.method.decide(PairContext(a=a, b=b, similarity=sim, store=store))
        latency = (time.perf_counter() - t) * 1000
        clock["judge"] += latency / 1000
        t = time.perf_counter()
        if decision.action == "delete":
            effect = journal.apply(run_id, step, pair, decision, metric=self._metric, latency_ms=latency)
            if queue is not None:
                queue.remove(effect.removed[0])
            self.method.applied([a if effect.removed[0] == a_id else b], None)
            clock["apply"] += time.perf_counter() - t
            return "delete", decision.source
        if decision.action == "merge":
            merged = self._merge(a, b, decision.merge_instruction, clock)
            if merged is not None:
                t = time.perf_counter()
                vec = self.encoder.embed([merged.content])[0]
                clock["embed"] += time.perf_counter() - t
                t = time.perf_counter()
                while True:
                    try:
                        journal.apply(run_id, step, pair, decision, metric=self._metric, merged=merged,
                                      embedding=vec, model_id=self.encoder.model_id, latency_ms=latency)
                        break
                    except DuplicateIdError:
                        if not journal.id_in_use(merged.id):
                            raise
                        # Another writer took the merged id since it was chosen: the next free one.
                        merged = self._merged_entry(a, b, merged.content, merged.keywords)
                self._outsiders.created.add(merged.id)
                self.method.applied([a, b], merged)
                if queue is not None:  # (without one, the queue built next reads it from the store)
                    queue.remove(a_id)
                    queue.remove(b_id)
                    # As a resumed run's queue reads it back from the store.
                    if queue.quantized:
                        queue.add(merged.id, *quantize_embedding(vec))
                    else:
                        queue.add(merged.id, store.as_stored(vec))
                clock["apply"] += time.perf_counter() - t
                return "merge", decision.source
            # The safe fallback: keep both entries, audited as such.
            decision = Decision("preserve", None, source="fallback",
                                reason=f"merge could not keep every fact; preserved ({decision.reason})")
            t = time.perf_counter()  # the failed merge is already in clock["merge"]
        journal.apply(run_id, step, pair, decision, metric=self._metric, latency_ms=latency)
        clock["apply"] += time.perf_counter() - t
        return "preserve", decision.source

    def _model_calls(self) -> int:
        """Model calls made so far by the method's judge and the merger."""
        stats = getattr(self.merger, "stats", None)
        return self.method.llm_calls + (int(stats.get("llm_calls", 0)) if isinstance(stats, dict) else 0)

    def _merge(self, a: Entry, b: Entry, instruction: str, clock: dict[str, float]) -> Entry | None:
        if self.merger is None:
            raise ConfigurationError(f"method {self.method.name!r} decided to merge but no merger was given")
        t = time.perf_counter()
        try:
            out = self.merger.merge(a.content, b.content, instruction)
        except MergeOutputError:
            return None  # the safe fallback: keep both entries
        finally:
            clock["merge"] += time.perf_counter() - t
        return self._merged_entry(a, b, out.content, tuple(out.keywords))

    def _merged_entry(self, a: Entry, b: Entry, content: str, keywords: tuple[str, ...]) -> Entry:
        """The entry replacing ``a`` and ``b``, under an id no entry of the store has or had (merged_entry_id)."""
        entry_id = merged_entry_id(a.id, b.id, taken=self.store.journal.id_in_use)
        return build_merged_entry(a, b, content=content, keywords=keywords, entry_id=entry_id)

    def _vectors(self) -> tuple[list[str], Any, Any]:
        """Ids and the embeddings of this encoder, as stored: int8 codes and their scales (38 MB at
        100k entries where float32 takes 154 MB; a queue decodes them bit for bit as the store does),
        or a float32 matrix and ``None`` when some are stored as float32 (older stores)."""
        codes = self.store.embedding_codes(model_id=self.encoder.model_id)
        if codes is not None:
            return codes
        ids, matrix = self.store.embeddings(model_id=self.encoder.model_id)
        return ids, matrix, None

    # --- reporting -----------------------------------------------------------

    def _run_size(self) -> int:
        """The store's size without the entries others added during the run (O(1): the running size)."""
        return self.store.running_size(self._metric) - self._outsiders.bytes()

    def _over(self, target: int) -> bool:
        """Whether the run is above its target. Under ``disk`` the running estimate is checked
        against an exact measurement before it may say "met" (once per change)."""
        if self._run_size() > target:
            return True
        if self._metric == "disk" and self._disk_dirty:
            self.store.refresh_disk()
            self._disk_dirty = False
            return self._run_size() > target
        return False

    def _sizes(self) -> dict[str, int]:
        store = self.store
        disk = store.refresh_disk() if not store.read_only else store.disk_bytes()
        return {"entries": len(store), "json_bytes": store.json_bytes(), "disk_bytes": disk,
                "file_bytes": store.file_bytes()}

    def _tick(self, step: int, target: int, actions: Counter[str], started: float, done: int) -> None:
        if self.progress is None:
            return
        elapsed = max(time.perf_counter() - started, 1e-9)
        size = self.store.running_size(self._metric)
        if self._session_start_size is None:
            self._session_start_size = size
        removed = self._session_start_size - size
        # ETA from the rate bytes have been leaving the store so far: rough
        # (preserves remove nothing), but it is what a user waiting wants.
        eta = (size - target) / (removed / elapsed) if removed > 0 and size > target else None
        self.progress(Progress(step=step, size=size, target=target, counts=dict(actions),
                               pairs_per_s=done / elapsed, eta_s=eta))

    def _report(self, run_id, plan: _Plan, stop, actions, sources, llm_calls, clock) -> CompressionReport:
        after = self._sizes()
        outsiders = self._outsiders.bytes() if run_id is not None else 0
        return CompressionReport(
            run_id=run_id, method=self.method.name, metric=plan.metric, mode=plan.mode, target_bytes=plan.target,
            before=plan.before or {}, after=after, budget_met=after[f"{plan.metric}_bytes"] - outsiders <= plan.target,
            stop_reason=stop, actions=dict(actions), sources=dict(sources), llm_calls=llm_calls,
            decisions=sum(actions.values()), resumed=plan.resumed, seconds={k: round(v, 3) for k, v in clock.items()},
            added_during_run={"entries": len(self._outsiders.sizes), "bytes": outsiders} if run_id else {},
            deferred_taken=self._deferred_taken if run_id else 0,
        )


def _describe(params: dict[str, Any]) -> str:
    budget = f"budget {params['budget']}" if params.get("budget") is not None else f"{params.get('budget_bytes')} bytes"
    return f"method {params.get('method')}, {budget}, metric {params.get('metric')}, mode {params.get('mode')}"
