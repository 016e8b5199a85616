"""Exact int8 dot products of one row against a matrix of int8 rows, through onnxruntime.

A row rescan of the pair queue (a refill, or the scan of a merged entry) is
one matrix-vector product over every live vector. With the store's int8 codes
numpy has no integer kernel worth using, so the queue casts the codes to
float32 block by block first: 10 ms at 100k x 384 on this class of machine.
onnxruntime, already loaded for the encoder, has one (``MatMulInteger``,
int8 x int8 -> int32): 5.9 ms for the same product, on one thread, and the
result is exact (|dot| <= 384 * 128 * 128 < 2**31; as float32 it is exact
too, being below 2**24).

The one-node model is written here as protobuf bytes (no ``onnx`` package at
run time; ``tests/test_int8dot.py`` checks the bytes against ``onnx`` where it
is installed). The session is created on first use and kept; it runs on one
intra-op thread: the product is memory-bound, and a second thread only waits
on the first when the cores are shared. Without onnxruntime, or if the
session cannot be created, :func:`row_dots` returns ``None`` and the caller
keeps its numpy path.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

__all__ = ["matmul_integer_model", "row_dots"]

_INT8, _INT32 = 3, 6  # onnx TensorProto.DataType


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(num: int, value: bytes | str | int) -> bytes:
    """One protobuf field: a varint (wire type 0) for an int, length-delimited (2) otherwise."""
    if isinstance(value, int):
        return _varint(num << 3) + _varint(value)
    raw = value.encode() if isinstance(value, str) else value
    return _varint(num << 3 | 2) + _varint(len(raw)) + raw


def _tensor_info(name: str, elem_type: int, dims: tuple[str | int, ...]) -> bytes:
    # ValueInfoProto{name, type: TypeProto{tensor_type: {elem_type, shape: {dim...}}}}
    shape = b"".join(_field(1, _field(2, d) if isinstance(d, str) else _field(1, d)) for d in dims)
    return _field(1, name) + _field(2, _field(1, _field(1, elem_type) + _field(2, shape)))


@lru_cache(maxsize=1)
def matmul_integer_model() -> bytes:
    """A serialized ONNX model: ``Y[n, 1] = MatMulInteger(A[n, d], B[d, 1])``, int8 inputs, int32 output."""
    node = _field(1, "A") + _field(1, "B") + _field(2, "Y") + _field(4, "MatMulInteger")
    graph = (_field(1, node) + _field(2, "row_dots")
             + _field(11, _tensor_info("A", _INT8, ("n", "d")))
             + _field(11, _tensor_info("B", _INT8, ("d", 1)))
             + _field(12, _tensor_info("Y", _INT32, ("n", 1))))
    opset = _field(1, "") + _field(2, 13)
    return _field(1, 8) + _field(7, graph) + _field(8, opset)  # ir_version 8, graph, opset 13


@lru_cache(maxsize=1)
def _session() -> Any | None:
    try:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        return ort.InferenceSession(matmul_integer_model(), opts, providers=["CPUExecutionProvider"])
    except Exception:  # no onnxruntime, or one without the kernel: the caller's numpy path
        return None


def row_dots(codes: np.ndarray, v: np.ndarray) -> np.ndarray | None:
    """``codes @ v`` exactly, as int32 of shape ``(n,)``: ``codes`` C-contiguous int8 ``(n, d)``, ``v`` int8 ``(d,)``.

    ``None`` when onnxruntime is not usable here (the caller computes it otherwise).
    """
    if codes.dtype != np.int8 or v.dtype != np.int8 or codes.ndim != 2 or v.shape != (codes.shape[1],):
        raise ValueError(f"row_dots takes int8 (n, d) and (d,), got {codes.dtype}{codes.shape}, {v.dtype}{v.shape}")
    sess = _session()
    if sess is None or codes.shape[0] == 0:
        return None
    out = sess.run(None, {"A": np.ascontiguousarray(codes), "B": np.ascontiguousarray(v)[:, None]})[0]
    return out[:, 0]
