"""The identical phase: pairs of entries with the same text, taken before the similarity order.

Two entries with identical text embed to the same vector, so their cosine is
1, the highest a pair can have: in the paper's order they come first. The
stored vectors say so only up to rounding (an int8 code's length is not
exactly 1, and a near-duplicate can score a hair above an identical pair), so
a run (:class:`~memrefine_edge.engine._compressor.Compressor`) takes them first
explicitly, before it builds the pair queue: every pair of the run's own
live entries (inserted before it started) with identical text, in insertion
order -- by the earlier entry, then the later, the queue's tie order -- each
shown to the method with similarity 1.0 and applied as any decision, until
the budget holds. A pair the method preserves (now or in an earlier run) is
not proposed again.

It reads the store's content hashes, not the vectors, and each decision
costs what one of the loop's costs: a store whose duplicates are exact
(repeated facts, imported twice) is thinned before the queue's build, which
grows with the square of the entries it is given. The phase depends only on
the live entries and the preserved pairs, so a run resumed during it takes
the same pairs, and one resumed after it finds none left.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Iterator
from collections.abc import Set as AbstractSet

from memrefine_edge.core import EntryNotFoundError

from ._run import PhaseResult, RunState

__all__ = ["IDENTICAL_SIMILARITY", "identical_pairs", "take_identical"]

#: The similarity a pair of identical entries is shown with: the cosine of a vector with itself.
IDENTICAL_SIMILARITY = 1.0


def identical_pairs(groups: list[list[tuple[int, str]]], *,
                    gone: AbstractSet[str] = frozenset()) -> Iterator[tuple[str, str]]:
    """Every pair within each group of ``(seq, id)`` (sorted by seq), all groups together in the
    order of ``(seq of the earlier entry, seq of the later)``.

    ``gone`` (read as the pairs are drawn, so it may grow meanwhile): entries whose pairs are no
    longer wanted. An earlier entry found in it is passed over with all its pairs at once: a
    thousand copies of "ok" make a million pairs, of which the deletes leave a thousand to ask.
    """

    def within(group: list[tuple[int, str]]) -> Iterator[tuple[int, int, str, str]]:
        for i, (lo_seq, lo) in enumerate(group):
            if lo in gone:
                continue
            for hi_seq, hi in group[i + 1:]:
                yield lo_seq, hi_seq, lo, hi

    for _, _, lo, hi in heapq.merge(*(within(g) for g in groups)):
        yield lo, hi


def take_identical(run: RunState) -> PhaseResult:
    """The identical phase (see the module docstring): decide the pairs of identical entries first.

    Stops early (the run stays resumable) at ``max_decisions``.
    """
    store, clock, since = run.store, run.clock, run.done
    t = time.perf_counter()
    groups = store.identical_groups(max_seq=run.outsiders.start_seq)
    if not groups:
        clock["pairs"] += time.perf_counter() - t
        return run.result(since)
    members = {entry_id for group in groups for _, entry_id in group}
    # Pairs the method preserved (in this run or an earlier one) are never proposed again.
    preserved = {frozenset(p) for p in store.journal.live_preserved_pairs() if p[0] in members and p[1] in members}
    clock["pairs"] += time.perf_counter() - t
    gone: set[str] = set()
    stopped = None
    with run.phase():
        for a_id, b_id in identical_pairs(groups, gone=gone):
            if a_id in gone or b_id in gone or frozenset((a_id, b_id)) in preserved or run.protected((a_id, b_id)):
                continue  # (strict mode: the pair holds the last entry that fits the budget alone)
            if not run.over():
                break
            stopped = run.capped()
            if stopped:
                break
            try:
                action, source = run.path.decide_and_apply(run.step, (a_id, b_id, IDENTICAL_SIMILARITY))
            except EntryNotFoundError:
                missing = [i for i in (a_id, b_id) if i not in store]
                if not missing:
                    raise
                gone.update(missing)  # removed by another connection: nothing to decide, nothing written
                continue
            if action == "preserve":
                preserved.add(frozenset((a_id, b_id)))
            else:  # a delete took one of them, a merge both
                gone.update(i for i in (a_id, b_id) if i not in store)
            run.count(action, source)
    return run.result(since, stopped)
