"""memrefine_edge: keep an agent's long-term memory store inside a storage budget, offline.

Embed every entry, repeatedly take the most cosine-similar pair not yet
judged, and let a judge decide delete / merge / preserve on factual content,
until the store fits the budget or no candidate is left (MemRefine). Runs on
the device: an int8 MiniLM ONNX encoder, a learned redundancy scorer behind
hard fact checks as the judge (a local GGUF judge through llama.cpp is
optional), a SQLite store.

Names are imported lazily, so ``import memrefine_edge`` stays fast and loads
no model runtime::

    from memrefine_edge import MemoryStore, Compressor, OnnxEncoder
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "CompressionReport": "core",
    "Compressor": "engine",
    "Decision": "core",
    "Encoder": "backends",
    "Entry": "core",
    "FactJudge": "judging",
    "GuardedJudge": "judging",
    "GuardedMerger": "judging",
    "Judge": "judging",
    "LlamaJudge": "judging",
    "LlamaMerger": "judging",
    "MemRefineError": "core",
    "MemRefineMethod": "methods",
    "MemoryStore": "store",
    "MergedEntry": "judging",
    "Merger": "judging",
    "Method": "methods",
    "OnnxEncoder": "backends",
    "PairQueue": "index",
    "RedundancyScorer": "judging",
    "RunLock": "store",
    "ScorerJudge": "judging",
    "StoreStats": "store",
    "Upkeep": "engine",
    "default_judge": "judging",
    "get_method": "methods",
    "register": "methods",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'memrefine_edge' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
