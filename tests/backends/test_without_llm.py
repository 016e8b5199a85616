"""Without the ``llm`` extra (llama-cpp-python not installed): everything but GGUF models works, and a GGUF
model asked for fails before any work with one typed error naming the extra."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from memrefine_edge.cli import cli
from memrefine_edge.core import MissingExtraError, ModelError
from memrefine_edge.engine import Backends
from memrefine_edge.store import MemoryStore
from memrefine_edge.testing import HashEncoder

INSTALL = "pip install 'memrefine-edge[llm]'"
SAMPLE = Path(__file__).resolve().parents[2] / "memrefine_edge" / "data" / "sample_store.jsonl"


@pytest.fixture
def no_llama_cpp(monkeypatch):
    """``import llama_cpp`` fails as it does where the extra is not installed."""
    for name in [m for m in sys.modules if m == "llama_cpp" or m.startswith("llama_cpp.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "llama_cpp", None)


@pytest.fixture
def gguf(tmp_path) -> Path:
    """A file that passes the path and header checks (it is never loaded)."""
    path = tmp_path / "judge.gguf"
    path.write_bytes(b"GGUF" + b"\0" * 60)
    return path


class HashBackends(Backends):
    """The real judge and merger factories (GGUF options included) with the bag-of-words encoder."""

    def encoder(self, config):
        return HashEncoder()


def _one_error_line(res) -> str:
    assert res.exit_code == 1, res.output
    assert "Traceback" not in res.output
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), res.output
    return lines[0]


@pytest.mark.parametrize("part", ["LlamaJudge", "LlamaMerger", "LlamaAnswerer"])
def test_a_gguf_model_without_the_extra_is_a_typed_error_naming_it(no_llama_cpp, gguf, part):
    import memrefine_edge
    from memrefine_edge.eval._answerer import LlamaAnswerer

    cls = LlamaAnswerer if part == "LlamaAnswerer" else getattr(memrefine_edge, part)
    with pytest.raises(MissingExtraError, match=r"memrefine-edge\[llm\]") as info:
        cls(model_path=gguf)
    assert info.value.extra == "llm" and isinstance(info.value, ModelError)
    assert INSTALL in str(info.value) and "\n" not in str(info.value)


def test_the_bundled_gguf_without_the_extra_fails_the_same_way(no_llama_cpp):
    from memrefine_edge.judging import default_judge

    with pytest.raises(MissingExtraError, match=r"memrefine-edge\[llm\]"):
        default_judge("gguf")  # the bundled GGUF


def test_loading_a_gguf_without_the_extra_is_the_same_error(no_llama_cpp, gguf):
    from memrefine_edge.backends._llama import clear_cache, load_llama

    clear_cache()
    with pytest.raises(MissingExtraError, match=r"memrefine-edge\[llm\]"):
        load_llama(gguf)


def test_judge_pairs_with_a_gguf_judge_prints_one_line_naming_the_extra(no_llama_cpp, gguf, tmp_path):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"id": "p1", "a": "Ana moved to Lisbon.", "b": "Ana lives in Lisbon.",
                                 "similarity": 0.9}) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    for judge_model in (str(gguf), "bundled"):
        res = CliRunner().invoke(cli, ["judge-pairs", str(pairs), "--judge-model", judge_model, "--out", str(out)],
                                 obj=HashBackends())
        assert INSTALL in _one_error_line(res)
        assert not out.exists()


@pytest.mark.parametrize("option", ["--judge-model", "--merge-model"])
def test_compress_with_a_gguf_model_fails_before_any_work(no_llama_cpp, gguf, tmp_path, option):
    db = tmp_path / "m.db"
    runner = CliRunner()
    res = runner.invoke(cli, ["import", "--format", "jsonl", str(SAMPLE), "--db", str(db)], obj=HashBackends())
    assert res.exit_code == 0, res.output
    with MemoryStore(db, create=False) as store:
        before = sorted((e.id, e.content) for e in store.entries())
    res = runner.invoke(cli, ["compress", "--db", str(db), "--budget", "0.5", option, str(gguf)], obj=HashBackends())
    assert INSTALL in _one_error_line(res)
    with MemoryStore(db, create=False) as store:
        assert sorted((e.id, e.content) for e in store.entries()) == before
    res = runner.invoke(cli, ["log", "--db", str(db), "--json"], obj=HashBackends())
    assert res.exit_code == 0 and json.loads(res.output)["runs"] == [], res.output  # no run was recorded


@pytest.mark.models
def test_import_compress_search_upkeep_and_context_eval_run_without_llama_cpp(no_llama_cpp, tmp_path):
    """The default pipeline (real encoder, model-free judge) never needs llama_cpp."""
    from memrefine_edge.backends import OnnxEncoder
    from memrefine_edge.core import Entry
    from memrefine_edge.engine import Compressor, Upkeep
    from memrefine_edge.judging import GuardedMerger, default_judge
    from memrefine_edge.methods._memrefine import MemRefineMethod

    runner = CliRunner()
    db = tmp_path / "m.db"
    res = runner.invoke(cli, ["import", "--format", "jsonl", str(SAMPLE), "--db", str(db)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(cli, ["compress", "--db", str(db), "--budget", "0.75", "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.output.splitlines()[-1])
    assert report["budget_met"] and report["llm_calls"] == 0
    res = runner.invoke(cli, ["search", "cat", "-k", "3", "--db", str(db), "--json"])
    assert res.exit_code == 0, res.output

    encoder = OnnxEncoder(threads=1)
    with MemoryStore(tmp_path / "live.db") as store:
        comp = Compressor(store, encoder=encoder, method=MemRefineMethod(judge=default_judge()),
                          merger=GuardedMerger(None))
        upkeep = Upkeep(comp, high_bytes=1_500, low_bytes=1_000).install()
        for i in range(12):
            store.add(Entry(id=f"n{i}", content=f"Ana adopted a grey cat named Pixel in May {2000 + i % 2}."))
        assert upkeep.wait_idle() and store.stats().json_bytes <= 1_500

    data = tmp_path / "locomo-tiny.json"
    turns = [{"speaker": s, "dia_id": f"D1:{i}", "text": t} for i, (s, t) in enumerate(
        [("Ana", "Hi Ben!"), ("Ben", "I adopted a grey cat named Pixel."), ("Ana", "Lovely, hi again!"),
         ("Ben", "My sister Clara moved to Lisbon in March.")], 1)]
    data.write_text(json.dumps([{"sample_id": "conv-t1", "conversation": {
        "speaker_a": "Ana", "speaker_b": "Ben", "session_1_date_time": "1:00 pm on 1 May, 2023",
        "session_1": turns}, "qa": [{"question": "What is the name of Ben's cat?", "answer": "Pixel",
                                     "evidence": ["D1:2"], "category": 4}]}]), encoding="utf-8")
    res = runner.invoke(cli, ["eval", "locomo", "--data", str(data), "--no-qa", "--methods", "memrefine",
                              "--budgets", "0.7", "--context-bytes", "200", "--out", str(tmp_path / "eval")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "eval" / "results.json").is_file()
    res = runner.invoke(cli, ["eval", "locomo", "--data", str(data), "--methods", "memrefine", "--budgets", "0.7",
                              "--out", str(tmp_path / "eval-qa")])  # QA needs the answer model: the extra
    assert INSTALL in _one_error_line(res)
    assert not (tmp_path / "eval-qa").exists()
