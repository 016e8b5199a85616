"""A numpy reference BERT forward pass (no torch), for fidelity checks and the builder.

This is not on any runtime path: :class:`~memrefine_edge.backends._encoder.OnnxEncoder`
never imports it. It exists so the fp32 reference embeddings of
all-MiniLM-L6-v2 can be computed from the safetensors weights alone, and so
``scripts/build_encoder.py`` has a second, independent implementation to check
its hand-built ONNX graph against. It computes in float64 by default, so the
reference is (slightly) *more* exact than an fp32 run of the same weights.

Weights use the Hugging Face ``BertModel`` names without a prefix
(``embeddings.word_embeddings.weight``, ``encoder.layer.0.attention.self.query.weight``
...); linear weights are ``(out, in)`` as torch stores them.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

__all__ = ["BertConfig", "load_safetensors", "bert_forward", "mean_pool", "embed_reference"]


@dataclass(frozen=True)
class BertConfig:
    """Shape of the BERT; defaults are all-MiniLM-L6-v2's."""

    layers: int = 6
    hidden: int = 384
    heads: int = 12
    intermediate: int = 1536
    vocab: int = 30522
    max_positions: int = 512
    layer_norm_eps: float = 1e-12


def load_safetensors(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Load BERT weights from a safetensors file, dropping any ``bert.``/``model.`` prefix."""
    from safetensors.numpy import load_file  # build-only extra, so imported lazily

    out: dict[str, np.ndarray] = {}
    for name, arr in load_file(str(path)).items():
        for prefix in ("bert.", "model.", "inner."):
            if name.startswith(prefix):
                name = name[len(prefix):]
        out[name] = arr
    return out


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def _gelu(x: np.ndarray) -> np.ndarray:
    # The exact (erf) gelu that BERT's "gelu" activation means, not the tanh
    # approximation. numpy has no erf and scipy is not a dependency; math.erf
    # element-wise runs ~10 M/s, fast enough for a reference.
    erf = np.frompyfunc(math.erf, 1, 1)(x / math.sqrt(2.0)).astype(x.dtype)
    return 0.5 * x * (1.0 + erf)


def bert_forward(
    w: Mapping[str, np.ndarray],
    input_ids: np.ndarray,
    attention_mask: np.ndarray,
    token_type_ids: np.ndarray | None = None,
    *,
    config: BertConfig = BertConfig(),
    dtype: type = np.float64,
    taps: dict[str, np.ndarray] | None = None,
) -> np.ndarray:
    """``last_hidden_state`` ``(batch, seq, hidden)`` of a BERT encoder, in ``dtype``.

    ``taps``, if given, receives the input of every linear layer under the
    build graph's tensor names: ``emb_out``, and per layer ``i`` ``l{i}_ctxm``
    (the attention output's input), ``l{i}_ln1`` (the FFN's), ``l{i}_gelu``
    (the FFN output's) and ``l{i}_ln2`` (the next layer's).
    """
    c = config
    ids = np.asarray(input_ids, dtype=np.int64)
    mask = np.asarray(attention_mask, dtype=dtype)
    tt = np.zeros_like(ids) if token_type_ids is None else np.asarray(token_type_ids, dtype=np.int64)
    bsz, seq = ids.shape
    if seq > c.max_positions:
        raise ValueError(f"sequence of {seq} tokens exceeds {c.max_positions} positions")

    def p(name: str) -> np.ndarray:
        return np.asarray(w[name], dtype=dtype)

    x = p("embeddings.word_embeddings.weight")[ids]
    x = x + p("embeddings.position_embeddings.weight")[:seq][None]
    x = x + p("embeddings.token_type_embeddings.weight")[tt]
    x = _layer_norm(x, p("embeddings.LayerNorm.weight"), p("embeddings.LayerNorm.bias"), c.layer_norm_eps)
    tap = taps.__setitem__ if taps is not None else (lambda name, value: None)
    tap("emb_out", x)

    hd = c.hidden // c.heads
    # Additive mask as HF BertModel builds it: finfo.min where padded.
    bias = (1.0 - mask)[:, None, None, :] * np.finfo(dtype).min
    for i in range(c.layers):
        pre = f"encoder.layer.{i}."

        def lin(t: np.ndarray, name: str) -> np.ndarray:
            return t @ p(pre + name + ".weight").T + p(pre + name + ".bias")

        def heads(t: np.ndarray) -> np.ndarray:
            return t.reshape(bsz, seq, c.heads, hd).transpose(0, 2, 1, 3)

        q = heads(lin(x, "attention.self.query"))
        k = heads(lin(x, "attention.self.key"))
        v = heads(lin(x, "attention.self.value"))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hd) + bias
        scores = scores - scores.max(-1, keepdims=True)
        probs = np.exp(scores)
        probs /= probs.sum(-1, keepdims=True)
        ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(bsz, seq, c.hidden)
        tap(f"l{i}_ctxm", ctx)
        x = _layer_norm(x + lin(ctx, "attention.output.dense"),
                        p(pre + "attention.output.LayerNorm.weight"),
                        p(pre + "attention.output.LayerNorm.bias"), c.layer_norm_eps)
        tap(f"l{i}_ln1", x)
        h = _gelu(lin(x, "intermediate.dense"))
        tap(f"l{i}_gelu", h)
        x = _layer_norm(x + lin(h, "output.dense"), p(pre + "output.LayerNorm.weight"),
                        p(pre + "output.LayerNorm.bias"), c.layer_norm_eps)
        tap(f"l{i}_ln2", x)
    return x


def mean_pool(hidden: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
    """Attention-masked mean over tokens, then L2 normalisation (sentence-transformers' recipe)."""
    m = np.asarray(attention_mask, dtype=hidden.dtype)[..., None]
    pooled = (hidden * m).sum(1) / np.maximum(m.sum(1), 1e-9)
    return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)


def embed_reference(
    w: Mapping[str, np.ndarray],
    tokenizer: object,
    texts: Sequence[str],
    *,
    batch_size: int = 16,
) -> np.ndarray:
    """Reference sentence embeddings (float64, unit rows) for ``texts``.

    ``tokenizer`` is a configured ``tokenizers.Tokenizer`` (pad-to-longest,
    truncation set), the same one the encoder under test uses, so only the
    model differs between the two.
    """
    out = []
    for start in range(0, len(texts), batch_size):
        enc = tokenizer.encode_batch(list(texts[start : start + batch_size]))  # type: ignore[attr-defined]
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        tt = np.array([e.type_ids for e in enc], dtype=np.int64)
        out.append(mean_pool(bert_forward(w, ids, mask, tt), mask))
    return np.concatenate(out) if out else np.zeros((0, BertConfig().hidden))
