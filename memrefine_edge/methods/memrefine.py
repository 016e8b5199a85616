"""The paper's method: a judge (fast path, model, fact guard) decides each pair."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..decision import Decision
from ..judge import merge_instruction_for
from ..lastcopy import LastCopies
from .base import Method, PairContext

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Sequence

    from ..judge import Judge
    from ..store import Entry, MemoryStore

__all__ = ["MemRefineMethod"]


class MemRefineMethod(Method):
    """The paper's method: an LLM judge (behind the fast path and fact guard) decides."""

    name = "memrefine"

    def __init__(self, *, judge: "Judge", keep_last_copies: bool = True) -> None:
        self.judge = judge
        #: Refuse a delete that would take the store's last copy of a specific word
        #: (:mod:`memrefine_edge.lastcopy`): the pair is merged instead.
        self.keep_last_copies = keep_last_copies
        self._copies: LastCopies | None = None

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
        """The judge's decision; a delete of a last copy becomes a merge (see ``keep_last_copies``)."""
        a, b = pair.a.content, pair.b.content
        decision = self.judge.decide(a, b, pair.similarity)
        if decision.action != "delete" or self._copies is None:
            return decision
        gone, kept = (a, b) if decision.target == "a" else (b, a)
        last = self._copies.last(gone, kept)
        if not last:
            return decision
        shown = ", ".join(sorted(last)[:5]) + (", ..." if len(last) > 5 else "")
        return Decision("merge", None, merge_instruction=merge_instruction_for(a, b), source="guard",
                        reason=f"{decision.reason}; but entry {str(decision.target).upper()} holds the store's last "
                               f"copy of {shown}: merged instead")

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
        return {"judge": getattr(self.judge, "describe", lambda: type(self.judge).__name__)(),
                "keep_last_copies": self.keep_last_copies}

    @property
    def llm_calls(self) -> int:
        stats = getattr(self.judge, "stats", None) or {}
        return int(stats.get("llm_calls", 0))
