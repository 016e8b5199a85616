"""Exact int8 matrix products for screening candidate pairs (onnxruntime's MatMulInteger).

The pair queue screens candidates with approximate scores and re-scores the
survivors exactly (:mod:`memrefine_edge.index._similarity`). For int8 codes, casting
to float32 for BLAS costs more than the product itself; onnxruntime, already
the encoder's runtime, multiplies int8 matrices directly (MLAS integer kernels)
and its int32 sums are *exact*: ``|code| <= 127`` and ``d * 127**2`` is far
below ``2**31``. The screening value ``int_dot * scale_a * scale_b`` is then
within a few float32 roundings of the true product of the decoded rows, well
inside the screening margin, so the pairs and their order do not change.

The one-node model is kept as bytes (152 of them; made with ``onnx.helper``:
inputs ``A`` uint8 ``(m, d)`` with zero point 128 and ``B`` int8 ``(d, n)``,
output ``Y`` int32, opset 10, IR 7), so no ``onnx`` package is needed at run
time. onnxruntime is imported on first use.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np

__all__ = ["default_threads", "int8_products", "scale_in_place", "MODEL"]

#: Bytes of one band of :func:`scale_in_place` (a few hundred kB: it stays in cache).
BAND_BYTES = 1 << 18

#: MatMulInteger(A uint8 (m, d), B int8 (d, n), a_zero_point = 128) -> Y int32 (m, n).
MODEL = bytes.fromhex(
    "0807120e6d656d726566696e655f656467653a7e0a1c0a01410a01420a027a61120159220d4d61744d756c496e7465676572"
    "120d696e74385f70726f64756374732a0a10022a02800142027a615a150a014112100a0e0802120a0a0312016d0a03120164"
    "5a150a014212100a0e0803120a0a031201640a0312016e62150a015912100a0e0806120a0a0312016d0a0312016e42040a00100a"
)

_sessions: dict[int, Any] = {}
_lock = threading.Lock()


def default_threads() -> int:
    """``min(2, cores)``: the thread count of the pair queue's scans and of :func:`int8_products` (``threads=0``)."""
    return min(2, os.cpu_count() or 1)


def _session(threads: int) -> Any:
    with _lock:
        sess = _sessions.get(threads)
        if sess is None:
            import onnxruntime as ort

            opts = ort.SessionOptions()
            opts.intra_op_num_threads = threads
            opts.inter_op_num_threads = 1
            opts.log_severity_level = 3
            # Idle pool threads would spin for work and take the core from the caller's other thread.
            opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
            sess = ort.InferenceSession(MODEL, opts, providers=["CPUExecutionProvider"])
            _sessions[threads] = sess
        return sess


def int8_products(a: np.ndarray, b: np.ndarray, *, threads: int = 1, out: np.ndarray | None = None,
                  scratch: np.ndarray | None = None) -> np.ndarray:
    """``a @ b.T`` as exact int32 for int8 ``a`` ``(m, d)`` and ``b`` ``(n, d)``.

    Cheapest with the long operand as ``a`` (it is only re-offset to uint8; ``b`` is
    transposed). ``a`` may also be given re-offset already: uint8 holding each int8 code + 128
    (``a.view(np.uint8) ^ 0x80``), used as it is (for an ``a`` multiplied again and again).
    ``threads``: onnxruntime intra-op threads (``0``: ``min(2, cores)``).
    ``out`` (C-contiguous int32 ``(m, n)``) receives the result, and ``scratch`` (a flat uint8
    array of at least ``m * d``) holds ``a`` re-offset: buffers a caller reuses, so that a
    scan in many blocks does not map fresh pages for each (see ``_memory.pin_mmap_threshold``).
    """
    if a.dtype not in (np.int8, np.uint8) or b.dtype != np.int8 or a.ndim != 2 or b.ndim != 2 or \
            a.shape[1] != b.shape[1]:
        raise ValueError(f"int8_products needs int8 (m, d) and (n, d), got {a.dtype}{a.shape} and "
                         f"{b.dtype}{b.shape}")
    m, n = a.shape[0], b.shape[0]
    if out is not None and (out.shape != (m, n) or out.dtype != np.int32 or not out.flags.c_contiguous):
        raise ValueError(f"int8_products: out must be C-contiguous int32 {(m, n)}, got {out.dtype}{out.shape}")
    if scratch is not None and (scratch.dtype != np.uint8 or scratch.ndim != 1 or scratch.size < a.size):
        raise ValueError(f"int8_products: scratch must be a flat uint8 array of at least {a.size}")
    if threads <= 0:
        threads = default_threads()
    # uint8 with zero point 128 is the int8 value + 128: flipping the top bit maps one to the other.
    if a.dtype == np.uint8:
        a_u8 = np.ascontiguousarray(a)
    else:
        a_u8 = np.empty(a.shape, dtype=np.uint8) if scratch is None else scratch[: a.size].reshape(a.shape)
        np.bitwise_xor(a.view(np.uint8), np.uint8(0x80), out=a_u8)
    bt = np.ascontiguousarray(b.T)
    sess = _session(threads)
    if out is None:
        result: np.ndarray = sess.run(None, {"A": a_u8, "B": bt})[0]
        return result
    binding = sess.io_binding()
    binding.bind_cpu_input("A", a_u8)
    binding.bind_cpu_input("B", bt)
    binding.bind_output("Y", "cpu", 0, np.int32, out.shape, out.ctypes.data)
    sess.run_with_iobinding(binding)
    return out


def scale_in_place(ints: np.ndarray, row_scale: np.ndarray, col_scale: np.ndarray, *,
                   scratch: np.ndarray | None = None) -> np.ndarray:
    """``ints * row_scale[:, None] * col_scale`` as float32, written over ``ints``; returns the float32 view.

    ``ints`` is a C-contiguous int32 ``(m, n)`` array (the products of
    :func:`int8_products`). The scores are bit for bit those of
    ``np.multiply(ints, row_scale[:, None], casting="unsafe")`` into float32
    (computed in float64, then rounded) followed by ``*= col_scale``. The work
    goes band by band through ``scratch`` (a flat float32 array the caller
    reuses; one band of about :data:`BAND_BYTES` when omitted): told to write
    float32 over the int32 input it reads, numpy would first copy the whole
    input, a multi-MB temporary mapped and faulted in anew for every tile.
    """
    if ints.dtype != np.int32 or ints.ndim != 2 or not ints.flags.c_contiguous:
        raise ValueError(f"scale_in_place needs a C-contiguous int32 (m, n) array, got {ints.dtype}{ints.shape}")
    m, n = ints.shape
    if row_scale.shape != (m,) or col_scale.shape != (n,):
        raise ValueError(f"scale_in_place: scales must have shapes ({m},) and ({n},), got {row_scale.shape} "
                         f"and {col_scale.shape}")
    rows = max(1, BAND_BYTES // (4 * max(1, n)))
    if scratch is None:
        scratch = np.empty(min(m, rows) * n, dtype=np.float32)
    elif scratch.dtype != np.float32 or scratch.ndim != 1 or scratch.size < min(m, 1) * n:
        raise ValueError(f"scale_in_place: scratch must be a flat float32 array of at least {n}")
    rows = max(1, min(rows, scratch.size // max(1, n)))
    out = ints.view(np.float32)
    for r0 in range(0, m, rows):
        r1 = min(m, r0 + rows)
        band = scratch[: (r1 - r0) * n].reshape(r1 - r0, n)
        np.multiply(ints[r0:r1], row_scale[r0:r1, None], out=band, casting="unsafe")
        band *= col_scale
        out[r0:r1] = band  # the band's int32 products are read already: overwrite them
    return out
