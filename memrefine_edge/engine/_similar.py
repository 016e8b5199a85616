"""The similar phase: the paper's loop, the most similar pair not yet judged until the budget holds.

In live mode the candidates are bounded: only the pairs of the entries that changed since the
store's last live pass with their nearest live neighbours (:class:`~memrefine_edge.index.LocalPairs`),
and the phase ends early when the run's ``hurry`` says writers wait on the budget: the run then
evicts, and the pairs it did not judge are the next pass's.

The run's vectors go into a :class:`~memrefine_edge.index.PairQueue` (with
the pairs preserved so far excluded), which proposes the most cosine-similar
live pair not yet judged; each is decided and applied as any decision, and
the queue follows each change. The phase ends when the budget holds, when no
pair is left (or none at or above the run's ``min_similarity``), or at
``max_decisions``.
"""

from __future__ import annotations

import time

from memrefine_edge.core import EntryNotFoundError, StopReason, release_free_memory
from memrefine_edge.index import LocalPairs, PairQueue

from ._run import PhaseResult, RunState

__all__ = ["TRIM_EVERY", "take_similar"]

#: Decisions between two hand-backs of the allocator's free memory during a run (each a few ms).
TRIM_EVERY = 4096


def take_similar(run: RunState) -> PhaseResult:
    """The similar phase (see the module docstring); its stop is :attr:`StopReason.BUDGET_MET` when the
    budget holds, else why it ended."""
    store, clock, path, since = run.store, run.clock, run.path, run.done
    min_similarity = run.plan.min_similarity
    t = time.perf_counter()
    release_free_memory()  # the build's temporaries come on top of what is resident: free what can be
    # The queue takes the vectors as they are (no copy) and is their only holder, so it
    # may compact them in place.
    ids, matrix, scales = run.vectors()
    queue: PairQueue | LocalPairs
    if run.neighbours is not None:  # live mode: the changed entries against their nearest neighbours
        # Only pairs of a changed entry can be proposed: the preserved pairs of the others are not read.
        queue = LocalPairs(ids, matrix, scales=scales, k=run.neighbours, changed=run.changed,
                           excluded=store.journal.live_preserved_pairs(after_seq=run.changed_after),
                           pause=run.pause)
    else:
        queue = PairQueue(ids, matrix, scales=scales, k=run.k, excluded=store.journal.live_preserved_pairs(),
                          writable=True, pause=run.pause)
    del ids, matrix, scales
    release_free_memory()  # the build's freed temporaries, which glibc would keep (memrefine_edge.core._memory)
    clock["pairs"] += time.perf_counter() - t
    stop = StopReason.BUDGET_MET
    with run.phase():
        while run.over():
            capped = run.capped()
            if capped:
                stop = capped
                break
            if run.hurry is not None and isinstance(queue, LocalPairs) and run.hurry():
                # Writers wait on the budget: evict now; the pairs left are the next pass's.
                run.cut_short = [str(i) for i in queue.pending()]
                break
            t = time.perf_counter()
            pair = queue.pop()
            clock["pairs"] += time.perf_counter() - t
            if pair is None:
                stop = StopReason.NO_CANDIDATE
                break
            a_id, b_id, similarity = str(pair[0]), str(pair[1]), pair[2]
            if min_similarity is not None and similarity < min_similarity:
                # Pairs come in descending similarity: every later one is below too.
                stop = StopReason.BELOW_MIN_SIMILARITY
                break
            if run.protected((a_id, b_id)):
                continue  # strict mode: it holds the last entry that fits the budget alone
            try:
                action, source = path.decide_and_apply(run.step, (a_id, b_id, similarity), queue)
            except EntryNotFoundError:
                gone = [i for i in (a_id, b_id) if i not in store]
                if not gone:
                    raise
                for entry_id in gone:  # removed by another connection: nothing to decide, nothing written
                    queue.remove(entry_id)
                continue
            run.count(action, source)
            if run.done % TRIM_EVERY == 0:
                # Merged entries' embeddings, refills and the judge free memory all along, and glibc
                # keeps it resident: over a long run the loop's RSS climbs, most of it free heap.
                release_free_memory()
    return run.result(since, stop)
