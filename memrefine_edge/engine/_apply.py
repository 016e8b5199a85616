"""The one path from a proposed pair to its applied decision, for every phase of a run.

:meth:`DecisionPath.decide_and_apply` shows a pair to the method and applies
what it decides; :meth:`DecisionPath.apply` applies a decision made elsewhere
(the deferred phase's :meth:`Method.deferred`). Either way a decision is made
durable by :meth:`RunJournal.apply` in one transaction with the run's cursor;
a delete removes the target, a merge replaces both entries by the merger's
entry (embedded, under an id no entry ever had), and a merge whose text
cannot keep every fact falls back to a preserve, counted as such. A merge whose
text would free less than ``min_merge_saving`` of the shorter entry's text (a
concatenation of two distinct facts frees nothing) is kept as a preserve of
source ``saving``: it would cost an embedding and leave one longer entry for no
room. A merge whose text would be longer than ``max_merged_bytes`` is kept as a
preserve of source ``length``: an entry a reader's small context cannot take, and
that eviction could only drop whole. The pair queue, when there is one, follows each change.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, MutableSet
from typing import TYPE_CHECKING

import numpy as np

from memrefine_edge.core import Decision, DuplicateIdError, Entry, MergeOutputError, Source
from memrefine_edge.judging import build_merged_entry, merged_entry_id
from memrefine_edge.methods import Method, PairContext
from memrefine_edge.store import quantize_embedding

if TYPE_CHECKING:  # pragma: no cover
    from memrefine_edge.backends import Encoder
    from memrefine_edge.index import LocalPairs, PairQueue

    #: What proposes a run's pairs: the paper's queue, or live mode's bounded one (the same interface here).
    Queue = PairQueue | LocalPairs
    from memrefine_edge.judging import Merger
    from memrefine_edge.store import MemoryStore

__all__ = ["DecisionPath", "Pair"]

#: A proposed pair: the earlier entry's id, the later one's, and their similarity.
Pair = tuple[str, str, float]


class DecisionPath:
    """Decide and apply the pairs of one run (ids of ``run_id``, sizes in ``metric``).

    ``clock`` gets the seconds of each stage (``judge``, ``merge``, ``embed``,
    ``apply``); ``created`` the id of every entry a merge writes (the run's own,
    not another writer's). ``min_merge_saving``: the share of the shorter entry's
    text (UTF-8 bytes) a merge must free, else the pair is preserved (0: every merge
    that keeps the facts is taken, as in the paper). ``max_merged_bytes``: the longest merged text
    (UTF-8 bytes) a merge may write, else the pair is preserved (None: no limit).
    """

    def __init__(self, *, store: MemoryStore, method: Method, merger: Merger, encoder: Encoder, run_id: str,
                 metric: str, clock: dict[str, float], created: MutableSet[str],
                 min_merge_saving: float = 0.0, max_merged_bytes: int | None = None) -> None:
        self.store, self.method, self.merger, self.encoder = store, method, merger, encoder
        self.run_id, self.metric, self.clock, self.created = run_id, metric, clock, created
        self.min_merge_saving = min_merge_saving
        self.max_merged_bytes = max_merged_bytes

    def model_calls(self) -> int:
        """Model calls made so far by the method's judge and the merger."""
        return self.method.llm_calls + int(self.merger.stats.get("llm_calls", 0))

    def decide_and_apply(self, step: int, pair: Pair, queue: "Queue | None" = None) -> tuple[str, str]:
        """Show ``pair`` to the method and apply its decision as ``step``; returns ``(action, source)``.

        :class:`EntryNotFoundError` (nothing written) if an entry of the pair is gone.
        """
        a_id, b_id, sim = pair
        a, b = self.store.get(a_id), self.store.get(b_id)
        t = time.perf_counter()
        decision = self.method.decide(PairContext(a=a, b=b, similarity=sim, store=self.store))
        latency = (time.perf_counter() - t) * 1000
        self.clock["judge"] += latency / 1000
        return self.apply(step, pair, a, b, decision, latency_ms=latency, queue=queue)

    def apply(self, step: int, pair: Pair, a: Entry, b: Entry, decision: Decision, *, latency_ms: float,
              queue: "Queue | None" = None) -> tuple[str, str]:
        """Apply ``decision`` on the pair of entries ``a`` and ``b`` as ``step``; returns ``(action, source)``.

        ``queue`` (None before it is built) follows the change.
        """
        journal, clock = self.store.journal, self.clock
        a_id, b_id, _ = pair
        t = time.perf_counter()
        if decision.action == "delete":
            effect = journal.apply(self.run_id, step, pair, decision, metric=self.metric, latency_ms=latency_ms)
            if queue is not None:
                queue.remove(effect.removed[0])
            self.method.applied([a if effect.removed[0] == a_id else b], None)
            clock["apply"] += time.perf_counter() - t
            return "delete", decision.source
        if decision.action == "merge":
            # The merger's cheap lower bound, when it has one, spares writing a merge that is refused.
            bounded = self.min_merge_saving > 0 or self.max_merged_bytes is not None
            least = self.merger.least_bytes(a.content, b.content) if bounded else None
            refused = self._refused(a, b, least) if least is not None else None
            merged = self._merge(a, b, decision.merge_instruction) if refused is None else None
            if merged is not None:
                refused = self._refused(a, b, len(merged.content.encode("utf-8")))
            if merged is not None and refused is None:
                self._apply_merge(step, pair, a, b, decision, merged, latency_ms, queue)
                return "merge", decision.source
            if refused is not None:  # keeps the facts, but frees (almost) nothing or is too long: both stay
                decision = Decision("preserve", None, source=refused[0], reason=refused[1])
            else:  # the safe fallback: keep both entries, counted as such
                decision = Decision("preserve", None, source="fallback",
                                    reason=f"merge could not keep every fact; preserved ({decision.reason})")
            t = time.perf_counter()  # the failed merge is already in clock["merge"]
        journal.apply(self.run_id, step, pair, decision, metric=self.metric, latency_ms=latency_ms)
        clock["apply"] += time.perf_counter() - t
        return "preserve", decision.source

    def _apply_merge(self, step: int, pair: Pair, a: Entry, b: Entry, decision: Decision, merged: Entry,
                     latency_ms: float, queue: "Queue | None") -> None:
        journal, clock = self.store.journal, self.clock
        t = time.perf_counter()
        vec = self.encoder.embed([merged.content])[0]
        clock["embed"] += time.perf_counter() - t
        t = time.perf_counter()
        while True:
            try:
                journal.apply(self.run_id, step, pair, decision, metric=self.metric, merged=merged,
                              embedding=vec, model_id=self.encoder.model_id, latency_ms=latency_ms)
                break
            except DuplicateIdError:
                if not journal.id_in_use(merged.id):
                    raise
                # Another writer took the merged id since it was chosen: the next free one.
                merged = self._merged_entry(a, b, merged.content, merged.keywords)
        self.created.add(merged.id)
        self.method.applied([a, b], merged)
        if queue is not None:  # (without one, the queue built next reads it from the store)
            _follow_merge(queue, pair[0], pair[1], merged.id, vec, self.store)
        clock["apply"] += time.perf_counter() - t

    def _refused(self, a: Entry, b: Entry, merged_bytes: int) -> tuple[Source, str] | None:
        """Why a merged text of ``merged_bytes`` is not taken, as ``(source, reason)``: longer than
        ``max_merged_bytes`` (``length``), or freeing too little of the two texts (``saving``); None:
        it may be taken."""
        if self.max_merged_bytes is not None and merged_bytes > self.max_merged_bytes:
            return "length", (f"a merge would be {merged_bytes} text bytes, over {self.max_merged_bytes}; "
                              "both kept")
        short = self._short_saving(a, b, merged_bytes)
        return ("saving", short) if short is not None else None

    def _short_saving(self, a: Entry, b: Entry, merged_bytes: int) -> str | None:
        """Why a merged text of ``merged_bytes`` frees too little of ``a`` and ``b``'s text to be taken
        (None: it frees enough)."""
        if self.min_merge_saving <= 0:
            return None
        sizes = [len(e.content.encode("utf-8")) for e in (a, b)]
        freed = sum(sizes) - merged_bytes
        needed = self.min_merge_saving * min(sizes)
        if freed >= needed:
            return None
        return (f"a merge would free {freed} of {sum(sizes)} text bytes, under {self.min_merge_saving:g} of the "
                f"shorter entry ({needed:.0f}); both kept")

    def _merge(self, a: Entry, b: Entry, instruction: str) -> Entry | None:
        """The merger's entry for ``a`` and ``b``, or None when it cannot keep every fact."""
        t = time.perf_counter()
        try:
            out = self.merger.merge(a.content, b.content, instruction)
        except MergeOutputError:
            return None  # the safe fallback: keep both entries
        finally:
            self.clock["merge"] += time.perf_counter() - t
        return self._merged_entry(a, b, out.content, tuple(out.keywords))

    def _merged_entry(self, a: Entry, b: Entry, content: str, keywords: tuple[str, ...]) -> Entry:
        """The entry replacing ``a`` and ``b``, under an id no entry of the store has or had (merged_entry_id)."""
        entry_id = merged_entry_id(a.id, b.id, taken=self.store.journal.id_in_use)
        return build_merged_entry(a, b, content=content, keywords=keywords, entry_id=entry_id)


def _follow_merge(queue: "Queue", a_id: Hashable, b_id: Hashable, merged_id: str, vec: np.ndarray,
                  store: MemoryStore) -> None:
    """The queue after a merge: both entries out, the merged one in, as a resumed run's queue reads it back."""
    queue.remove(a_id)
    queue.remove(b_id)
    if queue.quantized:
        codes, scale = quantize_embedding(vec)
        queue.add(merged_id, codes, float(scale))  # (a float32 scale: exact as a float)
    else:
        queue.add(merged_id, store.as_stored(vec))
