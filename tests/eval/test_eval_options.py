"""The evaluation builds each method from the same options object as the command line, checked up front."""

from __future__ import annotations

import json

import pytest

from memrefine_edge.core import EvalError, MethodOptionError, OptionConflictError
from memrefine_edge.eval import EvalConfig, run_eval
from memrefine_edge.judging import JudgeKind
from memrefine_edge.store import MemoryStore
from memrefine_edge.testing import FakeBackends, HashEncoder
from tests.eval.test_evaluate import _sample


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "locomo-tiny.json"
    path.write_text(json.dumps([_sample()]), encoding="utf-8")
    return path


def _config(data, out, **kw) -> EvalConfig:
    return EvalConfig(data=data, out=out, budgets=(1.0, 0.5), qa=False, **kw)


def test_each_method_gets_its_own_options_and_the_judge_settings_only_where_it_uses_a_judge(data, tmp_path):
    config = _config(data, tmp_path / "out", methods=("memrefine", "rulepr"), judge_model="fact",
                     merge_min_similarity=0.7, merger="llm",
                     method_options={"rulepr": {"tau": 0.95, "knn": 3}, "memrefine": {"keep_last_copies": False}})
    pr = config.pipeline_config("rulepr")
    assert dict(pr.method_options) == {"tau": 0.95, "knn": 3} and pr.merge_min_similarity is None
    mr = config.pipeline_config("memrefine")
    assert (mr.judge, mr.judge_model, mr.merge_min_similarity) == (JudgeKind.FACT, None, 0.7)
    assert dict(mr.method_options) == {"keep_last_copies": False} and mr.merge_model == "bundled"
    gguf = _config(data, tmp_path / "out", methods=("memrefine",), judge_model="my.gguf", merger="llm")
    assert (gguf.pipeline_config("memrefine").judge_model, gguf.pipeline_config("memrefine").merge_model) == (
        "my.gguf", "my.gguf")


def test_the_options_reach_the_methods_and_are_recorded(data, tmp_path):
    config = _config(data, tmp_path / "out", methods=("rulesim",), method_options={"rulesim": {"tau": 0.99}},
                     keep_stores=True, mode="paper")
    res = run_eval(config, encoder=HashEncoder(), backends=FakeBackends(), log=lambda m: None)
    assert res["config"]["method_options"] == {"rulesim": {"tau": 0.99}}
    compressed = next(p for p in (tmp_path / "out").rglob("*-rulesim-0.5.db"))
    with MemoryStore(compressed, create=False) as store:
        [run] = store.journal.runs()
        assert run.params["options"] == {"tau": 0.99}  # the method the run compressed with
        assert all("tau 0.99" in d.reason for d in store.journal.decisions(run.run_id))


@pytest.mark.parametrize("options, error, message", [
    ({"rulesim": {"tau": 2}}, MethodOptionError, r"tau must be in \[-1.0, 1.0\], got 2"),
    ({"rulesim": {"protect": 0.5}}, OptionConflictError, r"protect \(--protect\) applies to --method rulepr"),
    ({"rulepr": {"tau": 0.9}}, EvalError, "options are given for 'rulepr', which is not among the methods"),
    ({"fifo": {"tau": 0.9}}, EvalError, "options are given for 'fifo'"),
])
def test_bad_method_options_stop_the_evaluation_before_anything_is_written(data, tmp_path, options, error,
                                                                            message):
    out = tmp_path / "out"
    config = _config(data, out, methods=("rulesim", "fifo"), method_options=options)
    with pytest.raises(error, match=message):
        run_eval(config, encoder=HashEncoder(), backends=FakeBackends(), log=lambda m: None)
    assert not out.exists()
