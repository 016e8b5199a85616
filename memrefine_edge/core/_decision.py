"""The judge stage's vocabulary: what may happen to a proposed pair, and who decided it.

Every decider returns a :class:`Decision`: the fast path of
:mod:`memrefine_edge.text._facts`, the judges of :mod:`memrefine_edge.judging._judge`, the
rule baselines of :mod:`memrefine_edge.methods._rules`; the journal records it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

__all__ = ["Action", "AuditAction", "Target", "Source", "Decision", "ACTIONS", "AUDIT_ACTIONS", "SOURCES"]

#: What happens to the pair.
Action = Literal["delete", "merge", "preserve"]
#: What the audit log records for a step of a run: a pair's decision, or (strict mode) one entry evicted.
AuditAction = Literal[Action, "evict"]
#: Which entry a delete removes.
Target = Literal["a", "b"]
#: Who decided: a deterministic rule, the model, the fact guard, the learned redundancy scorer, the
#: safe fallback after invalid output, or the last-copy check (``deferred``: a preserve of a pair whose
#: delete would take the store's last copy of a specific word; the delete is taken later only if the
#: budget cannot be met otherwise, see :mod:`memrefine_edge.text._lastcopy`); ``saving``: a merge the run
#: kept as a preserve because it would free too little of the two texts (live mode's ``min_merge_saving``);
#: ``length``: a merge kept as a preserve because its text would be longer than the run's ``max_merged_bytes``;
#: ``evict``: an eviction (strict and live modes), which the run itself decides.
Source = Literal["rule", "llm", "guard", "scorer", "fallback", "deferred", "saving", "length", "evict"]
#: The values of :data:`Action`, :data:`AuditAction` and :data:`Source` (read from the types: one source of truth).
ACTIONS: tuple[str, ...] = get_args(Action)
AUDIT_ACTIONS: tuple[str, ...] = get_args(AuditAction)
SOURCES: tuple[str, ...] = get_args(Source)


@dataclass(frozen=True)
class Decision:
    """What to do with one pair. ``target`` is set exactly when ``action == "delete"``."""

    action: Action
    target: Target | None
    merge_instruction: str = ""
    reason: str = ""
    source: Source = "llm"

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"unknown action {self.action!r}")
        if self.action == "delete" and self.target not in ("a", "b"):
            raise ValueError("a delete needs target 'a' or 'b'")
        if self.action != "delete" and self.target is not None:
            raise ValueError("target is only set for a delete")
        if self.source not in SOURCES:
            raise ValueError(f"unknown source {self.source!r}")

    def as_dict(self) -> dict[str, Any]:
        """The decision as a plain dict (JSON lines, the audit log)."""
        return {"action": self.action, "target": self.target, "merge_instruction": self.merge_instruction,
                "reason": self.reason, "source": self.source}
