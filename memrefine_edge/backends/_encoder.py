"""Sentence encoders: text in, L2-normalised float32 vectors out.

:class:`Encoder` is the small ABC every backend implements (one abstract
method, :meth:`Encoder.embed_batch`); batching and validation live on the base
class. :class:`OnnxEncoder` runs all-MiniLM-L6-v2 through onnxruntime.
"""

from __future__ import annotations

import abc
import os
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from memrefine_edge.core import InvalidEntryError, ModelLoadError

if TYPE_CHECKING:  # tokenizers is imported lazily, only when an encoder is built
    from tokenizers import Tokenizer

__all__ = ["Encoder", "OnnxEncoder", "load_tokenizer"]

#: BERT's learned position table; no encoder input may be longer.
_MAX_POSITIONS = 512
_SURROGATE = re.compile("[\ud800-\udfff]")


class Encoder(abc.ABC):
    """Base class of sentence encoders.

    Subclasses set :attr:`model_id` (stored with every embedding, so vectors
    from different models are never mixed) and :attr:`dim`, and implement
    :meth:`embed_batch`.
    """

    model_id: str = "unknown"
    dim: int = 384
    #: Texts per call to :meth:`embed_batch`.
    batch_size: int = 8
    #: Calls to :meth:`embed_batch` run at once by :meth:`embed` (threads). Above
    #: 1, ``embed_batch`` must be thread-safe (onnxruntime's ``run`` is).
    workers: int = 1

    @abc.abstractmethod
    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Embed one batch: an ``(len(texts), dim)`` float32 array, rows L2-normalised."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed any number of texts, in batches of :attr:`batch_size`, :attr:`workers` at a time."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a list of texts, not a single string")
        texts = list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise InvalidEntryError(f"text {i} is {type(t).__name__}, not str")
            if _SURROGATE.search(t):  # tokenizers and UTF-8 cannot take a lone surrogate
                raise InvalidEntryError(f"text {i} is not valid Unicode text (it holds a lone surrogate)")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        # Sorting by length keeps padding (and so wasted compute) small per batch.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        batches = [order[start : start + self.batch_size] for start in range(0, len(order), self.batch_size)]

        def run(idx: list[int]) -> tuple[list[int], np.ndarray]:
            vecs = np.asarray(self.embed_batch([texts[i] for i in idx]), dtype=np.float32)
            if vecs.shape != (len(idx), self.dim):
                raise RuntimeError(f"{type(self).__name__}.embed_batch returned shape {vecs.shape}")
            return idx, vecs

        out = np.empty((len(texts), self.dim), dtype=np.float32)
        if self.workers > 1 and len(batches) > 1:
            with ThreadPoolExecutor(max_workers=min(self.workers, len(batches))) as pool:
                for idx, vecs in pool.map(run, batches):
                    out[idx] = vecs
        else:
            for idx, vecs in map(run, batches):
                out[idx] = vecs
        return out


def load_tokenizer(path: str | os.PathLike[str], *, max_tokens: int = 256) -> "Tokenizer":
    """Load a BERT ``tokenizer.json`` set up as the encoder uses it.

    The shipped file pads every text to a fixed 128 tokens and truncates at
    128: pad to the longest text of each batch instead (far less work on
    short texts) and truncate at ``max_tokens``, where sentence-transformers
    truncates this model. Fidelity references must tokenise through here too,
    so that only the model differs between what is compared.

    :raises ModelLoadError: the file is not a tokenizer ``tokenizers`` can read.
    """
    from tokenizers import Tokenizer

    from ._model_files import FETCH_COMMAND

    try:
        tok = Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a bare Exception on bad JSON
        raise ModelLoadError(
            f"cannot load tokenizer {path}: {exc}; delete it and run `{FETCH_COMMAND}`"
        ) from exc
    pad_id = tok.token_to_id("[PAD]")
    tok.no_padding()
    tok.enable_padding(pad_id=0 if pad_id is None else pad_id, pad_token="[PAD]")
    tok.no_truncation()
    tok.enable_truncation(max_length=max_tokens)
    return tok


def _default_threads() -> int:
    # Two intra-op threads is where MiniLM stops scaling well on small batches,
    # and it leaves the rest of a phone/SBC to the agent that owns the device.
    return max(1, min(2, os.cpu_count() or 1))


class OnnxEncoder(Encoder):
    """all-MiniLM-L6-v2 through onnxruntime: tokenise, run, mean-pool, L2-normalise.

    The ONNX graph returns per-token ``last_hidden_state``; pooling (masked
    mean over real tokens) and normalisation happen here, as
    sentence-transformers does them. Texts are padded to the longest in the
    batch (the shipped tokenizer pads everything to 128) and truncated to
    ``max_tokens`` (sentence-transformers' 256 for this model).

    :param model_path: ONNX file; default :func:`~memrefine_edge.backends._model_files.default_encoder_path`:
        the int8 model ``scripts/build_encoder.py --install`` built here
        (verified against its build record), else the manifest's packaged
        ``encoder`` (verified). Any other file is only checked for existence;
        its sha256 still goes into :attr:`model_id`.
    :param tokenizer_path: ``tokenizer.json``; default is the manifest's ``tokenizer``.
    :param threads: CPU threads; default ``min(2, cpu_count)``. With
        ``batch_size=1`` that many texts run at once, one thread each;
        otherwise each batch runs on that many onnxruntime intra-op threads.
    :param batch_size: texts per session run. The default 1 makes every
        text's vector independent of the texts embedded with it: a dynamically
        quantized int8 model scales its activations by the whole input tensor,
        so in a batch one text's vector moved by up to 3e-2 with its
        batch-mates (and padding). One text per run is also as fast here:
        no padding is computed, and two runs in parallel use both cores
        (``bench/encoder.py``).
    :param max_tokens: truncation length including ``[CLS]``/``[SEP]`` (2..512).
    :param verbose: let onnxruntime log warnings/info instead of errors only.
    :raises ModelNotFoundError: a model file is missing.
    :raises ModelChecksumError: a manifest model file does not match its sha256.
    :raises ModelLoadError: onnxruntime or tokenizers cannot load a file.
    """

    def __init__(
        self,
        *,
        model_path: str | os.PathLike[str] | None = None,
        tokenizer_path: str | os.PathLike[str] | None = None,
        threads: int | None = None,
        batch_size: int = 1,
        max_tokens: int = 256,
        verbose: bool = False,
    ) -> None:
        # Heavy imports live here so `import memrefine_edge` stays fast.
        import onnxruntime as ort

        from ._model_files import FETCH_COMMAND, default_encoder_path, sha256_file, verify_digest
        from ._model_files import model_path as resolve

        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if not 2 <= max_tokens <= _MAX_POSITIONS:
            raise ValueError(f"max_tokens must be in 2..{_MAX_POSITIONS}, got {max_tokens}")
        self.threads = _default_threads() if threads is None else int(threads)
        if self.threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        self._batch_size = batch_size
        # One text per run: parallel runs on one intra-op thread each scale
        # better than one run on two threads (bench/encoder.py).
        self.workers = self.threads if batch_size == 1 else 1
        self.max_tokens = max_tokens
        self.model_file: Path = default_encoder_path() if model_path is None else resolve("encoder", model_path)
        self.tokenizer_file: Path = resolve("tokenizer", tokenizer_path)
        # The full hash is made anyway (for the model id): hold it to the manifest or
        # build record too, before loading, so bytes changed in place are caught.
        digest = sha256_file(self.model_file)
        verify_digest(self.model_file, digest)

        self._tokenizer = load_tokenizer(self.tokenizer_file, max_tokens=max_tokens)

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1 if self.workers > 1 else self.threads
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        # The arena keeps the high-water mark of every shape it has seen: one
        # batch of long texts grew a session to several times its size without it.
        opts.enable_cpu_mem_arena = False
        opts.log_severity_level = 1 if verbose else 3
        try:
            self._session = ort.InferenceSession(
                str(self.model_file), sess_options=opts, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime's pybind errors share no useful base class
            raise ModelLoadError(
                f"onnxruntime cannot load encoder model {self.model_file} ({exc}); the file is "
                f"truncated or corrupted: delete it and run `{FETCH_COMMAND}`"
            ) from exc

        names = {i.name for i in self._session.get_inputs()}
        missing = {"input_ids", "attention_mask"} - names
        out_shape = self._session.get_outputs()[0].shape
        if missing or len(out_shape) != 3 or not isinstance(out_shape[2], int):
            raise ModelLoadError(
                f"{self.model_file} is not a BERT token-embedding model (inputs {sorted(names)}, "
                f"output shape {out_shape}); run `{FETCH_COMMAND}` for the supported encoder"
            )
        self._wants_token_types = "token_type_ids" in names
        self._output = self._session.get_outputs()[0].name
        self.dim = int(out_shape[2])
        self.model_id = f"{self.model_file.stem}@{digest[:12]}"
        #: Sequence length of the last session run (lets tests see the padding);
        #: with parallel runs, of whichever finished last.
        self.last_seq_len = 0

    @property
    def batch_size(self) -> int:  # type: ignore[override]
        """Texts per session run; fixed at construction, because the session's threads were chosen for it."""
        return self._batch_size

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Embed one batch: ``(len(texts), dim)`` float32, rows L2-normalised."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        enc = self._tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if self._wants_token_types:
            feeds["token_type_ids"] = np.zeros_like(ids)  # single sentences: segment 0
        self.last_seq_len = ids.shape[1]
        hidden = self._session.run([self._output], feeds)[0]
        m = mask.astype(np.float32)[:, :, None]
        # Masked mean: padded positions carry real (non-zero) activations, so
        # they must be excluded, not just averaged in. Every row has at least
        # [CLS] and [SEP], so the count is never 0; the clamp is belt and braces.
        pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)
