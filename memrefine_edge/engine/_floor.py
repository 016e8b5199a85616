"""A strict run's floor: it never empties the store to meet its budget.

In ``strict`` mode the budget is hard (:mod:`memrefine_edge.engine._eviction`), but a
run must end with an entry. Before anything changes, a budget that no entry
the run can keep fits alone is an error (:func:`strict_floor_bytes`: small talk
is not such an entry, the fast path and eviction take it first). While the run
goes on, no decision takes its last entry that fits the budget alone
(:class:`StrictFloor`: a pair holding it is not proposed), and eviction takes
an entry only while another live entry that fits alone remains.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import replace
from enum import IntEnum
from typing import TYPE_CHECKING

from memrefine_edge.core import BudgetError, EntryNotFoundError, Metric, json_size
from memrefine_edge.text import is_filler

if TYPE_CHECKING:  # pragma: no cover
    from memrefine_edge.store import MemoryStore

__all__ = ["Keep", "StrictFloor", "Witnesses", "keep_of", "require_strict_floor", "strict_floor_bytes"]


class Keep(IntEnum):
    """What an entry can be to a strict run: what is left when the budget holds."""

    #: Larger than the budget alone: a run cannot end with this entry and meet its budget.
    NONE = 0
    #: Fits alone but is pure small talk (:func:`~memrefine_edge.text._facts.is_filler`): the fast path and
    #: eviction take it first, so it is kept only in a store of nothing else.
    FILLER = 1
    #: Fits alone and states something.
    ENTRY = 2


def keep_of(store: MemoryStore, entry_id: str, metric: str, target: int, *, embedding_bytes: int = 0) -> Keep:
    """``entry_id``'s :class:`Keep` against ``target`` (:class:`EntryNotFoundError` if it is gone)."""
    entry = store.get(entry_id)
    solo = (json_size(replace(entry, links=())) if metric == Metric.JSON
            else store.solo_size(entry_id, metric, embedding_bytes=embedding_bytes))
    if solo > target:
        return Keep.NONE
    return Keep.FILLER if is_filler(entry.content, classify=True) else Keep.ENTRY


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
        return keep_of(store, entry_id, metric, target, embedding_bytes=embedding_bytes)

    if any(keep(i) == Keep.ENTRY for i in store.ids()[:_QUICK_LOOK]):
        return None
    by_size = sorted((json_size(replace(e, links=())), n, e.id, e.content) for n, e in enumerate(store.entries()))
    stating = _first_stating(by_size, 3)
    if not stating:
        return None  # small talk only: the smallest entry is the floor (checked by resolve_target)
    if metric == Metric.JSON:
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
        if not is_filler(content, classify=True):
            out.append((size, entry_id))
            if len(out) == count:
                break
    return out


class Witnesses:
    """A live entry of a fixed list whose :class:`Keep` is at least a level, other than some excluded ones.

    A scan per level moves only forward: it passes an entry for good once it
    is gone or below the level (neither changes within a run), and stops at an
    excluded one, so a run's scans together read each entry about once.
    """

    def __init__(self, order: list[str], keep: Callable[[str], Keep], live: Callable[[str], bool]) -> None:
        self._order, self._keep, self._live = order, keep, live
        self._next = {level: 0 for level in Keep}
        self._found: dict[Keep, str] = {}

    def other(self, level: Keep, excluded: Collection[str]) -> bool:
        """Whether a live entry of the list outside ``excluded`` is at least ``level``."""
        found = self._found.get(level)
        if found is not None and found not in excluded and self._live(found):
            return True
        order, j, passing = self._order, self._next[level], True
        while j < len(order):
            entry_id = order[j]
            if entry_id in excluded:
                passing = False  # still a candidate for the next question
            elif self._live(entry_id) and self._keep(entry_id) >= level:
                self._found[level] = entry_id
                return True
            elif passing:
                self._next[level] = j + 1
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
    store of small talk, none that fits alone); the run then does not
    propose the pair (nothing is decided, nothing recorded).
    :meth:`keep` tells eviction what each entry can be.
    """

    def __init__(self, store: MemoryStore, *, metric: str, target: int, originals: list[str]) -> None:
        self._store, self._metric, self.target = store, metric, target
        self._keep: dict[str, Keep] = {}
        self._witnesses = Witnesses(originals, self.keep, store.__contains__)
        self._originals = frozenset(originals)

    def keep(self, entry_id: str) -> Keep:
        """The entry's :class:`Keep` (measured once per entry; :attr:`Keep.NONE` for one gone)."""
        keep = self._keep.get(entry_id)
        if keep is None:
            try:
                keep = self._keep[entry_id] = keep_of(self._store, entry_id, self._metric, self.target)
            except EntryNotFoundError:
                return Keep.NONE
        return keep

    def protects(self, entry_ids: Collection[str]) -> bool:
        """Whether taking all of ``entry_ids`` would take the run's last original of its kind that fits alone."""
        if self._witnesses.other(Keep.ENTRY, entry_ids):
            return False  # a live original that states something and fits stays whatever these are
        top = max((self.keep(i) for i in entry_ids if i in self._originals), default=Keep.NONE)
        return top > Keep.NONE and not self._witnesses.other(top, entry_ids)
