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

A strict run never empties the store to meet its budget. Before anything
changes, a budget that no entry the run can keep fits alone is an error
(:func:`strict_floor_bytes`: small talk is not such an entry, the fast
path and eviction take it first). While the run goes on, no decision takes
its last entry that fits the budget alone (:class:`StrictFloor`: a pair
holding it is not proposed), and eviction takes an entry only while
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
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import replace
from enum import IntEnum
from typing import TYPE_CHECKING

from memrefine_edge.core import BudgetError, EntryNotFoundError, json_size, release_free_memory
from memrefine_edge.index import PairQueue
from memrefine_edge.text import LastCopies, is_filler, specific_keys

if TYPE_CHECKING:  # pragma: no cover
    from memrefine_edge.store import MemoryStore

    from ._compressor import Compressor

__all__ = ["EVICT_SIZE_WEIGHT", "EVICT_UNIQUE_WEIGHT", "EVICT_COUNT_WEIGHT", "EVICT_SIZE_CAPPED", "Keep", "StrictFloor",
           "evict_to_budget", "require_strict_floor", "strict_floor_bytes"]


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


class Keep(IntEnum):
    """What an entry can be to a strict run: what is left when the budget holds."""

    #: Larger than the budget alone: a run cannot end with this entry and meet its budget.
    NONE = 0
    #: Fits alone but is pure small talk (:func:`~memrefine_edge.text._facts.is_filler`): the fast path and
    #: eviction take it first, so it is kept only in a store of nothing else.
    FILLER = 1
    #: Fits alone and states something.
    ENTRY = 2


def _keep_of(store: MemoryStore, entry_id: str, metric: str, target: int, *, embedding_bytes: int = 0) -> Keep:
    """``entry_id``'s :class:`Keep` against ``target`` (:class:`EntryNotFoundError` if it is gone)."""
    entry = store.get(entry_id)
    solo = (json_size(replace(entry, links=())) if metric == "json"
            else store.solo_size(entry_id, metric, embedding_bytes=embedding_bytes))
    if solo > target:
        return Keep.NONE
    return Keep.FILLER if is_filler(entry.content) else Keep.ENTRY


#: Entries :func:`strict_floor_bytes` looks at in insertion order before it measures them all (a budget of
#: any ratio is met by one of the first few).
_QUICK_LOOK = 16


def strict_floor_bytes(store: MemoryStore, *, metric: str, target: int, embedding_bytes: int = 0) -> int | None:
    """Whether a strict run can meet ``target`` and keep an entry: None if it can, else the smallest size it can.

    A run can keep an entry that states something and fits ``target`` alone
    (:attr:`Keep.ENTRY`); small talk is taken first (the fast path deletes it
    beside any other entry, eviction evicts it before the rest), so it counts
    only in a store of small talk alone, where :func:`~memrefine_edge.store._budget.resolve_target`'s
    check (the smallest entry) is the floor. Returns None when some entry can
    be kept, else the size alone of the smallest entry that states something
    (under ``disk``: the least of the three smallest by their json size,
    measured as :meth:`MemoryStore.solo_size` measures; ``embedding_bytes`` for
    entries not embedded yet). Cost: a few entries when one of the first fits,
    else one json size per entry and a small-talk check per entry up to the
    smallest that states something.
    """
    def keep(entry_id: str) -> Keep:
        return _keep_of(store, entry_id, metric, target, embedding_bytes=embedding_bytes)

    if any(keep(i) == Keep.ENTRY for i in store.ids()[:_QUICK_LOOK]):
        return None
    by_size = sorted((json_size(replace(e, links=())), n, e.id, e.content) for n, e in enumerate(store.entries()))
    stating = _first_stating(by_size, 3)
    if not stating:
        return None  # small talk only: the smallest entry is the floor (checked by resolve_target)
    if metric == "json":
        smallest = stating[0][0]
    else:
        smallest = min(store.solo_size(entry_id, metric, embedding_bytes=embedding_bytes)
                       for _, entry_id in stating[:3])
    return None if smallest <= target else smallest


def require_strict_floor(store: MemoryStore, *, metric: str, target: int, embedding_bytes: int = 0) -> None:
    """:class:`BudgetError` naming the smallest size a strict run can keep, unless it can meet ``target``
    (:func:`strict_floor_bytes`)."""
    floor = strict_floor_bytes(store, metric=metric, target=target, embedding_bytes=embedding_bytes)
    if floor is not None:
        raise BudgetError(
            f"budget of {target:,} bytes ({metric}) cannot be met in strict mode without emptying the store: "
            f"the smallest entry it can keep takes {floor:,} bytes alone (small talk is evicted first); give "
            "at least that, or compress in paper mode")


def _first_stating(by_size: list[tuple[int, int, str, str]], count: int) -> list[tuple[int, str]]:
    """The first ``count`` entries of ``by_size`` that are not small talk, as ``(size, id)``."""
    out: list[tuple[int, str]] = []
    for size, _, entry_id, content in by_size:
        if not is_filler(content):
            out.append((size, entry_id))
            if len(out) == count:
                break
    return out


class _Witnesses:
    """A live entry of a fixed list whose :class:`Keep` is at least a level, other than some excluded ones.

    A scan per level moves only forward: it passes an entry for good once it
    is gone or below the level (neither changes within a run), and stops at an
    excluded one, so a run's scans together read each entry about once.
    """

    def __init__(self, order: list[str], keep: Callable[[str], Keep], live: Callable[[str], bool]) -> None:
        self._order, self._keep, self._live = order, keep, live
        self._scan = {level: 0 for level in Keep}
        self._found: dict[Keep, str] = {}

    def other(self, level: Keep, excluded: Collection[str]) -> bool:
        """Whether a live entry of the list outside ``excluded`` is at least ``level``."""
        found = self._found.get(level)
        if found is not None and found not in excluded and self._live(found):
            return True
        order, j, passing = self._order, self._scan[level], True
        while j < len(order):
            entry_id = order[j]
            if entry_id in excluded:
                passing = False  # still a candidate for the next question
            elif self._live(entry_id) and self._keep(entry_id) >= level:
                self._found[level] = entry_id
                return True
            elif passing:
                self._scan[level] = j + 1
            j += 1
        return False


class StrictFloor:
    """A strict run's floor: its last entry that fits the budget alone is never taken.

    ``originals``: the run's own entries when it started (in insertion order),
    the only ones the floor keeps; entries the run creates and those others
    add meanwhile are not counted, so whether an entry is kept depends only on
    the originals still live, and a run resumed halfway keeps what the
    uninterrupted run kept. :meth:`protects` says whether taking some entries
    would leave no live original that fits alone and states something (in a
    store of small talk, none that fits alone); the compressor then does not
    propose the pair (nothing is decided, nothing recorded).
    :meth:`keep` tells eviction what each entry can be.
    """

    def __init__(self, store: MemoryStore, *, metric: str, target: int, originals: list[str]) -> None:
        self._store, self._metric, self.target = store, metric, target
        self._keep: dict[str, Keep] = {}
        self._witnesses = _Witnesses(originals, self.keep, store.__contains__)
        self._originals = frozenset(originals)

    def keep(self, entry_id: str) -> Keep:
        """The entry's :class:`Keep` (measured once per entry; :attr:`Keep.NONE` for one gone)."""
        keep = self._keep.get(entry_id)
        if keep is None:
            try:
                keep = self._keep[entry_id] = _keep_of(self._store, entry_id, self._metric, self.target)
            except EntryNotFoundError:
                return Keep.NONE
        return keep

    def protects(self, entry_ids: Collection[str]) -> bool:
        """Whether taking all of ``entry_ids`` would take the run's last original of its kind that fits alone."""
        if self._witnesses.other(Keep.ENTRY, entry_ids):
            return False  # a live original that states something and fits stays whatever these are
        top = max((self.keep(i) for i in entry_ids if i in self._originals), default=Keep.NONE)
        return top > Keep.NONE and not self._witnesses.other(top, entry_ids)


def evict_to_budget(comp: Compressor, run_id: str, step: int, target: int, actions: Counter[str],
                    sources: Counter[str], *, floor: StrictFloor, started: float, done: int) -> int:
    """Strict mode: evict in value order (see module docstring) until the budget holds.

    Each choice is a function of the live entries alone (their content,
    sizes and vectors), so a run resumed mid-eviction continues in the
    order the interrupted one would have taken. An entry is evicted only
    while another live entry of the run that fits the budget alone stays
    (one that states something, when this one does), so the last entry
    that fits is never evicted (the one this order values most among those
    that fit) and the loop ends at or under a budget that passed
    :meth:`Compressor.target_bytes` with an entry left; with none that
    fits, nothing is evicted.

    ``comp`` is the running compressor: its store, the run's metric and outsiders, and its
    budget check and progress report; ``floor`` the run's :class:`StrictFloor` (what each
    entry can be kept as). Returns the next step.
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
    keepers = _Witnesses([e.id for e in ours], floor.keep, lambda entry_id: entry_id not in gone)

    def may_evict(entry_id: str) -> bool:
        """Whether another live entry fits the budget alone (one that states something, if this one does):
        false for the last entry that fits, and for every entry when none fits (a function of the live set)."""
        return keepers.other(max(floor.keep(entry_id), Keep.FILLER), (entry_id,))

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
        None gives the upper bound the heap starts from (no cap, no last-copy terms: they only lower it),
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
            value -= EVICT_COUNT_WEIGHT * math.log1p(unique[0]) + EVICT_UNIQUE_WEIGHT * unique[0] / max(1, unique[1])
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
