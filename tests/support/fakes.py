"""Test-only fakes with hooks (the public, hook-free fakes live in memrefine_edge.testing)."""

from __future__ import annotations

import hashlib
from typing import Any, Callable

from memrefine_edge.core import ConfigurationError, Decision
from memrefine_edge.judging import MergedEntry, Merger
from memrefine_edge.methods import Method, PairContext


def _bucket(*parts: str) -> int:
    return int(hashlib.sha256("|".join(parts).encode()).hexdigest(), 16) % 10


class ScriptedMethod(Method):
    """Decides from a hash of the pair's ids: deterministic across processes and runs."""

    name = "scripted"

    def __init__(self, *, on_decide: Callable[[], None] | None = None, policy: str = "mixed") -> None:
        self.on_decide = on_decide
        self.policy = policy
        self.seen: list[tuple[str, str, float]] = []

    def decide(self, pair: PairContext) -> Decision:
        self.seen.append((pair.a.id, pair.b.id, pair.similarity))
        if self.on_decide:
            self.on_decide()
        if self.policy == "preserve":
            return Decision(action="preserve", target=None, reason="scripted", source="rule")
        b = _bucket(pair.a.id, pair.b.id)
        if b <= 2:
            return Decision(action="delete", target="b", reason="scripted", source="rule")
        if b <= 4:
            return Decision(action="delete", target="a", reason="scripted", source="llm")
        if b <= 7:
            return Decision(action="merge", target=None, merge_instruction="keep all", reason="scripted",
                            source="llm")
        return Decision(action="preserve", target=None, reason="scripted", source="llm")


class ConcatMerger(Merger):
    """Merges by keeping the longer text and the other's words it lacks: deterministic."""

    def __init__(self, *, on_merge: Callable[[], None] | None = None) -> None:
        self.on_merge = on_merge

    def merge(self, a: str, b: str, instruction: str) -> MergedEntry:
        if self.on_merge:
            self.on_merge()
        long_, short = (a, b) if len(a) >= len(b) else (b, a)
        extra = [w for w in short.split() if w not in long_.split()]
        return MergedEntry(content=(long_ + (" " + " ".join(extra) if extra else "")).strip(),
                           keywords=tuple(sorted(set(extra))[:3]), source="concat")


def interrupt_after_evictions(count: int) -> Callable[[Any], None]:
    """A ``progress`` callback that raises KeyboardInterrupt (Ctrl-C) once ``count`` evictions are committed."""
    seen: list[int] = []

    def interrupt(p: Any) -> None:
        if p.counts.get("evict", 0) > len(seen):
            seen.append(p.step)
            if len(seen) >= count:
                raise KeyboardInterrupt

    return interrupt


class UnsetMerger(Merger):
    """A merger that was never set up: every merge is a :class:`ConfigurationError` (a pass that fails)."""

    def merge(self, a: str, b: str, instruction: str) -> MergedEntry:
        raise ConfigurationError("no merge model was configured")
