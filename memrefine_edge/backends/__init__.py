"""Model backends: the only modules that load model runtimes.

Where model files live and how they are fetched and verified (the manifest is package data);
the :class:`Encoder` ABC and :class:`OnnxEncoder` (the only importer of onnxruntime besides the
pair queue's integer products); the shared llama.cpp runtime (the only importer of llama_cpp,
an optional extra). Nothing heavy is imported here: ``import memrefine_edge.backends`` stays fast.
"""

from __future__ import annotations

from ._encoder import Encoder, OnnxEncoder
from ._llama import LlamaModel
from ._model_files import (
    BUILD_COMMAND,
    BUILT_ENCODER_FILE,
    ModelSpec,
    ModelStatus,
    check_models,
    fetch_models,
    model_path,
    models_dir,
)

__all__ = [
    "BUILD_COMMAND", "BUILT_ENCODER_FILE", "Encoder", "LlamaModel", "ModelSpec", "ModelStatus", "OnnxEncoder",
    "check_models", "fetch_models", "model_path", "models_dir",
]
