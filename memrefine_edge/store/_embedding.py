"""The stored form of an embedding (read and written by :mod:`~memrefine_edge.store._vectors`).

Compact: an embedding is written as int8 with one float32
scale per vector, ``TAG + scale + d int8`` (``d + 8`` bytes: 392 at d = 384,
against 1,536 as float32). ``TAG`` reads as a float32 NaN, which no stored
float32 embedding can start with (embeddings are finite), so a store written
by an older version -- raw float32 blobs -- is read as it is, without a
migration, and an entry embedded again is written compactly.

Quantisation: ``q = round(127 v / max|v|)``, ``scale = |v| / |q|``; the vector
read back is ``q * scale`` in float32: the direction of ``q`` at the length of
``v`` (a unit vector stays a unit vector, so dot products stay cosines).
"""

from __future__ import annotations

import numpy as np

__all__ = ["EMBEDDING_TAG", "HEADER_BYTES", "encode_embedding", "decode_embedding", "quantize_embedding",
           "stored_embedding_bytes"]

#: The first 4 bytes of a compact (int8) embedding: a float32 NaN when read as float32.
EMBEDDING_TAG = b"Q8\xff\x7f"
#: Bytes before the codes: the tag, then the float32 scale.
HEADER_BYTES = len(EMBEDDING_TAG) + 4


def quantize_embedding(vector: np.ndarray) -> tuple[np.ndarray, np.float32]:
    """The stored form of one embedding: int8 codes and the float32 scale (read back as ``codes * scale``)."""
    v = np.asarray(vector, dtype=np.float32).ravel()
    top = float(np.max(np.abs(v))) if v.size else 0.0
    if not np.isfinite(top):
        raise ValueError("an embedding must be finite")
    if top == 0:
        return np.zeros(v.shape, dtype=np.int8), np.float32(0)
    q = np.clip(np.rint(v / np.float32(top / 127.0)), -127, 127).astype(np.int8)
    # The scale keeps the vector's length (a unit vector reads back as one): dot products stay cosines.
    scale = np.float32(np.linalg.norm(v.astype(np.float64)) / np.linalg.norm(q.astype(np.float64)))
    return q, scale


def encode_embedding(vector: np.ndarray) -> bytes:
    """The stored (int8, per-vector scale) bytes of one embedding."""
    q, scale = quantize_embedding(vector)
    return EMBEDDING_TAG + scale.tobytes() + q.tobytes()


def decode_embedding(blob: bytes) -> np.ndarray:
    """The float32 vector of a stored embedding (compact int8, or the float32 of older stores)."""
    if blob[:4] == EMBEDDING_TAG:
        scale = np.frombuffer(blob, dtype=np.float32, count=1, offset=len(EMBEDDING_TAG))[0]
        return np.frombuffer(blob, dtype=np.int8, offset=HEADER_BYTES).astype(np.float32) * scale
    return np.frombuffer(blob, dtype=np.float32)


def stored_embedding_bytes(dim: int) -> int:
    """Bytes one embedding of ``dim`` dimensions takes as stored: the tag, the float32 scale, ``dim`` int8."""
    return HEADER_BYTES + dim
