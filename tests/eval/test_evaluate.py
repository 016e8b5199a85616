"""The LoCoMo evaluation harness, offline: a self-written LoCoMo-shaped fixture, fake encoder/answerer/methods."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from memrefine_edge.core import Decision, EvalError, MemRefineError
from memrefine_edge.eval import EvalConfig, run_eval
from memrefine_edge.eval._answerer import Answerer
from memrefine_edge.eval._harness import recall_of, top_k
from memrefine_edge.eval._questions import Question, evidence_ids, load_questions, stratified_sample
from memrefine_edge.methods import Method, PairContext
from memrefine_edge.store import MemoryStore
from memrefine_edge.testing import HashEncoder
from tests.support.fakes import ConcatMerger

# Self-written two-person chat: two sessions, twelve turns. Evidence turns say
# distinctive things so the bag-of-words encoder retrieves them for their questions.
_TURNS = {
    1: [("Ana", "Hi Ben, how are you today?"),
        ("Ben", "Good thanks. I adopted a grey cat named Pixel last week."),
        ("Ana", "Lovely! I started pottery classes on Tuesday evenings."),
        ("Ben", "Nice. How are you?"),
        ("Ana", "Fine, thanks for asking."),
        ("Ben", "My sister Clara moved to Lisbon in March.")],
    2: [("Ana", "Hello again Ben!"),
        ("Ben", "Pixel the cat knocked over my coffee this morning."),
        ("Ana", "I sold my first pottery bowl at the market."),
        ("Ben", "Good to hear, how are you?"),
        ("Ana", "I am fine, thanks."),
        ("Ben", "Clara invited me to visit Lisbon in July.")],
}
_QA = [
    {"question": "What is the name of Ben's cat?", "answer": "Pixel", "evidence": ["D1:2"], "category": 4},
    {"question": "When does Ana go to pottery classes?", "answer": "Tuesday evenings", "evidence": ["D1:3"],
     "category": 2},
    {"question": "Where did Clara move and when will Ben visit Lisbon?", "answer": "Lisbon, July",
     "evidence": ["D1:6", "D2:6"], "category": 1},
    {"question": "What did Ana sell at the market?", "answer": "a pottery bowl", "evidence": ["D2:9; D2:3"],
     "category": 3},
    {"question": "What did Ben's dog knock over?", "adversarial_answer": "coffee", "evidence": ["D2:2"],
     "category": 5},
    {"question": "Which colour is Ana's car?", "adversarial_answer": "red", "evidence": [], "category": 5},
]


def _sample(sid: str = "conv-t1") -> dict:
    conv = {"speaker_a": "Ana", "speaker_b": "Ben"}
    for s, turns in _TURNS.items():
        conv[f"session_{s}_date_time"] = f"1:00 pm on {s} May, 2023"
        conv[f"session_{s}"] = [{"speaker": sp, "dia_id": f"D{s}:{i}", "text": t} for i, (sp, t) in enumerate(turns, 1)]
    return {"sample_id": sid, "conversation": conv, "qa": _QA}


@pytest.fixture
def data(tmp_path) -> Path:
    path = tmp_path / "locomo-tiny.json"
    path.write_text(json.dumps([_sample()]), encoding="utf-8")
    return path


class KeywordAnswerer(Answerer):
    """Answers with the first memory's last word; declines when there is no memory."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def answer(self, question, memories):
        self.calls.append((question, len(memories)))
        return memories[0].split()[-1].strip(".!?") if memories else "No information available"


class Deleter(Method):
    """Deletes a fixed entry first, then the later entry of every pair (a deliberate evidence loss)."""

    name = "deleter"

    def __init__(self, first: str) -> None:
        self.first = first

    def decide(self, pair: PairContext) -> Decision:
        if pair.store.__contains__(self.first) and self.first in (pair.a.id, pair.b.id):
            return Decision("delete", "a" if pair.a.id == self.first else "b", reason="scripted", source="llm")
        if self.first in pair.store:
            return Decision("preserve", None, reason="scripted", source="rule")
        return Decision("delete", "b", reason="scripted", source="rule")


def _config(data_path: Path, out: Path, **kw) -> EvalConfig:
    base = dict(data=data_path, out=out, methods=("rulesim",), budgets=(1.0, 0.7, 0.5), qa=False, chain=False)
    base.update(kw)
    return EvalConfig(**base)


def _factory(name, config):
    from memrefine_edge.methods import get_method

    if name == "deleter":
        return Deleter("conv-t1:D1:2"), ConcatMerger()
    return get_method(name, tau=0.99), ConcatMerger()


def _run(config, **kw):
    return run_eval(config, encoder=HashEncoder(), method_factory=_factory, extra_methods=("deleter",),
                    log=lambda m: None, **kw)


def test_evidence_ids_normalises_locomo_quirks():
    assert evidence_ids(["D8:6; D9:17", "D:11:26", "D", 3]) == {"D8:6", "D9:17", "D11:26"}


def test_recall_by_hand_and_top_k_matches_store_search(data, tmp_path):
    res = _run(_config(data, tmp_path / "out", keep_stores=True))
    base = res["samples"]["conv-t1"]["base"]
    # Recompute by hand: the store's own search, then provenance of the hits.
    enc = HashEncoder()
    cache = next((tmp_path / "out" / "cache").glob("*.db"))
    questions = load_questions(_sample())
    with MemoryStore(cache, create=False) as store:
        hand = []
        for q in questions[:4]:
            hits = store.search(q.text, 10, encoder=enc)
            hand.append(recall_of(q.evidence, [e.provenance for e, _ in hits]))
        ids, matrix = store.embeddings(model_id=enc.model_id)
        top = top_k(matrix, enc.embed([q.text for q in questions]), 10)
        for qi, q in enumerate(questions):
            assert [ids[i] for i in top[qi]] == [e.id for e, _ in store.search(q.text, 10, encoder=enc)]
    # 12 entries, top-10: a question misses evidence only if it ranks 11th or 12th.
    assert hand[0] == 1.0  # "Pixel" turn for the cat question
    assert recall_of(frozenset({"D1:6", "D2:6"}), [("D1:6",), ("D3:1",)]) == 0.5
    r = base["recall"]
    assert r["n"] == 5  # the question without evidence is not in recall
    assert r["by_category"]["4"] == {"sum": hand[0], "n": 1}
    assert r["by_category"]["1"]["sum"] == pytest.approx(hand[2])


def test_budgets_met_and_outputs_have_table_shape(data, tmp_path):
    out = tmp_path / "out"
    res = _run(_config(data, out, budgets=(1.0, 0.7, 0.5), qa=True), answerer=KeywordAnswerer())
    runs = res["samples"]["conv-t1"]["methods"]["rulesim"]
    for key, b in (("0.7", 0.7), ("0.5", 0.5)):
        assert runs[key]["budget_met"] and runs[key]["ratio_json"] <= b
        assert runs[key]["qa"]["n"] == 6
    saved = json.loads((out / "results.json").read_text())
    assert saved["machine"]["cores"] and saved["machine"]["versions"]["memrefine-edge"]
    assert saved["summary"]["methods"]["rulesim"]["0.5"]["f1"] is not None
    report = (out / "report.md").read_text()
    assert "| Method | Metric | Base | 70% | 50% |" in report
    for metric in ("Recall@10", "F1", "EM", "Storage (json)", "Entries"):
        assert f"| rulesim | {metric} |" in report
    assert "5 = adversarial" in report and "4 single-hop" in report
    assert not (out / "work").exists()  # compressed copies are cleaned up


def test_chain_gives_the_same_stores_as_independent_runs_in_paper_mode(data, tmp_path):
    a = _run(_config(data, tmp_path / "a", budgets=(1.0, 0.8, 0.6, 0.4), mode="paper"))
    b = _run(_config(data, tmp_path / "b", budgets=(1.0, 0.8, 0.6, 0.4), chain=True, mode="paper"))
    for key in ("0.8", "0.6", "0.4"):
        ra, rb = a["samples"]["conv-t1"]["methods"]["rulesim"][key], b["samples"]["conv-t1"]["methods"]["rulesim"][key]
        assert (ra["entries"], ra["json_bytes"], ra["recall"]) == (rb["entries"], rb["json_bytes"], rb["recall"])


def test_qa_limit_is_stratified_and_deterministic():
    qs = [Question(i, f"q{i}", c, frozenset(), {}) for i, c in enumerate([1] * 10 + [2] * 6 + [4] * 3 + [5] * 1)]
    one = stratified_sample(qs, 8, seed=3, key="s")
    assert [q.index for q in one] == [q.index for q in stratified_sample(qs, 8, seed=3, key="s")]
    assert len(one) == 8
    cats = [q.category for q in one]
    assert cats.count(1) == 4 and cats.count(2) == 2 and cats.count(4) == 1 and cats.count(5) == 1
    assert [q.index for q in one] == sorted(q.index for q in one)
    assert stratified_sample(qs, None, seed=3) == qs and len(stratified_sample(qs, 2, seed=0)) == 2


def test_qa_limit_through_the_harness(data, tmp_path):
    ans = KeywordAnswerer()
    res = _run(_config(data, tmp_path / "o", budgets=(1.0,), qa=True, qa_limit=3), answerer=ans)
    chosen = res["samples"]["conv-t1"]["qa_questions"]
    assert len(chosen) == 3 and len(ans.calls) == 3
    again = _run(_config(data, tmp_path / "o2", budgets=(1.0,), qa=True, qa_limit=3), answerer=KeywordAnswerer())
    assert again["samples"]["conv-t1"]["qa_questions"] == chosen
    assert res["samples"]["conv-t1"]["base"]["qa"]["n"] == 3  # category 5 without 'answer' scores fine


def test_attribution_finds_the_deleted_evidence_entry(data, tmp_path):
    res = _run(_config(data, tmp_path / "o", methods=("deleter",), budgets=(1.0, 0.5), attribution_budget=0.5))
    m = res["samples"]["conv-t1"]["methods"]["deleter"]["0.5"]
    base_recall = res["samples"]["conv-t1"]["base"]["recall"]
    assert m["recall"]["sum"] < base_recall["sum"]
    attr = m["attribution"]
    assert attr["questions_lost"] >= 1
    assert attr["fate"].get("deleted (llm)") == 1  # D1:2 (Pixel), deleted first by an 'llm' decision
    assert attr["by_decision"].get("delete/llm") == 1
    assert "4" in attr["by_category"]
    assert "Where evidence was lost" in (tmp_path / "o" / "report.md").read_text()


def test_backends_build_the_default_factorys_methods(data, tmp_path):
    # The same deleting method, once handed over as the pipeline's method (through backends, under the
    # name memrefine), once through a method factory: the same compressions.
    from memrefine_edge.testing import FakeBackends

    config = dict(budgets=(1.0, 0.5), attribution_budget=0.5)
    via_backends = run_eval(_config(data, tmp_path / "b", methods=("memrefine",), **config), encoder=HashEncoder(),
                            backends=FakeBackends(method=Deleter("conv-t1:D1:2"), merger=ConcatMerger()),
                            log=lambda m: None)
    via_factory = _run(_config(data, tmp_path / "f", methods=("deleter",), **config))
    got = via_backends["samples"]["conv-t1"]["methods"]["memrefine"]["0.5"]
    want = via_factory["samples"]["conv-t1"]["methods"]["deleter"]["0.5"]
    assert got["entries"] == want["entries"] and got["json_bytes"] == want["json_bytes"]
    assert got["attribution"]["fate"] == want["attribution"]["fate"]
    assert got["attribution"]["fate"]["deleted (llm)"] == 1  # D1:2, deleted first by the scripted method
    with pytest.raises(ValueError, match="not both"):
        _run(_config(data, tmp_path / "x"), backends=FakeBackends())
    assert not (tmp_path / "x").exists()


def test_text_store_has_no_recall(data, tmp_path):
    text_dir = tmp_path / "texts"
    text_dir.mkdir()
    (text_dir / "conv-t1.txt").write_text("Ben adopted a cat named Pixel.\n\nAna sold a pottery bowl.\n\n"
                                          "Clara moved to Lisbon.\n")
    res = _run(_config(data, tmp_path / "o", store="text", text_dir=text_dir, budgets=(1.0,)))
    assert res["samples"]["conv-t1"]["base"]["recall"] is None
    assert "not available" in (tmp_path / "o" / "report.md").read_text()


@pytest.mark.parametrize("change, message", [
    ({"data": Path("/nonexistent/locomo.json")}, "no LoCoMo file"),
    ({"samples": ("conv-99",)}, "no sample 'conv-99'"),
    ({"methods": ("nosuch",)}, "unknown method 'nosuch'"),
    ({"budgets": (1.0, 1.5)}, "budget must be in (0, 1]"),
    ({"budgets": (0.0,)}, "budget must be in (0, 1]"),
    ({"store": "graph"}, "unknown store kind"),
    ({"qa_limit": 0}, "--qa-limit"),
])
def test_bad_input_is_a_clear_error_and_writes_nothing(data, tmp_path, change, message):
    out = tmp_path / "out"
    with pytest.raises(MemRefineError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        _run(_config(data, out, **change))
    assert not out.exists()


def test_cli_errors_and_help(data, tmp_path):
    from click.testing import CliRunner

    from memrefine_edge.cli import cli

    runner = CliRunner()
    res = runner.invoke(cli, ["eval", "locomo", "--data", str(data), "--samples", "conv-99", "--no-qa",
                              "--out", str(tmp_path / "o")])
    assert res.exit_code == 1 and "no sample 'conv-99'" in res.output
    assert not (tmp_path / "o").exists()
    res = runner.invoke(cli, ["eval", "locomo", "--data", str(data), "--budgets", "0.5,x", "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "--budgets" in res.output  # a bad option value: a usage error
    assert "--qa-limit" in runner.invoke(cli, ["eval", "locomo", "--help"]).output


def test_top_k_ties_break_by_insertion_order():
    m = np.array([[1, 0], [1, 0], [0, 1]], dtype=np.float32)
    assert top_k(m, np.array([[1, 0]], dtype=np.float32), 2).tolist() == [[0, 1]]


def test_a_missing_answer_model_file_is_reported_at_construction(tmp_path):
    from memrefine_edge.core import ModelNotFoundError
    from memrefine_edge.eval._answerer import LlamaAnswerer

    with pytest.raises(ModelNotFoundError, match="nope.gguf"):
        LlamaAnswerer(model_path=tmp_path / "nope.gguf")


def test_context_measures_and_floors_run_through_the_harness(data, tmp_path):
    res = _run(_config(data, tmp_path / "out", methods=("rulesim", "fifo", "random"), context_bytes=(300, 600)))
    base = res["samples"]["conv-t1"]["base"]
    assert set(base["context"]) == {"300", "600"} and base["presence"]["n"] > 0
    assert base["context"]["600"]["answer_sum"] >= base["context"]["300"]["answer_sum"]  # more context, no less
    fifo = res["samples"]["conv-t1"]["methods"]["fifo"]["0.5"]
    assert fifo["budget_met"] and fifo["llm_calls"] == 0 and fifo["actions"]["evict"] > 0
    summary = res["summary"]["methods"]
    assert summary["random"]["0.5"]["answer_recall@300"] is not None
    report = (tmp_path / "out" / "report.md").read_text()
    assert "Utility within a context budget" in report and "Answer@300" in report and "fifo" in report
    with pytest.raises(EvalError, match="context sizes"):
        _run(_config(data, tmp_path / "o2", context_bytes=(0,)))
