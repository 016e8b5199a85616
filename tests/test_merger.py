"""The merge guard: facts of both entries must survive; repair, fall back, or raise."""

from __future__ import annotations

import pytest

from memrefine_edge.errors import MergeOutputError
from memrefine_edge.merger import GuardedMerger, MergedEntry, concat_merge, default_keywords, parse_merged
from memrefine_edge.testing import FakeMerger

A = "Joanna finished her first screenplay last Friday."
B = "Joanna: Thanks, Nate! I plan to send the screenplay to a film festival in Austin."


def test_merged_entry_rejects_empty_content():
    with pytest.raises(ValueError):
        MergedEntry("  ")


def test_good_merge_passes_unchanged():
    good = "Joanna finished her first screenplay last Friday and plans to send it to a film festival in Austin."
    m = GuardedMerger(FakeMerger([good]))
    out = m.merge(A, B, "keep both")
    assert out.content == good and out.source == "llm"


def test_fact_losing_merge_is_repaired():
    m = GuardedMerger(FakeMerger(["Joanna finished her first screenplay last Friday."]))
    out = m.merge(A, B, "keep both")
    assert out.source == "repair"
    assert "Austin" in out.content and "last Friday" in out.content
    assert m.stats["repairs"] == 1


def test_invented_facts_fall_back_to_concat():
    m = GuardedMerger(FakeMerger(["Joanna finished a screenplay in 1999 with Bob in Austin for a festival."]))
    out = m.merge(A, B, "keep both")
    assert out.source == "concat" and "1999" not in out.content


def test_invalid_output_twice_then_concat_or_raise():
    err = MergeOutputError("bad", raw="junk")
    m = GuardedMerger(FakeMerger([err, err]))
    out = m.merge(A, B, "")
    assert out.source == "concat" and m.stats["invalid_outputs"] == 2 and m.stats["fallbacks"] == 1
    strict = GuardedMerger(FakeMerger([err, err]), fallback="raise")
    with pytest.raises(MergeOutputError):
        strict.merge(A, B, "")


def test_concat_merge_drops_filler_and_keeps_speakers():
    out = concat_merge(B, "Joanna: Bye! The festival is in May.")
    assert "Thanks" not in out.content and "Bye" not in out.content
    assert out.content.startswith("Joanna: ") and out.content.count("Joanna:") == 1
    assert "May" in out.content and "Austin" in out.content


def test_concat_merge_skips_a_covered_entry():
    out = concat_merge("Tim visited London in 2019 with Ana.", "Tim visited London in 2019.")
    assert out.content == "Tim visited London in 2019 with Ana."


def test_rule_only_merger():
    out = GuardedMerger(None).merge(A, B, "")
    assert out.source == "concat" and "Austin" in out.content


def test_parse_merged():
    m = parse_merged('{"content": "Tim ran in Rome.", "keywords": ["Tim", "Rome", "Tim", 3]}')
    assert m.content == "Tim ran in Rome." and m.keywords == ("Tim", "Rome", "3")
    for raw in ("", "{}", '{"content": ""}', "{bad"):
        with pytest.raises(MergeOutputError):
            parse_merged(raw)


def test_default_keywords_use_written_words():
    kws = default_keywords("Tim writes for an online fantasy literature magazine.")
    assert "Tim" in kws and "literature" in kws


@pytest.mark.models
def test_real_model_merge_is_guarded():
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    from memrefine_edge.errors import ModelError
    from memrefine_edge.merger import LlamaMerger
    from memrefine_edge.models import model_path

    try:
        model_path("llm")
    except ModelError as exc:
        pytest.skip(f"judge GGUF missing ({exc})")
    m = GuardedMerger(LlamaMerger(max_tokens=48), retries=0)
    out = m.merge("Tim ran a marathon in Rome in 2019.", "Tim: I finished the Rome marathon in 3 hours.", "")
    assert not m.missing(out.content, "Tim ran a marathon in Rome in 2019.", "Tim: I finished the Rome marathon in 3 hours.")


def test_a_missing_merge_model_file_is_reported_at_construction(tmp_path):
    from memrefine_edge.errors import ModelNotFoundError
    from memrefine_edge.merger import LlamaMerger

    with pytest.raises(ModelNotFoundError, match="nope.gguf"):
        LlamaMerger(tmp_path / "nope.gguf")
