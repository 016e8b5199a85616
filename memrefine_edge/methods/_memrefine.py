"""The paper's method: a judge (fast path, model, fact guard) decides each pair.

With the last-copy check on (the default), a delete that would take the
store's last copy of a specific word becomes a merge that keeps both texts;
with ``defer_last_copies`` the pair is preserved instead (``source="deferred"``),
and :meth:`MemRefineMethod.deferred` takes the delete only if the engine runs
out of candidate pairs above budget (:mod:`memrefine_edge.text._lastcopy`).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from memrefine_edge.core import Decision, OptionConflictError
from memrefine_edge.judging import default_judge, merge_instruction_for
from memrefine_edge.text import LastCopies

from ._base import Method, MethodOption, PairContext
from ._registry import register

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Sequence

    from memrefine_edge.core import Entry
    from memrefine_edge.judging import Judge
    from memrefine_edge.store import MemoryStore

__all__ = ["MemRefineMethod"]


def _shown(keys: frozenset[str]) -> str:
    """Up to five keys, sorted, for a reason."""
    return ", ".join(sorted(keys)[:5]) + (", ..." if len(keys) > 5 else "")


@register
class MemRefineMethod(Method):
    """The paper's method: a judge (behind the fast path and fact guard) decides.

    ``judge``: the judge that decides each pair (default:
    :func:`~memrefine_edge.judging.default_judge`, the redundancy scorer
    behind the fact checks, no language model).
    """

    name = "memrefine"
    uses_judge = True
    options = MappingProxyType({
        "keep_last_copies": MethodOption(
            type=bool, default=True, flag="--no-last-copy-check",
            help="refuse a delete that would take the store's last copy of a specific word (a rare word, name, "
                 "number or date): the pair is merged instead (false lets such a delete through)"),
        "defer_last_copies": MethodOption(
            type=bool, default=False, flag="--defer-last-copies",
            help="with the last-copy check: preserve such a pair instead of merging it, and take the delete only "
                 "when no candidate pair is left above the budget"),
    })

    def __init__(self, *, judge: "Judge | None" = None, keep_last_copies: bool = True,
                 defer_last_copies: bool = False) -> None:
        self.judge: Judge = judge if judge is not None else default_judge()
        #: Refuse a delete that would take the store's last copy of a specific word
        #: (:mod:`memrefine_edge.text._lastcopy`): the pair is merged instead, keeping both texts.
        self.keep_last_copies = keep_last_copies
        #: With the check on: preserve the refused pair instead of merging it (``source="deferred"``),
        #: and take the delete only if the run runs out of candidate pairs above budget (:meth:`deferred`).
        self.defer_last_copies = defer_last_copies
        self._copies: LastCopies | None = None

    @classmethod
    def validate_options(cls, values: Mapping[str, Any]) -> None:
        """Deferring a last copy's delete needs the last-copy check."""
        if values["defer_last_copies"] and not values["keep_last_copies"]:
            raise OptionConflictError("defer_last_copies (--defer-last-copies) needs the last-copy check: drop "
                                      "keep_last_copies=false (--no-last-copy-check)")

    @property
    def last_copies(self) -> LastCopies | None:
        """The counts of the last-copy check (None before :meth:`prepare`, or with the check off)."""
        return self._copies

    def prepare(self, store: "MemoryStore") -> None:
        """Count the live entries' content keys for the last-copy check."""
        if self.keep_last_copies:
            self._copies = LastCopies()
            self._copies.build(store.contents())

    def decide(self, pair: PairContext) -> "Decision":
        """The judge's decision; a delete of a last copy becomes a merge, or a deferral (``defer_last_copies``)."""
        a, b = pair.a.content, pair.b.content
        decision = self.judge.decide(a, b, pair.similarity)
        if decision.action != "delete" or self._copies is None:
            return decision
        gone, kept = (a, b) if decision.target == "a" else (b, a)
        last = self._copies.last(gone, kept)
        if not last:
            return decision
        side = str(decision.target).upper()
        if self.defer_last_copies:
            return Decision("preserve", None, source="deferred",
                            reason=f"{decision.reason}; entry {side} holds the store's last copy of {_shown(last)}: "
                                   "deferred")
        return Decision("merge", None, merge_instruction=merge_instruction_for(a, b), source="guard",
                        reason=f"{decision.reason}; but entry {side} holds the store's last copy of {_shown(last)}: "
                               "merged instead")

    def deferred(self, pair: PairContext) -> "Decision | None":
        """The judge's delete of a deferred pair, taken without the last-copy check (None if it no longer deletes).

        Entries never change, so the judge sees the texts it saw when the
        delete was deferred (in this run or an earlier one); the reason says
        which last copies the delete takes. With the check off (an earlier run
        deferred the pair), the delete is taken as the judge makes it.
        """
        a, b = pair.a.content, pair.b.content
        decision = self.judge.decide(a, b, pair.similarity)
        if decision.action != "delete":
            return None
        side = str(decision.target).upper()
        if self._copies is None:
            held = f"entry {side} was deferred by an earlier run (last-copy check off now)"
        else:
            gone, kept = (a, b) if decision.target == "a" else (b, a)
            last = self._copies.last(gone, kept)
            held = (f"entry {side} held the store's last copy of {_shown(last)}" if last
                    else f"entry {side} no longer holds a last copy")
        return Decision("delete", decision.target, source="guard",
                        reason=f"{decision.reason}; the budget needed the bytes: deferred delete taken, {held}")

    def applied(self, removed: "Sequence[Entry]", added: "Entry | None") -> None:
        """Keep the last-copy counts in step with the store."""
        if self._copies is None:
            return
        for entry in removed:
            self._copies.remove(entry.content)
        if added is not None:
            self._copies.add(added.content)

    def load(self) -> None:
        """Load the judge's model now."""
        self.judge.load()

    def describe(self) -> dict[str, Any]:
        """The judge's settings and the last-copy options, recorded with the run."""
        return {"judge": self.judge.describe(), "keep_last_copies": self.keep_last_copies,
                "defer_last_copies": self.defer_last_copies}

    @property
    def llm_calls(self) -> int:
        """The judge's model calls so far (its ``stats["llm_calls"]``)."""
        return int(self.judge.stats.get("llm_calls", 0))
