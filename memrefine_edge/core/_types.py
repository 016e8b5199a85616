"""The words that steer a compression run, one type each: its budget mode, its size metric, why it stopped.

Each is a :class:`~enum.StrEnum` whose value is the word users see (in
reports, JSON output, the audit log and the command line), so a member
compares equal to its string and is written as it.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Metric", "Mode", "StopReason"]


class Mode(StrEnum):
    """How a run treats its budget."""

    #: Stop when the budget is met or no candidate pair is left: facts take precedence over the budget.
    PAPER = "paper"
    #: The budget is hard: when the candidates run out above it, entries are evicted (each audited).
    STRICT = "strict"
    #: The budget is hard and the work bounded: only the entries that changed since the store's last
    #: live pass are judged, each against its nearest live neighbours, then entries are evicted as in
    #: strict mode. A pass's work grows with what changed, not with the store.
    LIVE = "live"

    @property
    def hard(self) -> bool:
        """Whether the budget is hard (eviction when the judged pairs do not meet it)."""
        return self is not Mode.PAPER


class Metric(StrEnum):
    """How a store's size is counted."""

    #: The paper's metric: the UTF-8 bytes of each entry serialised as JSON on its own.
    JSON = "json"
    #: The bytes the memory occupies in the database file, embeddings included.
    DISK = "disk"


class StopReason(StrEnum):
    """Why a compression run ended (``CompressionReport.stop_reason``; :attr:`CompressionReport.stop`)."""

    #: The store was within the budget before the run: nothing was recorded.
    ALREADY_WITHIN_BUDGET = "already within budget"
    BUDGET_MET = "budget met"
    #: Met only after the deletes a method deferred were taken.
    BUDGET_MET_BY_DEFERRED = "budget met by deferred deletes"
    #: Strict mode: met only after evictions.
    BUDGET_MET_BY_EVICTION = "budget met by eviction (strict mode)"
    #: Live mode: met only after evictions.
    BUDGET_MET_BY_EVICTION_LIVE = "budget met by eviction (live mode)"
    #: Strict mode: eviction stopped, as no other entry of the run that fits the budget alone was left.
    NO_ENTRY_FITS = "budget not met: no entry of the run fits the budget alone (strict mode)"
    #: Every candidate pair was judged (paper mode ends here above budget by design).
    NO_CANDIDATE = "no candidate pair left"
    #: The pairs left are below the run's ``min_similarity``: the report says which
    #: (``"no candidate pair left above min_similarity 0.6"``, see :meth:`describe`).
    BELOW_MIN_SIMILARITY = "no candidate pair left above min_similarity"
    #: The session made ``max_decisions`` decisions: the run is not finished and stays resumable.
    MAX_DECISIONS = "stopped after max_decisions (resumable)"

    @property
    def resumable(self) -> bool:
        """Whether the run was stopped before its end (it stays recorded as interrupted)."""
        return self is StopReason.MAX_DECISIONS

    @property
    def out_of_candidates(self) -> bool:
        """Whether the run ended because no pair was left to judge."""
        return self in (StopReason.NO_CANDIDATE, StopReason.BELOW_MIN_SIMILARITY)

    def describe(self, *, min_similarity: float | None = None) -> str:
        """The text a report gives: the value, with the threshold for :attr:`BELOW_MIN_SIMILARITY`."""
        if self is StopReason.BELOW_MIN_SIMILARITY:
            return f"{self.value} {min_similarity}"
        return self.value

    @classmethod
    def of(cls, text: str) -> StopReason:
        """The reason a report's text gives (the inverse of :meth:`describe`; ``ValueError`` for another text)."""
        try:
            return cls(text)
        except ValueError:
            if text.startswith(f"{cls.BELOW_MIN_SIMILARITY.value} "):
                return cls.BELOW_MIN_SIMILARITY
            raise
