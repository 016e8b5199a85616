"""Deterministic fakes for tests and for users who test code built on this package.

Nothing here loads a model. :class:`HashEncoder` maps words to fixed random
directions, so texts that share words get similar vectors; the scripted
judges and mergers replay decisions given up front.
"""

from __future__ import annotations

import hashlib
import re
from typing import Sequence

import numpy as np

from .encoder import Encoder

__all__ = ["HashEncoder"]

_WORD = re.compile(r"\w+", re.UNICODE)


class HashEncoder(Encoder):
    """Bag-of-words encoder with hashed word vectors: fast, deterministic, offline."""

    def __init__(self, *, dim: int = 384, model_id: str = "hash-bow") -> None:
        self.dim = dim
        self.model_id = model_id
        self._cache: dict[str, np.ndarray] = {}

    def _word(self, word: str) -> np.ndarray:
        vec = self._cache.get(word)
        if vec is None:
            seed = int.from_bytes(hashlib.sha256(word.encode("utf-8")).digest()[:8], "little")
            vec = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
            self._cache[word] = vec
        return vec

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                out[i] += self._word(word)
            norm = np.linalg.norm(out[i])
            if norm > 0:
                out[i] /= norm
            else:  # no words at all: a fixed unit vector, so cosine stays defined
                out[i, 0] = 1.0
        return out
