"""The control-flow vocabulary: each word has one type, and its value is the word users see."""

from __future__ import annotations

import json
from typing import get_args

import pytest

from memrefine_edge.core import (
    ACTIONS,
    AUDIT_ACTIONS,
    SOURCES,
    Action,
    AuditAction,
    CompressionReport,
    Decision,
    Metric,
    Mode,
    Source,
    StopReason,
)


def test_the_value_tuples_are_read_from_the_literal_types():
    assert ACTIONS == get_args(Action) == ("delete", "merge", "preserve")
    assert AUDIT_ACTIONS == (*ACTIONS, "evict") == get_args(AuditAction)
    assert SOURCES == get_args(Source)


def test_evict_is_a_source():
    # The audit log records evictions with source "evict": the vocabulary must name it.
    assert "evict" in SOURCES


def test_a_decision_still_refuses_an_unknown_action_or_source():
    with pytest.raises(ValueError, match="unknown action"):
        Decision("evict", None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown source"):
        Decision("preserve", None, source="oracle")  # type: ignore[arg-type]


def test_members_are_their_strings():
    assert Mode.PAPER == "paper" and Mode("strict") is Mode.STRICT
    assert Metric.DISK == "disk" and f"{Metric.JSON}_bytes" == "json_bytes"
    assert json.dumps({"stop_reason": StopReason.BUDGET_MET}) == '{"stop_reason": "budget met"}'


@pytest.mark.parametrize("reason", list(StopReason))
def test_every_stop_reason_reads_back_from_its_text(reason):
    assert StopReason.of(reason.describe(min_similarity=0.6)) is reason


def test_the_min_similarity_reason_names_its_threshold():
    text = StopReason.BELOW_MIN_SIMILARITY.describe(min_similarity=0.5)
    assert text == "no candidate pair left above min_similarity 0.5"
    assert StopReason.of(text).out_of_candidates and StopReason.NO_CANDIDATE.out_of_candidates
    assert not StopReason.BUDGET_MET.out_of_candidates


def test_only_a_capped_session_is_resumable():
    assert [r for r in StopReason if r.resumable] == [StopReason.MAX_DECISIONS]


def test_an_unknown_text_is_no_stop_reason():
    with pytest.raises(ValueError):
        StopReason.of("stopped for lunch")


def test_a_report_gives_its_stop_reason_typed():
    report = CompressionReport(run_id="r", method="m", metric="json", mode="paper", target_bytes=1, before={},
                               after={}, budget_met=False, stop_reason="no candidate pair left above min_similarity 0.7")
    assert report.stop is StopReason.BELOW_MIN_SIMILARITY
