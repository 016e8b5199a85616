"""One compression run in progress: its plan, its state, and what a phase of it returns.

A run (:class:`~memrefine_edge.engine._compressor.Compressor`) goes through phases:
the identical pairs, the most similar pairs, the deferred deletes and, in
strict mode, eviction. Each is a function of one :class:`RunState` -- the plan,
the tally of decisions, the stage clock, the entries others add meanwhile,
the run's size and its budget check, the one decision path -- and returns a
:class:`PhaseResult`. Nothing a phase needs is read from the compressor.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from memrefine_edge.core import Metric, Mode, Progress, StopReason

from ._apply import DecisionPath
from ._floor import StrictFloor

if TYPE_CHECKING:  # pragma: no cover
    from memrefine_edge.store import MemoryStore

__all__ = ["Outsiders", "Phase", "PhaseResult", "RunPlan", "RunState"]


@dataclass
class RunPlan:
    """One run's settings: recorded ones when it resumes, the compressor's own when it is new."""

    run_id: str | None
    target: int
    step: int
    before: dict[str, int] | None
    metric: Metric
    mode: Mode
    min_similarity: float | None
    args: dict[str, Any]
    #: Whether the run was recorded before this session (set once, when the plan is made).
    resumed: bool = field(init=False)

    def __post_init__(self) -> None:
        self.resumed = self.run_id is not None


@dataclass(frozen=True)
class PhaseResult:
    """What a phase of a run returns."""

    #: The run's next step (the journal's cursor).
    step: int
    #: Decisions (and evictions) the phase made.
    decisions: int
    #: Why the phase stopped early (``max_decisions``), or why the candidates ended; None: it ran its course.
    stop: StopReason | None = None


#: A phase of a run: all of them take the run's state and return a :class:`PhaseResult`.
Phase = Callable[["RunState"], PhaseResult]


class _Group(Protocol):
    """What a run uses of the store's commit group (:meth:`MemoryStore.grouped`)."""

    window_s: float

    @property
    def open(self) -> bool: ...

    def commit(self) -> None: ...

    def commit_if_due(self) -> bool: ...


class Outsiders:
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


class RunState:
    """A recorded run in this session: what every phase reads, and where it books what it does.

    ``path`` decides and applies pairs; ``actions`` and ``sources`` count the
    run's decisions (a resumed run's earlier ones included) and
    ``deferred_taken`` its deferred deletes taken; ``clock`` the seconds per
    stage. ``floor`` (strict mode) keeps the run's last entry that fits the
    budget alone. ``progress`` is called after every commit. Decisions that
    come fast share a transaction that commits once it is ``commit_window_s``
    old (see :meth:`phase`); ``max_decisions`` caps the decisions of this
    session. ``k`` and ``model_id`` say how to build a neighbour index of the
    run's vectors (:meth:`vectors`); in live mode ``neighbours`` and ``changed``
    bound the candidate pairs to the changed entries' nearest neighbours.
    """

    def __init__(self, *, store: MemoryStore, plan: RunPlan, path: DecisionPath, outsiders: Outsiders,
                 actions: Counter[str], sources: Counter[str], deferred_taken: int, clock: dict[str, float],
                 floor: StrictFloor | None, k: int, model_id: str, commit_window_s: float,
                 max_decisions: int | None, progress: Callable[[Progress], None] | None,
                 neighbours: int | None = None, changed: Collection[str] = (), changed_after: int = 0,
                 hurry: Callable[[], bool] | None = None, pause: Callable[[], None] | None = None,
                 use_weight: float = 0.0) -> None:
        assert plan.run_id is not None
        self.store, self.plan, self.path, self.outsiders = store, plan, path, outsiders
        self.run_id: str = plan.run_id
        self.target, self.metric = plan.target, plan.metric
        self.actions, self.sources, self.deferred_taken, self.clock = actions, sources, deferred_taken, clock
        self.floor, self.k, self.model_id = floor, k, model_id
        #: Live mode: how many nearest neighbours each changed entry is judged against, and which
        #: entries changed (None: the paper's order over every pair).
        self.neighbours, self.changed = neighbours, frozenset(changed)
        #: Live mode: every changed entry was inserted after this insertion number.
        self.changed_after = changed_after
        #: Live mode: asked between the similar phase's decisions; True ends the phase (see Compressor).
        self.hurry = hurry
        #: Called between blocks of long computations (neighbour lists, scans, word counts; see Compressor).
        self.pause = pause
        #: Eviction's weight of ln(1 + an entry's uses by searches) (the run's own, recorded in its params).
        self.use_weight = use_weight
        #: Set when ``hurry`` ended the similar phase: the changed entries it left not fully judged.
        self.cut_short: list[str] | None = None
        self.commit_window_s, self.max_decisions, self.progress = commit_window_s, max_decisions, progress
        #: The next step of the run (the journal's cursor).
        self.step = plan.step
        #: Decisions (and evictions) made in this session.
        self.done = 0
        self.started = time.perf_counter()
        self.session_start_size = store.running_size(plan.metric)
        # Set by every change: the running disk estimate must be checked exactly before it may say "met".
        self.disk_dirty = True
        self._group: _Group | None = None
        self._models = 0

    # --- size and budget -----------------------------------------------------

    def run_size(self) -> int:
        """The store's size without the entries others added during the run (O(1): the running size)."""
        return self.store.running_size(self.metric) - self.outsiders.bytes()

    def over(self) -> bool:
        """Whether the run is above its target. Under ``disk`` the running estimate is checked
        against an exact measurement before it may say "met" (once per change)."""
        if self.run_size() > self.target:
            return True
        if self.metric == Metric.DISK and self.disk_dirty:
            self.store.refresh_disk()
            self.disk_dirty = False
            return self.run_size() > self.target
        return False

    def protected(self, entry_ids: Collection[str]) -> bool:
        """Strict mode: whether a decision taking ``entry_ids`` might take the run's last entry that fits the
        budget alone (:class:`~memrefine_edge.engine._floor.StrictFloor`); such a pair is not proposed."""
        return self.floor is not None and self.floor.protects(entry_ids)

    def capped(self) -> StopReason | None:
        """:attr:`StopReason.MAX_DECISIONS` once this session has made ``max_decisions``, else None."""
        if self.max_decisions is not None and self.done >= self.max_decisions:
            return StopReason.MAX_DECISIONS
        return None

    def vectors(self) -> tuple[list[str], Any, Any]:
        """Ids and the embeddings of the run's encoder, as stored: int8 codes and their scales (38 MB at
        100k entries where float32 takes 154 MB; a queue decodes them bit for bit as the store does),
        or a float32 matrix and ``None`` when some are stored as float32 (older stores)."""
        codes = self.store.embedding_codes(model_id=self.model_id)
        if codes is not None:
            return codes
        ids, matrix = self.store.embeddings(model_id=self.model_id)
        return ids, matrix, None

    # --- booking -------------------------------------------------------------

    @contextmanager
    def phase(self) -> Iterator[None]:
        """A phase's decisions share commit groups; what is left commits (and is reported) when the block ends.

        Decisions that come fast share a transaction (one commit, each still a savepoint of its
        own): at 50k entries a commit per decision was a fifth of the journal's time. Once a
        model is called (seconds per decision, other writers waiting), each commits alone.
        """
        with self.store.grouped(window_s=self.commit_window_s) as group:
            self._group, self._models = group, self.path.model_calls()
            try:
                yield
                if group.open:
                    group.commit()
                    self.tick()
            finally:
                self._group = None

    def count(self, action: str, source: str) -> None:
        """An applied decision of a :meth:`phase`: into the counts, the next step; the group commits when due
        (each decision alone once a model decides)."""
        group = self._group
        assert group is not None, "count() books a decision of a phase"
        self._book(action, source)
        if group.window_s and self.path.model_calls() != self._models:
            group.window_s = 0.0  # a model decides here: commit every decision from now on
        if group.commit_if_due():
            self.tick()

    def count_eviction(self) -> None:
        """An eviction, committed on its own: into the counts, the next step, a progress report."""
        self._book("evict", "evict")
        self.tick()  # evictions report progress like decisions

    def _book(self, action: str, source: str) -> None:
        self.actions[action] += 1
        self.sources[source] += 1
        self.step += 1
        self.done += 1
        self.disk_dirty = True

    def tick(self) -> None:
        """Report progress (after a commit)."""
        if self.progress is None:
            return
        elapsed = max(time.perf_counter() - self.started, 1e-9)
        size = self.store.running_size(self.metric)
        removed = self.session_start_size - size
        # ETA from the rate bytes have been leaving the store so far: rough
        # (preserves remove nothing), but it is what a user waiting wants.
        eta = (size - self.target) / (removed / elapsed) if removed > 0 and size > self.target else None
        self.progress(Progress(step=self.step, size=size, target=self.target, counts=dict(self.actions),
                               pairs_per_s=self.done / elapsed, eta_s=eta))

    def result(self, since: int, stop: StopReason | None = None) -> PhaseResult:
        """The phase's result: the next step, the decisions made since ``done`` was ``since``, and ``stop``."""
        return PhaseResult(step=self.step, decisions=self.done - since, stop=stop)
