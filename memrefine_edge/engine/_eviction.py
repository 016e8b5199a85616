"""Strict-mode eviction: the budget is hard, and no candidate pair is left to judge.

In ``strict`` mode (:class:`~memrefine_edge.engine._compressor.Compressor`), a run that is still above
its budget when the candidate pairs and the deferred deletes run out evicts entries
one at a time, each eviction audited, least valuable first:

1. pure filler (:func:`~memrefine_edge.text._facts.is_filler`), oldest first;
2. then the most *redundant* entry left: the highest
   ``cos(entry, its nearest live neighbour) + EVICT_SIZE_WEIGHT * ln(bytes)
   - EVICT_COUNT_WEIGHT * ln(1 + last) - EVICT_UNIQUE_WEIGHT * last / specific``
   (bytes: the entry's JSON size without links; ``specific``: the entry's
   specific words -- names, numbers, dates, uncommon words,
   :mod:`memrefine_edge.text._lastcopy` -- and ``last`` how many of them no other
   live entry holds), recomputed as neighbours and other copies go, so of
   two near-duplicates one goes and the other, then alone, stays; ties go to
   the oldest. The size term makes a long entry go before a short one
   equally well covered: it frees more budget (under the ``json`` metric
   counted only up to the bytes the budget still needs), and a short entry
   leaves more room in a reader's context. The last-copy terms make an
   entry whose words the store holds elsewhere go before one that is their
   only home: with the two weights equal, the size term is the entry's
   bytes *per word it would take out of the store* (``ln(bytes / (1 +
   last))``), so a long entry that is the only home of many words is not
   taken first for its length, while the share keeps a short entry that
   holds little but its own words.
   With ``use_weight`` above 0 (:class:`~memrefine_edge.engine._compressor.Compressor`),
   ``- use_weight * ln(1 + uses)`` joins the value: ``uses`` is how often the
   store's searches returned the entry (:meth:`MemoryStore.uses
   <memrefine_edge.store.MemoryStore.uses>`, as written when the run reads
   them; a merge carries the sum of its entries'), so an entry the assistant
   keeps finding goes after one it never asked for.

A strict run never empties the store to meet its budget
(:mod:`memrefine_edge.engine._floor`). Before anything changes, a budget
that no entry the run can keep fits alone is an error
(:func:`~memrefine_edge.engine._floor.strict_floor_bytes`: small talk is not
such an entry, the fast path and eviction take it first). While the run goes
on, no decision takes its last entry that fits the budget alone
(:class:`~memrefine_edge.engine._floor.StrictFloor`: a pair holding it is not
proposed), and eviction (:class:`Eviction`) takes an entry only while
another live entry that fits alone remains -- one that states something
when the one taken does (the last such entry left is the one this order
values most) -- so the loop ends at or under the budget with at least one
entry; were none left that fits (another writer removed it), eviction
takes nothing and the run says the budget is not met. Each choice depends
only on the live entries, so a run resumed mid-eviction takes the same
order. Cost: one more neighbour-list build (as the candidate queue's: half an n x n
product) and a rescan of one row when all k neighbours on its list are
gone, and a count of the live entries' content words (one extraction
per entry, and one of its specific words when it first comes near the
top; what it costs is in the docs' benchmarks page).
``EVICT_SIZE_WEIGHT`` and ``EVICT_UNIQUE_WEIGHT`` were chosen on four
LoCoMo dev conversations and checked on the other three
(``bench/results/eval/strict_*``, ``bench/results/eviction_weights.json``);
``EVICT_COUNT_WEIGHT`` is the size weight by construction (not chosen on
them), and what it moves was measured the same way (``count`` in that file).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import NamedTuple, TypeVar

from memrefine_edge.core import Metric, json_size, release_free_memory
from memrefine_edge.index import PairQueue
from memrefine_edge.text import LastCopies, is_filler, specific_keys

from ._floor import Keep, StrictFloor, Witnesses
from ._run import PhaseResult, RunState

__all__ = ["EVICT_SIZE_WEIGHT", "EVICT_UNIQUE_WEIGHT", "EVICT_COUNT_WEIGHT", "EVICT_SIZE_CAPPED", "EVICT_USE_WEIGHT",
           "Eviction", "evict_to_budget"]


#: Strict-mode eviction: weight of ln(entry bytes) against the nearest-neighbour cosine
#: (chosen on held-in LoCoMo conversations; see the module docstring).
EVICT_SIZE_WEIGHT = 0.1
#: Strict-mode eviction: weight of the share of an entry's specific words held nowhere else in the
#: store (chosen on held-in LoCoMo conversations: the most answer presence without less answer recall).
EVICT_UNIQUE_WEIGHT = 0.2
#: Strict-mode eviction: weight of ln(1 + the number of an entry's specific words held nowhere else). Equal to
#: EVICT_SIZE_WEIGHT, so the size term is ln(bytes per word the eviction would take out of the store): a long
#: entry that is the only home of many words is not evicted first for its length.
EVICT_COUNT_WEIGHT = 0.1
#: Strict-mode eviction under the ``json`` metric: an entry's bytes count only up to the bytes the budget
#: still needs (a large entry is not evicted for bytes beyond them; measured by bench/eviction_weights.py).
EVICT_SIZE_CAPPED = True
#: Strict-mode eviction: the default weight of ln(1 + how often searches returned an entry) (the
#: Compressor's ``use_weight``; chosen in the streaming evaluation with replayed searches, see
#: docs/budgets.md).
EVICT_USE_WEIGHT = 0.0


T = TypeVar("T")


class _Candidate(NamedTuple):
    """An entry's place in the eviction heap: ordered by ``(-value, pos)`` (positions are distinct)."""

    #: Minus its value: the heap's top is the most redundant entry.
    neg_value: float
    #: Its insertion position among the run's entries: the tie goes to the oldest.
    pos: int
    entry_id: str
    #: Its nearest live neighbour, and their cosine (-1.0 without one).
    near: str | None
    cos: float
    #: ``(specific keys no other live entry holds, specific keys)``; None in an upper bound (not valued yet).
    unique: tuple[int, int] | None


def _paced(items: Iterable[T], pause: Callable[[], None] | None, every: int = 1024) -> Iterator[T]:
    """``items``, with ``pause`` called after every ``every`` of them (a long read or count yields there)."""
    for i, item in enumerate(items):
        if pause is not None and i and i % every == 0:
            pause()
        yield item


def evict_to_budget(run: RunState) -> PhaseResult:
    """Strict mode: evict in value order (see the module docstring) until the budget holds (:class:`Eviction`)."""
    assert run.floor is not None, "eviction is strict mode's, with its floor"
    return Eviction(run, run.floor).to_budget()


class Eviction:
    """Strict mode: evict the run's entries in value order (see the module docstring) until the budget holds.

    Each choice is a function of the live entries alone (their content,
    sizes and vectors), so a run resumed mid-eviction continues in the
    order the interrupted one would have taken. An entry is evicted only
    while another live entry of the run that fits the budget alone stays
    (one that states something, when this one does), so the last entry
    that fits is never evicted (the one this order values most among those
    that fit) and the loop ends at or under a budget that passed
    :meth:`Compressor.target_bytes` with an entry left; with none that
    fits, nothing is evicted.

    ``run`` is the run in progress: its store, metric, outsiders, budget check and
    progress report; ``floor`` its :class:`~memrefine_edge.engine._floor.StrictFloor`
    (what each entry can be kept as).
    """

    def __init__(self, run: RunState, floor: StrictFloor) -> None:
        self.state, self.floor = run, floor
        outsiders = set(run.outsiders.sizes)  # added by others during the run: not ours to evict
        # entries() yields insertion order: the position is the seq order (oldest first).
        self.ours = [e for e in _paced(run.store.entries(), run.pause) if e.id not in outsiders]
        self.size = {e.id: json_size(replace(e, links=())) for e in self.ours}  # links come and go with neighbours
        self.gone: set[str] = set()
        # How many of our live entries hold each content key (outsiders left out, as from the neighbour
        # lists: the order stays a function of the run's own entries, and a resumed run takes the same).
        self.text = {e.id: e.content for e in self.ours}
        self.copies = LastCopies()
        self.copies.build(_paced(self.text.values(), run.pause))
        self.keepers = Witnesses([e.id for e in self.ours], floor.keep, lambda entry_id: entry_id not in self.gone)
        self.specific: dict[str, tuple[str, ...]] = {}  # an entry's specific keys, extracted once when first valued
        self.queue: PairQueue | None = None
        self.pos: dict[str, int] = {}
        self.capped = run.metric == Metric.JSON and EVICT_SIZE_CAPPED
        # Uses as written when the run starts evicting: constant through the eviction, so the heap's
        # upper bounds stay bounds (a resumed run reads them again, with any uses written since).
        self.use_weight = run.use_weight
        self.use_term: dict[str, float] = {}
        if self.use_weight > 0:
            uses = run.store.uses(self.text)
            self.use_term = {i: self.use_weight * math.log1p(hits) for i, (hits, _last) in uses.items() if hits > 0}

    def to_budget(self) -> PhaseResult:
        """Evict until the budget holds: pure filler first (oldest first), then the most redundant entry left."""
        run, since = self.state, self.state.done
        for e in self.ours:
            if not run.over():
                return run.result(since)
            if is_filler(e.content, classify=True) and self.may_evict(e.id):
                self.evict(e.id, "pure filler")
        self.ours = [e for e in self.ours if e.id not in self.gone]
        if not run.over():
            return run.result(since)
        self._by_redundancy()
        return run.result(since)

    def may_evict(self, entry_id: str) -> bool:
        """Whether another live entry fits the budget alone (one that states something, if this one does):
        false for the last entry that fits, and for every entry when none fits (a function of the live set)."""
        return self.keepers.other(max(self.floor.keep(entry_id), Keep.FILLER), (entry_id,))

    def evict(self, entry_id: str, why: str) -> None:
        """Evict one entry, audited (committed on its own), and book it."""
        run = self.state
        self.gone.add(entry_id)
        self.copies.remove(self.text[entry_id])
        run.store.journal.apply_evict(run.run_id, run.step, entry_id, reason=f"strict budget: {why}",
                                      metric=run.metric)
        run.count_eviction()

    def only_here(self, entry_id: str) -> tuple[int, int]:
        """``(specific keys no other live entry holds, specific keys)`` of the entry."""
        keys = self.specific.get(entry_id)
        if keys is None:
            keys = self.specific[entry_id] = tuple(specific_keys(self.text[entry_id]))
        counts = self.copies.counts
        return sum(counts[k] <= 1 for k in keys), len(keys)

    def candidate(self, entry_id: str, room: int | None) -> _Candidate:
        """The entry's heap item. ``room``: the bytes the budget still needs, which cap the size term;
        None gives the upper bound the heap starts from (no cap, no last-copy terms: they only lower it),
        so an entry's words are extracted only when it comes near the top."""
        queue = self.queue
        assert queue is not None
        near = queue.nearest(entry_id) if entry_id in queue else None
        cos = near[1] if near is not None else -1.0  # alone, or not embedded: nothing covers it
        freed = self.size[entry_id]
        if room is not None and self.capped:
            # Bytes beyond what the budget still needs free nothing it asks for: an entry counts its
            # size only up to the excess, so a large entry is not evicted for bytes it would lose.
            freed = min(freed, room)
        value = cos + EVICT_SIZE_WEIGHT * math.log(max(1, freed)) - self.use_term.get(entry_id, 0.0)
        unique = None if room is None else self.only_here(entry_id)
        if unique is not None:
            value -= EVICT_COUNT_WEIGHT * math.log1p(unique[0]) + EVICT_UNIQUE_WEIGHT * unique[0] / max(1, unique[1])
        return _Candidate(-value, self.pos[entry_id], entry_id, None if near is None else str(near[0]), cos, unique)

    def _by_redundancy(self) -> None:
        """The most redundant entry left, one at a time, each valued afresh as neighbours and copies go."""
        run = self.state
        # Redundancy: each entry's nearest live neighbour, kept up to date as entries go.
        ids, matrix, scales = run.vectors()
        self.pos = pos = {e.id: p for p, e in enumerate(self.ours)}
        rows = [r for r, i in enumerate(ids) if i in pos]
        if len(rows) != len(ids):
            matrix, scales = matrix[rows], None if scales is None else scales[rows]
        self.queue = queue = PairQueue([ids[r] for r in rows], matrix, scales=scales, k=run.k, writable=True,
                                       pause=run.pause)
        del matrix, scales
        release_free_memory()
        heap = [self.candidate(e.id, None) for e in self.ours]
        heapq.heapify(heap)
        while heap and run.over():
            # Nothing changes until the next eviction, so the excess is read once per eviction.
            room = max(1, run.run_size() - run.target)
            # A value only falls as entries go (the nearest neighbour goes, a word's other copies go, the
            # excess shrinks), so the heap holds upper bounds: an item is valued afresh when it surfaces,
            # and pushed back if its value fell, until the top item's value is current.
            while True:
                item = heapq.heappop(heap)
                fresh = self.candidate(item.entry_id, room)
                if item.unique is not None and fresh.neg_value == item.neg_value:
                    break
                heapq.heappush(heap, fresh)
            unique = fresh.unique
            assert unique is not None  # a valued item
            if not self.may_evict(fresh.entry_id):
                continue  # stays, and is never asked again
            if fresh.entry_id in queue:
                queue.remove(fresh.entry_id)
            covered = f"nearest {fresh.near} at cos {fresh.cos:.3f}" if fresh.near is not None else "no neighbour"
            self.evict(fresh.entry_id, f"most redundant left ({covered}), {self.size[fresh.entry_id]} bytes, "
                                       f"{unique[0]} of {unique[1]} specific words held nowhere else")
