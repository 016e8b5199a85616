"""Sentence encoders: text in, L2-normalised float32 vectors out.

:class:`Encoder` is the small ABC every backend implements (one abstract
method, :meth:`Encoder.embed_batch`); batching and validation live on the base
class. :class:`OnnxEncoder` runs all-MiniLM-L6-v2 through onnxruntime.
"""

from __future__ import annotations

import abc
from typing import Sequence

import numpy as np

from .errors import InvalidEntryError

__all__ = ["Encoder"]


class Encoder(abc.ABC):
    """Base class of sentence encoders.

    Subclasses set :attr:`model_id` (stored with every embedding, so vectors
    from different models are never mixed) and :attr:`dim`, and implement
    :meth:`embed_batch`.
    """

    model_id: str = "unknown"
    dim: int = 384
    #: Texts per call to :meth:`embed_batch`.
    batch_size: int = 32

    @abc.abstractmethod
    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Embed one batch: an ``(len(texts), dim)`` float32 array, rows L2-normalised."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed any number of texts, in batches of :attr:`batch_size`."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a list of texts, not a single string")
        texts = list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise InvalidEntryError(f"text {i} is {type(t).__name__}, not str")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        # Sorting by length keeps padding (and so wasted compute) small per batch.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            vecs = np.asarray(self.embed_batch([texts[i] for i in idx]), dtype=np.float32)
            if vecs.shape != (len(idx), self.dim):
                raise RuntimeError(f"{type(self).__name__}.embed_batch returned shape {vecs.shape}")
            out[idx] = vecs
        return out
