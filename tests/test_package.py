"""The package's public surface: every exported name resolves, and resolving them loads no model runtime."""

from __future__ import annotations

import subprocess
import sys

import memrefine_edge


def test_every_exported_name_resolves_without_loading_a_model_runtime():
    code = (
        "import sys, memrefine_edge as m\n"
        "missing = [n for n in m.__all__ if getattr(m, n, None) is None]\n"
        "print(missing, sorted(x for x in ('llama_cpp', 'onnxruntime', 'tokenizers') if x in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[] []"


def test_dir_lists_the_public_api_and_unknown_names_raise():
    assert {"MemoryStore", "Compressor", "default_judge", "FactJudge", "Upkeep"} <= set(dir(memrefine_edge))
    try:
        memrefine_edge.NoSuchThing  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("an unknown attribute must raise AttributeError")
