"""Exact int8 row dot products through onnxruntime."""

import numpy as np
import pytest

from memrefine_edge.int8dot import matmul_integer_model, row_dots


@pytest.mark.parametrize("n,d", [(1, 1), (7, 3), (1000, 384), (4099, 384)])
def test_row_dots_are_the_exact_integer_products(n, d):
    rng = np.random.default_rng(n + d)
    codes = rng.integers(-128, 128, size=(n, d), dtype=np.int8)
    codes[0] = -128  # the extremes: |dot| up to d * 128 * 128 must not overflow or round
    v = np.full(d, -128, dtype=np.int8) if n == 1 else rng.integers(-128, 128, size=d, dtype=np.int8)
    out = row_dots(codes, v)
    assert out is not None  # onnxruntime is a dependency: the fast kernel is what runs
    assert out.shape == (n,)
    np.testing.assert_array_equal(out.astype(np.int64), codes.astype(np.int64) @ v.astype(np.int64))


def test_row_dots_of_a_slice_of_a_larger_matrix():
    # The pair queue passes its live prefix (a view) and one of its own rows.
    rng = np.random.default_rng(3)
    codes = rng.integers(-127, 128, size=(50, 16), dtype=np.int8)
    out = row_dots(codes[:20], codes[33])
    np.testing.assert_array_equal(out, codes[:20].astype(np.int64) @ codes[33].astype(np.int64))


def test_row_dots_of_no_rows_is_left_to_the_caller():
    assert row_dots(np.zeros((0, 4), dtype=np.int8), np.zeros(4, dtype=np.int8)) is None


@pytest.mark.parametrize("codes,v", [
    (np.zeros((3, 4), dtype=np.float32), np.zeros(4, dtype=np.int8)),
    (np.zeros((3, 4), dtype=np.int8), np.zeros(4, dtype=np.int16)),
    (np.zeros((3, 4), dtype=np.int8), np.zeros(5, dtype=np.int8)),
    (np.zeros(4, dtype=np.int8), np.zeros(4, dtype=np.int8)),
])
def test_bad_inputs_are_refused(codes, v):
    with pytest.raises(ValueError, match="int8"):
        row_dots(codes, v)


def test_the_model_bytes_are_a_valid_onnx_model():
    onnx = pytest.importorskip("onnx")  # installed with the encoder build; not needed at run time
    model = onnx.load_from_string(matmul_integer_model())
    onnx.checker.check_model(model, full_check=True)
    assert [n.op_type for n in model.graph.node] == ["MatMulInteger"]
    assert [i.name for i in model.graph.input] == ["A", "B"]
    assert model.graph.output[0].type.tensor_type.elem_type == onnx.TensorProto.INT32
