"""The method interface: what the engine asks about a proposed pair.

Every method runs on the same engine (candidate order, application,
checkpoints, audit); only the decision differs.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Sequence

    from memrefine_edge.core import Decision, Entry
    from memrefine_edge.store import MemoryStore

__all__ = ["Method", "PairContext"]


@dataclass(frozen=True)
class PairContext:
    """The proposed pair: ``a`` is the earlier-inserted entry."""

    a: "Entry"
    b: "Entry"
    similarity: float
    store: "MemoryStore"


class Method(abc.ABC):
    """A compression method: one abstract method, :meth:`decide`."""

    #: Registry name, used by ``--method`` and recorded with each run.
    name: str = ""

    @abc.abstractmethod
    def decide(self, pair: PairContext) -> "Decision":
        """The decision for one proposed pair."""

    def prepare(self, store: "MemoryStore") -> None:
        """Called once before the loop (e.g. to compute graph scores)."""

    def applied(self, removed: "Sequence[Entry]", added: "Entry | None") -> None:
        """Called after each delete or merge the engine applied: ``removed`` left the store, ``added`` joined it."""

    def deferred(self, pair: PairContext) -> "Decision | None":
        """The delete to take now for a pair this method preserved with ``source="deferred"``, or None.

        The engine asks only when the candidate pairs run out (or fall below
        ``min_similarity``) with the store still above budget, for each
        deferred pair (of this run or an earlier one) whose two entries are
        both still live, in the order they were decided, until the budget holds. A delete returned is
        applied as a decision of its own, audited as returned; None leaves the
        pair preserved; anything else is a
        :class:`~memrefine_edge.core._errors.ConfigurationError`. Methods
        that never defer keep this default.
        """
        return None

    def load(self) -> None:
        """Load any model the method needs; called before a run records anything."""

    def describe(self) -> dict[str, Any]:
        """Parameters worth recording with the run."""
        return {}

    @property
    def llm_calls(self) -> int:
        """LLM calls made so far by this method's judge (0 for rule methods)."""
        return 0
