"""Encoder tests: the base-class contract (no model) and OnnxEncoder on the real model files.

Real-model tests are marked ``models`` and skip with the reason when a file is
missing. Fidelity is measured against fp32 reference vectors stored in
``tests/fixtures/encoder`` (regenerate with ``make_reference.py`` there), so
CI never needs the 90 MB reference weights.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Sequence

import numpy as np
import pytest

from memrefine_edge.backends import Encoder, OnnxEncoder, model_path, models_dir
from memrefine_edge.backends._encoder import load_tokenizer
from memrefine_edge.backends._model_files import default_encoder_path, sha256_file
from memrefine_edge.core import InvalidEntryError, ModelLoadError, ModelNotFoundError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "encoder"
BUILT_INT8 = "all-MiniLM-L6-v2-int8-dynamic-pc.onnx"  # scripts/build_encoder.py output, if built


# --- base class, no model -------------------------------------------------------


class _FakeEncoder(Encoder):
    """Encodes a text as a one-hot of its length; can be told to return a wrong shape."""

    def __init__(self, *, dim: int = 8, batch_size: int = 2, bad_shape: bool = False) -> None:
        self.dim = dim
        self.batch_size = batch_size
        self.bad_shape = bad_shape
        self.batches: list[list[str]] = []

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        self.batches.append(list(texts))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            out[i, len(t) % self.dim] = 1.0
        return out[:, :-1] if self.bad_shape else out


def test_embed_rejects_a_bare_string() -> None:
    with pytest.raises(TypeError, match="single string"):
        _FakeEncoder().embed("hello")


def test_embed_rejects_non_str_items() -> None:
    with pytest.raises(InvalidEntryError, match="text 1 is int"):
        _FakeEncoder().embed(["ok", 3])  # type: ignore[list-item]


def test_embed_rejects_wrong_shape_from_embed_batch() -> None:
    with pytest.raises(RuntimeError, match="returned shape"):
        _FakeEncoder(bad_shape=True).embed(["a", "bb"])


def test_embed_empty_list_gives_zero_rows() -> None:
    out = _FakeEncoder().embed([])
    assert out.shape == (0, 8) and out.dtype == np.float32


def test_embed_batches_and_keeps_input_order() -> None:
    enc = _FakeEncoder(batch_size=2)
    texts = ["aaaa", "a", "aaa", "aa", "aaaaa"]
    out = enc.embed(texts)
    assert [int(np.argmax(row)) for row in out] == [len(t) for t in texts]
    assert all(len(b) <= 2 for b in enc.batches) and len(enc.batches) == 3


def test_parallel_workers_give_the_same_rows_in_input_order() -> None:
    texts = ["x" * n for n in (5, 1, 7, 3, 2, 6, 4, 0)]
    serial = _FakeEncoder(batch_size=1).embed(texts)
    enc = _FakeEncoder(batch_size=1)
    enc.workers = 3
    np.testing.assert_array_equal(enc.embed(texts), serial)
    assert sorted(len(b[0]) for b in enc.batches) == sorted(len(t) for t in texts)  # each text once


def test_import_does_not_load_onnxruntime() -> None:
    code = "import sys, memrefine_edge.backends._encoder; print('onnxruntime' in sys.modules, 'tokenizers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


@pytest.mark.parametrize("kwargs", [{"batch_size": 0}, {"max_tokens": 513}, {"max_tokens": 1}, {"threads": 0}])
def test_onnx_encoder_rejects_bad_settings(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        OnnxEncoder(**kwargs)


# --- real model ----------------------------------------------------------------


def _need(name: str) -> Path:
    try:
        return model_path(name)
    except ModelNotFoundError as exc:
        pytest.skip(f"model file missing: {exc}")


@pytest.fixture(scope="module")
def encoder() -> OnnxEncoder:
    """The default encoder (the built int8 model where built, else the packaged one), loaded once."""
    _need("encoder")
    _need("tokenizer")
    return OnnxEncoder()


@pytest.fixture(scope="module")
def packaged() -> OnnxEncoder:
    """The packaged int8 model from the manifest, whatever the default is."""
    _need("tokenizer")
    return OnnxEncoder(model_path=_need("encoder"))


def _fixture() -> tuple[list[str], np.ndarray]:
    sentences = json.loads((FIXTURES / "sentences.json").read_text(encoding="utf-8"))["sentences"]
    data = np.load(FIXTURES / "reference_fp32.npz")
    digest = hashlib.sha256("\n".join(sentences).encode("utf-8")).hexdigest()
    assert str(data["sentences_sha256"]) == digest, "sentences.json changed: rerun make_reference.py"
    ref = data["vectors"].astype(np.float32)
    return sentences, ref / np.linalg.norm(ref, axis=1, keepdims=True)


@pytest.mark.models
def test_shape_dtype_unit_norm(encoder: OnnxEncoder) -> None:
    vecs = encoder.embed(["User prefers dark mode.", "Où est la gare ?", "🎉", "x" * 50])
    assert vecs.shape == (4, 384) and vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert encoder.dim == 384


@pytest.mark.models
def test_model_id_names_the_file_and_its_hash(encoder: OnnxEncoder, packaged: OnnxEncoder) -> None:
    from memrefine_edge.backends._model_files import manifest

    assert encoder.model_file == default_encoder_path()
    assert encoder.model_id == f"{encoder.model_file.stem}@{sha256_file(encoder.model_file)[:12]}"
    sha = manifest()["encoder"].sha256
    assert packaged.model_id == f"all-MiniLM-L6-v2-int8@{sha[:12]}"


@pytest.mark.models
@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_empty_text_gives_a_finite_unit_vector(encoder: OnnxEncoder, text: str) -> None:
    vec = encoder.embed([text])[0]
    assert np.isfinite(vec).all() and abs(float(np.linalg.norm(vec)) - 1.0) < 1e-5
    assert encoder.last_seq_len == 2  # [CLS] [SEP]


@pytest.mark.models
def test_padding_in_a_batch_does_not_change_a_text_vector(packaged: OnnxEncoder) -> None:
    # The packaged model's weights are dequantized at load (fp32 arithmetic):
    # a batch changes nothing as long as padded positions are masked out.
    text = "Caroline went to the support group on Tuesday."
    alone = packaged.embed_batch([text])[0]
    longer = ["A much longer text that forces a lot of padding onto the short one " * 4,
              "Another long sentence about a camping trip in August where the tent flooded " * 3]
    batched = packaged.embed_batch([longer[0], text, longer[1]])[1]
    np.testing.assert_allclose(batched, alone, atol=1e-5)


@pytest.mark.models
def test_a_text_vector_does_not_depend_on_the_texts_embedded_with_it(encoder: OnnxEncoder) -> None:
    # A dynamically quantized int8 model scales activations by the whole input:
    # the default one-text-per-run embedding keeps each vector to itself.
    text = "Caroline went to the support group on Tuesday."
    alone = encoder.embed([text])[0]
    crowd = ["A much longer text that forces a lot of padding onto the short one " * 4, "ok",
             "Another long sentence about a camping trip in August where the tent flooded " * 3, text, "🎉"]
    np.testing.assert_array_equal(encoder.embed(crowd)[3], alone)
    assert encoder.batch_size == 1 and encoder.workers == encoder.threads
    with pytest.raises(AttributeError):  # fixed at construction: the session's threads were chosen for it
        encoder.batch_size = 8  # type: ignore[misc]


@pytest.mark.models
def test_pads_to_the_longest_text_not_to_128(packaged: OnnxEncoder) -> None:
    packaged.embed_batch(["hi", "ok thanks"])
    assert packaged.last_seq_len == 4  # [CLS] ok thanks [SEP]
    tok = load_tokenizer(packaged.tokenizer_file)
    assert tok.padding is not None and tok.padding["length"] is None


@pytest.mark.models
def test_truncates_very_long_text_at_max_tokens(encoder: OnnxEncoder) -> None:
    long_text = "memory " * 3000
    vec = encoder.embed([long_text])[0]
    assert encoder.last_seq_len == 256
    assert np.isfinite(vec).all() and abs(float(np.linalg.norm(vec)) - 1.0) < 1e-5


@pytest.mark.models
def test_max_tokens_is_configurable() -> None:
    _need("encoder")
    enc = OnnxEncoder(max_tokens=64, threads=1, batch_size=4)
    enc.embed(["word " * 500])
    assert enc.last_seq_len == 64 and enc.threads == 1


@pytest.mark.models
def test_paraphrases_are_closer_than_unrelated_texts(encoder: OnnxEncoder) -> None:
    a, b, c = encoder.embed([
        "The flight to Rome was cancelled because of a strike.",
        "Our plane to Rome got cancelled due to the airline strike.",
        "I really like eating carbonara pasta.",
    ])
    assert float(a @ b) > 0.7 > float(a @ c) + 0.2


def _fidelity(enc: OnnxEncoder, record_property: object, label: str) -> tuple[float, float]:
    sentences, ref = _fixture()
    cos = (enc.embed(sentences) * ref).sum(axis=1)
    mean, low = float(cos.mean()), float(cos.min())
    worst = sentences[int(np.argmin(cos))]
    # Printed (shown by `pytest -rP`) and recorded (JUnit XML), so the numbers
    # are visible without -s.
    print(f"fidelity {label} vs fp32 on {len(sentences)} sentences: mean {mean:.4f} min {low:.4f} "
          f"(worst: {worst!r})")
    record_property(f"fidelity_{label}_mean", round(mean, 5))  # type: ignore[operator]
    record_property(f"fidelity_{label}_min", round(low, 5))  # type: ignore[operator]
    return mean, low


@pytest.mark.models
def test_fidelity_of_packaged_int8_vs_fp32_reference(packaged: OnnxEncoder, record_property: object) -> None:
    mean, low = _fidelity(packaged, record_property, "packaged_int8")
    assert mean >= 0.99 and low >= 0.97


@pytest.mark.models
def test_fidelity_of_built_int8_vs_fp32_reference(record_property: object) -> None:
    path = models_dir() / BUILT_INT8
    if not path.is_file():
        pytest.skip(f"{path} not built (run scripts/build_encoder.py --install)")
    mean, low = _fidelity(OnnxEncoder(model_path=path), record_property, "built_int8_pc")
    assert mean >= 0.99 and low >= 0.97


@pytest.mark.models
def test_truncated_model_file_raises_model_load_error(tmp_path: Path) -> None:
    src = _need("encoder")
    broken = tmp_path / "broken.onnx"
    with open(src, "rb") as fh:
        broken.write_bytes(fh.read(src.stat().st_size // 3))
    with pytest.raises(ModelLoadError, match=r"broken\.onnx.*memrefine models fetch"):
        OnnxEncoder(model_path=broken)


@pytest.mark.models
def test_garbage_model_file_raises_model_load_error(tmp_path: Path) -> None:
    _need("tokenizer")
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x00not an onnx model\xff" * 100)
    with pytest.raises(ModelLoadError, match="memrefine models fetch"):
        OnnxEncoder(model_path=junk)


@pytest.mark.models
def test_numpy_reference_bert_matches_the_exported_graph(packaged: OnnxEncoder) -> None:
    """The numpy BERT that made the fixture agrees with the packaged (torch-exported) graph.

    Fed the packaged model's own int8 weights, dequantized, the numpy forward
    pass must reproduce onnxruntime's hidden states: that validates the
    reference implementation, independently of the fp32 weights.
    """
    onnx = pytest.importorskip("onnx")
    import importlib.util

    from onnx import numpy_helper

    script = Path(__file__).resolve().parents[2] / "scripts" / "bert_numpy.py"  # the build tool, not the package
    spec = importlib.util.spec_from_file_location("bert_numpy", script)
    bert_numpy = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bert_numpy", bert_numpy)  # its dataclasses look their module up
    spec.loader.exec_module(bert_numpy)
    bert_forward = bert_numpy.bert_forward

    model = onnx.load(str(packaged.model_file))
    arrays = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    deq = {n[:-2]: a.astype(np.float32) * arrays[n[:-2] + "_scale"] for n, a in arrays.items() if n.endswith("_q")}
    deq.update({n: a for n, a in arrays.items() if a.dtype == np.float32 and not n.endswith("_scale")})
    # MatMul weights carry export names (val_49 ...): map them to BERT names by
    # reading which MatMul consumes which weight, in graph order.
    matmul_w = [i for node in model.graph.node if node.op_type == "MatMul" for i in node.input if i in deq]
    order = ["attention.self.query", "attention.self.key", "attention.self.value",
             "attention.output.dense", "intermediate.dense", "output.dense"]
    assert len(matmul_w) == 36
    weights = {k.removeprefix("inner."): v for k, v in deq.items() if k.startswith("inner.")}
    for idx, w in enumerate(matmul_w):
        weights[f"encoder.layer.{idx // 6}.{order[idx % 6]}.weight"] = deq[w].T
    tok = packaged._tokenizer
    enc = tok.encode_batch(["hello world", "Melanie paints sunsets by the lake with her kids.", ""])
    ids = np.array([e.ids for e in enc], np.int64)
    mask = np.array([e.attention_mask for e in enc], np.int64)
    got = packaged._session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": 0 * ids})[0]
    want = bert_forward(weights, ids, mask)
    assert float(np.abs(got - want)[mask.astype(bool)].max()) < 1e-4


def test_the_build_s_smoothing_scales_do_not_depend_on_the_cpu_s_last_bits(monkeypatch):
    """The int8 build's smoothing scales are snapped to a grid: the last bits of one CPU's float64 sums
    against another's gives the same scales (so the same model bytes), and each scale stays within
    half a step of the exact one."""
    pytest.importorskip("onnx")
    import importlib.util

    scripts = Path(__file__).resolve().parents[2] / "scripts"
    monkeypatch.syspath_prepend(str(scripts))  # the build script imports its sibling bert_numpy
    spec = importlib.util.spec_from_file_location("build_encoder_under_test", scripts / "build_encoder.py")
    build_encoder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build_encoder)
    rng = np.random.default_rng(0)
    exact = np.exp(rng.normal(0.0, 1.5, size=20_000))
    snapped = build_encoder.snap_scales(exact)
    step = 1.0 / build_encoder.SCALE_STEPS_PER_OCTAVE
    assert np.all(np.abs(np.log2(snapped) - np.log2(exact)) <= step / 2 + 1e-6)
    assert len(np.unique(snapped)) < 200  # a grid, not the values themselves
    for noise in (1e-13, -1e-13, 1e-12, -1e-12):  # float64 ranges, as the build computes them
        assert np.array_equal(build_encoder.snap_scales(exact * (1 + noise)), snapped)
