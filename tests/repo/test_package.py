"""The package's public surface: every exported name resolves, and resolving them loads no model runtime."""

from __future__ import annotations

import subprocess
import sys

import memrefine_edge


def test_every_exported_name_resolves_without_loading_a_model_runtime():
    code = (
        "import sys, memrefine_edge as m\n"
        "missing = [n for n in m.__all__ if getattr(m, n, None) is None]\n"
        "print(missing, sorted(x for x in ('llama_cpp', 'onnxruntime', 'tokenizers') if x in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[] []"


def test_dir_lists_the_public_api_and_unknown_names_raise():
    assert {"MemoryStore", "Compressor", "default_judge", "FactJudge", "Upkeep"} <= set(dir(memrefine_edge))
    try:
        memrefine_edge.NoSuchThing  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("an unknown attribute must raise AttributeError")


def _third_party_imports() -> dict[str, bool]:
    """Every third-party module the package imports -> whether some import of it runs at module level."""
    import ast
    from pathlib import Path

    found: dict[str, bool] = {}
    for path in Path(memrefine_edge.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and not node.level and node.module:
                roots = [node.module.split(".")[0]]
            elif isinstance(node, ast.Import):
                roots = [a.name.split(".")[0] for a in node.names]
            else:
                continue
            for root in roots:
                if root not in sys.stdlib_module_names and root != "memrefine_edge":
                    found[root] = found.get(root, False) or node.col_offset == 0
    return found


def test_every_import_is_declared_and_only_the_base_dependencies_are_imported_eagerly():
    import re
    import tomllib
    from importlib.metadata import packages_distributions
    from pathlib import Path

    project = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"]

    def norm(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    def names(reqs):
        return {norm(re.split(r"[<>=!~\[ ;]", r, maxsplit=1)[0]) for r in reqs}

    base = names(project["dependencies"])
    extras = {extra: names(reqs) for extra, reqs in project["optional-dependencies"].items()}
    dists = {mod: {norm(d) for d in ds} for mod, ds in packages_distributions().items()}
    dists.setdefault("llama_cpp", {"llama-cpp-python"})  # where the llm extra is not installed
    dists.setdefault("matplotlib", {"matplotlib"})
    imports = _third_party_imports()
    assert {"numpy", "click", "onnxruntime", "llama_cpp"} <= set(imports)
    for module, eager in sorted(imports.items()):
        declared = dists[module]
        if declared & base:
            continue
        assert not eager, f"{module} is imported at module level but is not a dependency"
        assert any(declared & reqs for reqs in extras.values()), f"{module} is imported but declared nowhere"
    # The base install builds nothing: llama.cpp (a native build) is the llm extra only.
    assert "llama-cpp-python" not in base and "llama-cpp-python" in extras["llm"]
