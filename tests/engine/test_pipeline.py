"""The one assembly point: options are validated from the method registry and wired, backends are swappable."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from memrefine_edge.core import (
    ConfigurationError,
    Decision,
    MethodOptionError,
    OptionConflictError,
    UnknownMethodError,
)
from memrefine_edge.engine import Backends, PipelineConfig, build
from memrefine_edge.judging import JudgeKind
from memrefine_edge.methods import Method, MethodOption, PairContext, register
from memrefine_edge.testing import FakeBackends, HashEncoder


@register
class Threshold(Method):
    """A method of a test's own: deletes B at or above ``cut``, preserves below; ``note`` is recorded."""

    name = "test-threshold"
    options = MappingProxyType({
        "cut": MethodOption(type=float, default=0.5, low=0.0, high=1.0, help="delete at or above this cosine"),
        "note": MethodOption(type=str, default="plain", choices=("plain", "loud"), help="a word to record"),
    })

    def __init__(self, *, cut: float = 0.5, note: str = "plain") -> None:
        self.cut, self.note = cut, note

    def decide(self, pair: PairContext) -> Decision:
        if pair.similarity >= self.cut:
            return Decision("delete", "b", reason=f"sim >= {self.cut}", source="rule")
        return Decision("preserve", None, reason="below the cut", source="rule")


def test_build_wires_the_judge_options_and_refuses_them_for_rule_methods():
    parts = build(PipelineConfig(judge=JudgeKind.FACT, merge_min_similarity=0.75), backends=FakeBackends())
    assert parts.method.describe()["judge"]["inner"] == {"type": "FactJudge", "min_word_cover": 0.75,
                                                         "merge_min_similarity": 0.75}
    parts = build(PipelineConfig(judge="fact", merge_min_similarity=0.0), backends=FakeBackends())
    assert parts.method.describe()["judge"]["merge_min_similarity"] == 0.0  # 0.0 is a value, not "unset"
    parts = build(PipelineConfig(merge_min_similarity=0.6), backends=FakeBackends())
    assert parts.method.describe()["judge"]["inner"]["merge_min_similarity"] == 0.6
    with pytest.raises(OptionConflictError, match="--merge-min-similarity applies to a method that decides with"):
        build(PipelineConfig(method="rulesim", merge_min_similarity=0.6), backends=FakeBackends())
    with pytest.raises(OptionConflictError, match=r"tau \(--tau\) applies to --method rulepr or rulesim"):
        build(PipelineConfig(method_options={"tau": 0.8}), backends=FakeBackends())
    with pytest.raises(OptionConflictError, match=r"protect \(--protect\) applies to --method rulepr, not rulesim"):
        build(PipelineConfig(method="rulesim", method_options={"protect": 0.9}), backends=FakeBackends())
    with pytest.raises(UnknownMethodError, match="unknown method 'nope'"):
        build(PipelineConfig(method="nope"), backends=FakeBackends())


def test_the_method_options_are_checked_from_what_the_method_declares():
    parts = build(PipelineConfig(method="rulepr", method_options={"tau": 0.9, "knn": 3}), backends=FakeBackends())
    assert parts.method.describe() == {"tau": 0.9, "protect": 0.9, "damping": 0.85, "knn": 3, "tol": 1e-12}
    with pytest.raises(MethodOptionError, match=r"knn must be an integer >= 1, got 0"):
        build(PipelineConfig(method="rulepr", method_options={"knn": 0}), backends=FakeBackends())
    with pytest.raises(MethodOptionError, match=r"tau must be a number, got 'high'"):
        build(PipelineConfig(method="rulesim", method_options={"tau": "high"}), backends=FakeBackends())
    with pytest.raises(OptionConflictError, match=r"method 'rulesim' has no option 'size' \(its options: tau\)"):
        build(PipelineConfig(method="rulesim", method_options={"size": 3}), backends=FakeBackends())


def test_a_registered_method_is_built_and_checked_like_a_built_in():
    parts = build(PipelineConfig(method="test-threshold", method_options={"cut": 0.9, "note": "loud"}),
                  backends=FakeBackends())
    assert isinstance(parts.method, Threshold) and (parts.method.cut, parts.method.note) == (0.9, "loud")
    assert parts.method.describe() == {"cut": 0.9, "note": "loud"}  # recorded with the run: a resume must match
    with pytest.raises(MethodOptionError, match=r"cut must be in \[0.0, 1.0\], got 1.5"):
        build(PipelineConfig(method="test-threshold", method_options={"cut": 1.5}), backends=FakeBackends())
    with pytest.raises(MethodOptionError, match="note must be one of plain, loud, got 'soft'"):
        build(PipelineConfig(method="test-threshold", method_options={"note": "soft"}), backends=FakeBackends())
    with pytest.raises(OptionConflictError, match="--merge-min-similarity"):  # it decides without a judge
        build(PipelineConfig(method="test-threshold", merge_min_similarity=0.5), backends=FakeBackends())


def test_the_legacy_option_keywords_still_work_with_a_deprecation_warning():
    with pytest.warns(DeprecationWarning, match=r"method_options=\{'tau': \.\.\., 'protect': \.\.\.\}"):
        config = PipelineConfig(method="rulepr", tau=0.9, protect=0.5)
    assert dict(config.method_options) == {"tau": 0.9, "protect": 0.5}
    assert build(config, backends=FakeBackends()).method.describe()["protect"] == 0.5
    with pytest.warns(DeprecationWarning), pytest.raises(OptionConflictError, match="tau is given twice"):
        PipelineConfig(method="rulesim", tau=0.9, method_options={"tau": 0.8})


@pytest.mark.parametrize("word, kind", [("none", JudgeKind.SCORER), ("scorer", JudgeKind.SCORER),
                                        ("fact", JudgeKind.FACT), ("bundled", JudgeKind.GGUF)])
def test_the_judge_model_words_become_a_judge_kind_with_a_deprecation_warning(word, kind):
    with pytest.warns(DeprecationWarning, match=f"give judge='{kind.value}'"):
        config = PipelineConfig(judge_model=word)
    assert (config.judge, config.judge_model) == (kind, None)


def test_the_judge_kind_and_the_model_path_are_two_settings():
    assert PipelineConfig().judge is JudgeKind.SCORER
    assert (PipelineConfig(judge_model="my.gguf").judge, PipelineConfig(judge="gguf").judge_model) == (
        JudgeKind.GGUF, None)
    with pytest.raises(OptionConflictError, match="--judge-model .a GGUF file. goes with --judge gguf, not --judge "
                                                  "fact"):
        PipelineConfig(judge="fact", judge_model="my.gguf")
    with pytest.raises(ConfigurationError, match="unknown judge 'large'"):
        PipelineConfig(judge="large")  # type: ignore[arg-type]


def test_real_backends_build_the_model_free_judge_without_loading_a_model():
    judge = Backends().judge(PipelineConfig())
    assert judge.describe()["inner"]["type"] == "ScorerJudge"
    assert Backends().judge(PipelineConfig(judge=JudgeKind.FACT)).describe()["inner"]["type"] == "FactJudge"
    rules = Backends().method(PipelineConfig(method="rulepr", method_options={"tau": 0.9, "protect": 0.5}))
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


def test_a_config_and_the_method_it_builds_travel_to_a_worker_process():
    import copy
    import pickle

    config = PipelineConfig(method="rulepr", method_options={"tau": 0.9}, judge="fact", threads=1)
    assert pickle.loads(pickle.dumps(config)) == config == copy.deepcopy(config)
    method = build(config, backends=FakeBackends()).method
    assert pickle.loads(pickle.dumps(method)).describe() == method.describe()
    options = {"tau": 0.9}
    shared = PipelineConfig(method="rulesim", method_options=options)
    options["tau"] = 0.1  # the config keeps what it was given
    assert shared.method_options == {"tau": 0.9}
