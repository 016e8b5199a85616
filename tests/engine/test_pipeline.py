"""The one assembly point: options are validated and wired, backends are swappable."""

from __future__ import annotations

import pytest

from memrefine_edge.core import OptionConflictError, UnknownMethodError
from memrefine_edge.engine import Backends, PipelineConfig, build
from memrefine_edge.testing import FakeBackends, HashEncoder


def test_build_wires_the_judge_options_and_refuses_them_for_rule_methods():
    parts = build(PipelineConfig(judge_model="fact", merge_min_similarity=0.75), backends=FakeBackends())
    assert parts.method.describe()["judge"]["inner"] == {"type": "FactJudge", "min_word_cover": 0.75,
                                                         "merge_min_similarity": 0.75}
    parts = build(PipelineConfig(judge_model="fact", merge_min_similarity=0.0), backends=FakeBackends())
    assert parts.method.describe()["judge"]["merge_min_similarity"] == 0.0  # 0.0 is a value, not "unset"
    parts = build(PipelineConfig(merge_min_similarity=0.6), backends=FakeBackends())
    assert parts.method.describe()["judge"]["inner"]["merge_min_similarity"] == 0.6
    with pytest.raises(OptionConflictError, match="--merge-min-similarity"):
        build(PipelineConfig(method="rulesim", merge_min_similarity=0.6), backends=FakeBackends())
    with pytest.raises(OptionConflictError, match="--tau and --protect"):
        build(PipelineConfig(tau=0.8), backends=FakeBackends())
    with pytest.raises(OptionConflictError, match="--protect only"):
        build(PipelineConfig(method="rulesim", protect=0.9), backends=FakeBackends())
    with pytest.raises(UnknownMethodError, match="unknown method 'nope'"):
        build(PipelineConfig(method="nope"), backends=FakeBackends())


def test_real_backends_build_the_model_free_judge_without_loading_a_model():
    judge = Backends().judge(PipelineConfig())
    assert judge.describe()["inner"]["type"] == "ScorerJudge"
    assert Backends().judge(PipelineConfig(judge_model="fact")).describe()["inner"]["type"] == "FactJudge"
    rules = Backends().method(PipelineConfig(method="rulepr", tau=0.9, protect=0.5))
    assert rules.name == "rulepr" and rules.describe()["tau"] == 0.9


def test_fake_backends_return_what_they_are_given():
    enc = HashEncoder(dim=16)
    parts = build(PipelineConfig(method="rulesim"), backends=FakeBackends(encoder=enc))
    assert parts.encoder is enc and parts.method.name == "rulesim"


def test_real_backends_take_the_bundled_gguf_by_name_for_merges():
    from memrefine_edge.judging import GuardedMerger, LlamaMerger

    merger = Backends().merger(PipelineConfig(merge_model="bundled"))
    assert isinstance(merger, GuardedMerger) and isinstance(merger.inner, LlamaMerger)
    assert merger.inner.model_path is None  # the bundled file; nothing is loaded here
    assert Backends().merger(PipelineConfig()).inner is None  # the deterministic merge
