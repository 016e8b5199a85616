"""Strict-mode eviction: the budget is hard, and no candidate pair is left to judge.

In ``strict`` mode (:class:`~memrefine_edge.compressor.Compressor`), a run that is still above
its budget when the candidate pairs and the deferred deletes run out evicts entries
one at a time, each eviction audited, least valuable first:

1. pure filler (:func:`~memrefine_edge.facts.is_filler`), oldest first;
2. then the most *redundant* entry left: the highest
   ``cos(entry, its nearest live neighbour) + EVICT_SIZE_WEIGHT * ln(bytes)
   - EVICT_UNIQUE_WEIGHT * unique``
   (bytes: the entry's JSON size without links; ``unique``: the share of
   the entry's specific words -- names, numbers, dates, uncommon words,
   :mod:`memrefine_edge.lastcopy` -- that no other live entry holds),
   recomputed as neighbours and other copies go, so of two near-duplicates
   one goes and the other, then alone, stays; ties go to the oldest. The
   size term makes a long entry go before a short one equally well
   covered: it frees more budget (under the ``json`` metric counted only up to
   the bytes the budget still needs), and a short entry leaves more room in a
   reader's context. The last-copy term makes an entry whose words the
   store holds elsewhere go before one that is their only home.

The last live entry that fits the budget alone is never evicted (the
entry this order values most among those that fit), so the loop ends at
or under the budget; a budget below the smallest entry is an error
before anything changes. Each choice depends only on the live
entries, so a run resumed mid-eviction takes the same order. Cost: one
more neighbour-list build (as the candidate queue's: half an n x n
product) and a rescan of one row when all k neighbours on its list are
gone, and a count of the live entries' content words (one extraction
per entry, and one of its specific words when it first comes near the
top; what it costs is in the docs' benchmarks page).
``EVICT_SIZE_WEIGHT`` and ``EVICT_UNIQUE_WEIGHT`` were chosen on four
LoCoMo dev conversations and checked on the other three
(``bench/results/eval/strict_*``, ``bench/results/eviction_weights.json``).
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from dataclasses import replace
from typing import TYPE_CHECKING

from ._memory import release_free_memory
from .entry import json_size
from .facts import is_filler
from .lastcopy import LastCopies, specific_keys
from .pairs import PairQueue

if TYPE_CHECKING:  # pragma: no cover
    from .compressor import Compressor

__all__ = ["EVICT_SIZE_WEIGHT", "EVICT_UNIQUE_WEIGHT", "EVICT_SIZE_CAPPED", "evict_to_budget"]


#: Strict-mode eviction: weight of ln(entry bytes) against the nearest-neighbour cosine
#: (chosen on held-in LoCoMo conversations; see the module docstring).
EVICT_SIZE_WEIGHT = 0.1
#: Strict-mode eviction: weight of the share of an entry's specific words held nowhere else in the
#: store (chosen on held-in LoCoMo conversations: the most answer presence without less answer recall).
EVICT_UNIQUE_WEIGHT = 0.2
#: Strict-mode eviction under the ``json`` metric: an entry's bytes count only up to the bytes the budget
#: still needs (a large entry is not evicted for bytes beyond them; measured by bench/eviction_weights.py).
EVICT_SIZE_CAPPED = True


def evict_to_budget(comp: Compressor, run_id: str, step: int, target: int, actions: Counter[str],
                    sources: Counter[str], *, started: float, done: int) -> int:
    """Strict mode: evict in value order (see module docstring) until the budget holds.

    Each choice is a function of the live entries alone (their content,
    sizes and vectors), so a run resumed mid-eviction continues in the
    order the interrupted one would have taken. The last live entry that
    fits the budget on its own is never evicted (the one this order
    values most among those that fit), so the loop always ends at or
    under a budget that passed :meth:`Compressor.target_bytes`.

    ``comp`` is the running compressor: its store, the run's metric and outsiders, and its
    budget check and progress report. Returns the next step.
    """
    store, metric = comp.store, comp._metric
    outsiders = set(comp._outsiders.sizes)  # added by others during the run: not ours to evict
    # entries() yields insertion order: the position is the seq order (oldest first).
    ours = [e for e in store.entries() if e.id not in outsiders]
    size = {e.id: json_size(replace(e, links=())) for e in ours}  # links come and go with neighbours
    gone: set[str] = set()
    # How many of our live entries hold each content key (outsiders left out, as from the neighbour
    # lists: the order stays a function of the run's own entries, and a resumed run takes the same).
    text = {e.id: e.content for e in ours}
    copies = LastCopies()
    copies.build(text.values())
    fits: dict[str, bool] = {}  # whether a store of this entry alone is within the target (never changes)
    scan, witness = 0, None  # a live entry known to fit alone, found by scanning ``ours`` once

    def may_evict(entry_id: str) -> bool:
        """False only for the last live entry that fits the budget alone (a function of the live set)."""
        nonlocal scan, witness
        if witness is not None and witness != entry_id and witness not in gone:
            return True
        while scan < len(ours):  # entries passed are gone, too large, or were the candidate then
            other = ours[scan].id
            if other != entry_id and other not in gone and _fits(comp, other, target, fits):
                witness = other
                return True
            scan += 1
        if _fits(comp, entry_id, target, fits):
            witness = entry_id
            return False
        return True

    def evict(entry_id: str, why: str) -> None:
        nonlocal step, done
        gone.add(entry_id)
        copies.remove(text[entry_id])
        store.journal.apply_evict(run_id, step, entry_id, reason=f"strict budget: {why}", metric=metric)
        comp._disk_dirty = True
        actions["evict"] += 1
        sources["evict"] += 1
        step += 1
        done += 1
        comp._tick(step, target, actions, started, done)  # evictions report progress like decisions

    for e in ours:
        if not comp._over(target):
            return step
        if is_filler(e.content) and may_evict(e.id):
            evict(e.id, "pure filler")
    ours = [e for e in ours if e.id not in gone]
    if not comp._over(target):
        return step
    # Redundancy: each entry's nearest live neighbour, kept up to date as entries go.
    ids, matrix, scales = comp._vectors()
    pos = {e.id: p for p, e in enumerate(ours)}
    rows = [r for r, i in enumerate(ids) if i in pos]
    if len(rows) != len(ids):
        matrix, scales = matrix[rows], None if scales is None else scales[rows]
    queue = PairQueue([ids[r] for r in rows], matrix, scales=scales, k=comp.k, writable=True)
    del matrix, scales
    release_free_memory()

    specific: dict[str, tuple[str, ...]] = {}  # an entry's specific keys, extracted once when first valued

    def only_here(entry_id: str) -> tuple[int, int]:
        """``(specific keys no other live entry holds, specific keys)`` of the entry."""
        keys = specific.get(entry_id)
        if keys is None:
            keys = specific[entry_id] = tuple(specific_keys(text[entry_id]))
        return sum(copies.counts[k] <= 1 for k in keys), len(keys)

    capped = metric == "json" and EVICT_SIZE_CAPPED

    def key(entry_id: str, room: int | None) -> tuple[float, int, str, str | None, float, tuple[int, int] | None]:
        """The entry's heap item. ``room``: the bytes the budget still needs, which cap the size term;
        None gives the upper bound the heap starts from (no cap, no last-copy term: both only lower it),
        so an entry's words are extracted only when it comes near the top."""
        near = queue.nearest(entry_id) if entry_id in queue else None
        cos = near[1] if near is not None else -1.0  # alone, or not embedded: nothing covers it
        freed = size[entry_id]
        if room is not None and capped:
            # Bytes beyond what the budget still needs free nothing it asks for: an entry counts its
            # size only up to the excess, so a large entry is not evicted for bytes it would lose.
            freed = min(freed, room)
        value = cos + EVICT_SIZE_WEIGHT * math.log(max(1, freed))
        unique = None if room is None else only_here(entry_id)
        if unique is not None:
            value -= EVICT_UNIQUE_WEIGHT * unique[0] / max(1, unique[1])
        return (-value, pos[entry_id], entry_id, None if near is None else str(near[0]), cos, unique)

    heap = [key(e.id, None) for e in ours]
    heapq.heapify(heap)
    while heap and comp._over(target):
        # Nothing changes until the next eviction, so the excess is read once per eviction.
        room = max(1, comp._run_size() - target)
        # A value only falls as entries go (the nearest neighbour goes, a word's other copies go, the
        # excess shrinks), so the heap holds upper bounds: an item is valued afresh when it surfaces,
        # and pushed back if its value fell, until the top item's value is current.
        while True:
            item = heapq.heappop(heap)
            fresh = key(item[2], room)
            if item[5] is not None and fresh[0] == item[0]:
                break
            heapq.heappush(heap, fresh)
        _, _, entry_id, near, cos, unique = fresh
        assert unique is not None  # a valued item
        if not may_evict(entry_id):
            continue  # stays, and is never asked again
        if entry_id in queue:
            queue.remove(entry_id)
        covered = f"nearest {near} at cos {cos:.3f}" if near is not None else "no neighbour"
        evict(entry_id, f"most redundant left ({covered}), {size[entry_id]} bytes, "
                        f"{unique[0]} of {unique[1]} specific words held nowhere else")
    return step


def _fits(comp: Compressor, entry_id: str, target: int, cache: dict[str, bool]) -> bool:
    """Whether a store of this entry alone is within ``target`` (measured once per entry)."""
    if entry_id not in cache:
        cache[entry_id] = comp.store.solo_size(entry_id, comp._metric) <= target
    return cache[entry_id]
