"""Exact int8 products for candidate screening."""

from __future__ import annotations

import numpy as np
import pytest

from memrefine_edge.index._int8mm import MODEL, int8_products


def _reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a.astype(np.int64) @ b.astype(np.int64).T


@pytest.mark.parametrize("m,n,d,threads", [(1, 1, 1, 1), (1, 300, 384, 1), (16, 5000, 384, 1), (37, 91, 12, 0)])
def test_products_are_exact(m, n, d, threads):
    rng = np.random.default_rng(m * 1000 + n)
    a = rng.integers(-128, 128, (m, d), dtype=np.int8)
    b = rng.integers(-128, 128, (n, d), dtype=np.int8)
    out = int8_products(a, b, threads=threads)
    assert out.dtype == np.int32 and out.shape == (m, n)
    assert np.array_equal(out, _reference(a, b))


def test_extreme_codes_do_not_saturate():
    # Kernels that pair-sum u8 x s8 products in int16 saturate at 2 * 255 * 127; these sums need every bit.
    d = 384
    a = np.array([[127] * d, [-128] * d, [127, -128] * (d // 2)], dtype=np.int8)
    b = np.array([[127] * d, [-128] * d, [-128, 127] * (d // 2), [1] * d], dtype=np.int8)
    assert np.array_equal(int8_products(a, b), _reference(a, b))
    assert np.array_equal(int8_products(b, a), _reference(b, a))


def test_inputs_are_left_alone_and_views_work():
    rng = np.random.default_rng(3)
    x = rng.integers(-127, 128, (50, 16), dtype=np.int8)
    before = x.copy()
    out = int8_products(x[10:40], x[::7])  # a slice and a strided view
    assert np.array_equal(out, _reference(x[10:40], x[::7]))
    assert np.array_equal(x, before)


@pytest.mark.parametrize("a,b", [
    (np.zeros((2, 3), np.float32), np.zeros((2, 3), np.int8)),
    (np.zeros((2, 3), np.int8), np.zeros((2, 4), np.int8)),
    (np.zeros(3, np.int8), np.zeros((2, 3), np.int8)),
])
def test_bad_inputs(a, b):
    with pytest.raises(ValueError, match="int8_products"):
        int8_products(a, b)


def test_the_packaged_model_is_the_documented_one():
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    model = onnx.load_from_string(MODEL)
    onnx.checker.check_model(model)
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["A", "B", "za"], ["Y"])], "int8_products",
        [helper.make_tensor_value_info("A", TensorProto.UINT8, ["m", "d"]),
         helper.make_tensor_value_info("B", TensorProto.INT8, ["d", "n"])],
        [helper.make_tensor_value_info("Y", TensorProto.INT32, ["m", "n"])],
        initializer=[helper.make_tensor("za", TensorProto.UINT8, [], [128])])
    want = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 10)], producer_name="memrefine_edge")
    want.ir_version = 7
    assert want.SerializeToString() == MODEL


def test_results_go_into_given_buffers():
    rng = np.random.default_rng(9)
    a = rng.integers(-128, 128, (40, 24), dtype=np.int8)
    b = rng.integers(-128, 128, (7, 24), dtype=np.int8)
    out = np.full((40, 7), -1, dtype=np.int32)
    scratch = np.zeros(2000, dtype=np.uint8)
    got = int8_products(a, b, out=out, scratch=scratch)
    assert got is out and np.array_equal(out, _reference(a, b))
    again = int8_products(a[:5], b, out=out[:5], scratch=scratch)  # a leading slice of out is contiguous
    assert np.array_equal(again, _reference(a[:5], b))


@pytest.mark.parametrize("kw", [
    {"out": np.zeros((3, 2), np.int32)},
    {"out": np.zeros((4, 2), np.int64)},
    {"out": np.zeros((2, 4), np.int32).T},
    {"scratch": np.zeros(5, np.uint8)},
    {"scratch": np.zeros(40, np.int8)},
])
def test_bad_buffers(kw):
    with pytest.raises(ValueError, match="int8_products"):
        int8_products(np.zeros((4, 10), np.int8), np.zeros((2, 10), np.int8), **kw)


@pytest.mark.parametrize("m, n, scratch_rows", [(1, 1, None), (7, 300, None), (300, 7, 1), (64, 1500, 5),
                                                (513, 129, 1000)])
def test_scaling_in_place_is_bit_identical_to_the_one_shot_form(m, n, scratch_rows):
    from memrefine_edge.index._int8mm import scale_in_place

    rng = np.random.default_rng(m * 1000 + n)
    ints = rng.integers(-(127 * 127 * 384), 127 * 127 * 384, size=(m, n), dtype=np.int32)
    ints[0, 0] = np.iinfo(np.int32).min
    rs = rng.random(m, dtype=np.float32) / 127
    cs = rng.random(n, dtype=np.float32) / 127
    ref = np.empty((m, n), dtype=np.float32)
    np.multiply(ints, rs[:, None], out=ref, casting="unsafe")
    ref *= cs
    scratch = None if scratch_rows is None else np.full(scratch_rows * n, np.nan, dtype=np.float32)
    out = scale_in_place(ints, rs, cs, scratch=scratch)
    assert out.dtype == np.float32 and out.shape == (m, n)
    assert np.shares_memory(out, ints)  # written over the products, no second matrix
    assert np.array_equal(out.view(np.uint32), ref.view(np.uint32))


@pytest.mark.parametrize("kw", [
    {"ints": np.zeros((2, 3), dtype=np.int64)},
    {"ints": np.zeros((3, 2), dtype=np.int32).T},
    {"row_scale": np.ones(3, dtype=np.float32)},
    {"col_scale": np.ones(2, dtype=np.float32)},
    {"scratch": np.zeros(2, dtype=np.float32)},
    {"scratch": np.zeros(10, dtype=np.float64)},
])
def test_scaling_in_place_refuses_bad_arrays(kw):
    from memrefine_edge.index._int8mm import scale_in_place

    args = {"ints": np.zeros((2, 3), dtype=np.int32), "row_scale": np.ones(2, dtype=np.float32),
            "col_scale": np.ones(3, dtype=np.float32), **kw}
    scratch = args.pop("scratch", None)
    before = args["ints"].copy()
    with pytest.raises(ValueError):
        scale_in_place(args["ints"], args["row_scale"], args["col_scale"], scratch=scratch)
    assert np.array_equal(args["ints"], before)  # nothing written
