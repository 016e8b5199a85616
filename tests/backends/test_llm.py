"""The llama.cpp loader: lazy import, one cached model, clean errors on broken files."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from memrefine_edge.core import ModelLoadError, ModelNotFoundError


def _gguf_or_skip():
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    from memrefine_edge.backends import model_path
    from memrefine_edge.core import ModelError

    try:
        return model_path("llm")
    except ModelError as exc:
        pytest.skip(f"judge GGUF missing ({exc}); run `memrefine models fetch`")


def test_importing_the_package_does_not_import_llama_cpp():
    code = "import sys, memrefine_edge.judging._judge, memrefine_edge.judging._merger, memrefine_edge.backends._llama, memrefine_edge.cli; " \
           "print('llama_cpp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_missing_file_is_model_not_found(tmp_path):
    from memrefine_edge.backends._llama import load_llama

    with pytest.raises(ModelNotFoundError):
        load_llama(tmp_path / "nope.gguf")


def test_not_a_gguf_is_model_load_error(tmp_path):
    from memrefine_edge.backends._llama import load_llama

    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"this is not a model" * 100)
    with pytest.raises(ModelLoadError, match="not a GGUF"):
        load_llama(bad)


@pytest.mark.models
def test_truncated_gguf_raises_model_load_error_without_crashing(tmp_path):
    # In a subprocess: llama.cpp prints to stderr, and a crash must not take pytest down.
    src = _gguf_or_skip()
    cut = tmp_path / "cut.gguf"
    with open(src, "rb") as fh:
        cut.write_bytes(fh.read(3_000_000))
    code = textwrap.dedent(f"""
        from memrefine_edge.core._errors import ModelLoadError
        from memrefine_edge.backends._llama import load_llama
        try:
            load_llama({str(cut)!r})
        except ModelLoadError as exc:
            print("MODEL_LOAD_ERROR", exc)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "MODEL_LOAD_ERROR" in out.stdout


@pytest.mark.models
def test_real_gguf_loads_and_generates():
    _gguf_or_skip()
    from memrefine_edge.backends._llama import chat_prompt, load_llama, tokenize

    llm = load_llama()
    assert load_llama() is llm  # one model per (path, n_ctx, threads)
    prompt = chat_prompt(llm, [{"role": "user", "content": "Name a colour."}])
    assert "Name a colour." in prompt
    out = llm.create_completion(tokenize(llm, prompt), max_tokens=4, temperature=0.0)
    assert out["choices"][0]["text"].strip()


@pytest.mark.models
def test_prefix_reuse_gives_the_same_logits():
    _gguf_or_skip()
    from memrefine_edge.backends._llama import eval_logits, load_llama, logprobs, tokenize

    llm = load_llama()
    base = tokenize(llm, "The capital of France is Paris. The capital of Italy is")
    other = tokenize(llm, "The capital of France is Paris. The capital of Spain is")
    cold = eval_logits(llm, base, reuse_prefix=False)
    eval_logits(llm, other, reuse_prefix=True)
    warm = eval_logits(llm, base, reuse_prefix=True)
    assert int(np.argmax(cold)) == int(np.argmax(warm))
    assert np.allclose(logprobs(cold), logprobs(warm), atol=0.05)
