"""The paper's method: a judge (fast path, model, fact guard) decides each pair."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import Method, PairContext

if TYPE_CHECKING:  # pragma: no cover
    from ..decision import Decision
    from ..judge import Judge

__all__ = ["MemRefineMethod"]


class MemRefineMethod(Method):
    """The paper's method: an LLM judge (behind the fast path and fact guard) decides."""

    name = "memrefine"

    def __init__(self, *, judge: "Judge") -> None:
        self.judge = judge

    def decide(self, pair: PairContext) -> "Decision":
        return self.judge.decide(pair.a.content, pair.b.content, pair.similarity)

    def load(self) -> None:
        """Load the judge's model now."""
        self.judge.load()

    def describe(self) -> dict[str, Any]:
        return {"judge": getattr(self.judge, "describe", lambda: type(self.judge).__name__)()}

    @property
    def llm_calls(self) -> int:
        stats = getattr(self.judge, "stats", None) or {}
        return int(stats.get("llm_calls", 0))
