"""The package's layering: imports only go down the declared order, never in a cycle.

Each module's imports are read from its source (``ast``), runtime edges only:
an import under ``if TYPE_CHECKING:`` is an annotation, not an edge. A module
may import from its own layer or any layer below; an import of a higher layer
fails with the edge named. The same parse checks that SQL runs only in
``store/`` and that each heavy runtime has one importer.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "memrefine_edge"

#: Bottom to top. A module (or package prefix) not listed here fails the test: place it.
LAYERS: list[list[str]] = [
    ["errors", "_memory"],
    ["entry", "decision", "similarity", "int8mm", "lexicon"],
    ["pairs_scan"],
    ["pairs"],
    ["smalltalk"],
    ["facts"],
    ["bindings"],
    ["fastpath"],
    ["store.schema", "store.lock", "store.files", "store.refusals"],
    ["store.sizes", "store.vectors", "store.maintenance", "store.commits"],
    ["store.journal"],
    ["store.core"],
    ["store"],
    ["budget", "importers", "backends.model_files"],
    ["backends.encoder", "backends.llama"],
    ["backends"],
    ["prompts", "scorer", "lastcopy"],
    ["judge"],
    ["merger"],
    ["methods.base"],
    ["methods.memrefine", "methods.rules"],
    ["methods"],
    ["report"],
    ["deferred", "eviction", "identical", "upkeep"],
    ["compressor"],
    ["pipeline"],
    ["testing"],
    ["eval.stemmer"],
    ["eval.metrics"],
    ["eval.context", "eval.floors", "eval.answerer", "eval.questions"],
    ["eval.report"],
    ["eval.harness"],
    ["eval"],
    ["cli.app"],
    ["cli.budget_cmds", "cli.compress_cmds", "cli.eval_cmds", "cli.judge_cmds", "cli.model_cmds",
     "cli.store_cmds"],
    ["cli"],
    ["", "__main__"],
]
RANK = {name: i for i, layer in enumerate(LAYERS) for name in layer}


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _runtime_nodes(tree: ast.AST):
    """Every node, skipping the bodies of ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                stack.extend(child.orelse)
                continue
            stack.append(child)


def _package_of(name: str, path: Path) -> list[str]:
    parts = name.split(".") if name else []
    return parts if path.name == "__init__.py" else parts[:-1]


def _edges(name: str, path: Path, known: set[str]) -> set[str]:
    """Package modules ``name`` imports at run time (relative to the package root)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in _runtime_nodes(tree):
        targets: list[str] = []
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = _package_of(name, path)
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                mod = ".".join(base + ([node.module] if node.module else []))
            elif node.module and (node.module == "memrefine_edge" or node.module.startswith("memrefine_edge.")):
                mod = node.module[len("memrefine_edge."):] if "." in node.module else ""
            else:
                continue
            targets.append(mod)
            targets += [f"{mod}.{a.name}" if mod else a.name for a in node.names]  # from pkg import module
        elif isinstance(node, ast.Import):
            targets += [a.name[len("memrefine_edge."):] for a in node.names if a.name.startswith("memrefine_edge.")]
        out.update(t for t in targets if t in known and t != name)
    return out


MODULES = _modules()
GRAPH = {name: _edges(name, path, set(MODULES)) for name, path in MODULES.items()}


def test_every_module_has_a_layer():
    assert sorted(set(MODULES) - set(RANK)) == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_imports_only_go_down(name):
    up = sorted(t for t in GRAPH[name] if RANK[t] > RANK[name])
    assert up == [], f"memrefine_edge.{name} imports a higher layer: {up}"


def test_no_import_cycles():
    state: dict[str, int] = {}
    cycle: list[str] = []

    def visit(node: str, trail: list[str]) -> bool:
        state[node] = 1
        for nxt in sorted(GRAPH[node]):
            if state.get(nxt) == 1:
                cycle.extend(trail[trail.index(nxt):] + [node, nxt] if nxt in trail else [node, nxt])
                return True
            if state.get(nxt) is None and visit(nxt, trail + [node]):
                return True
        state[node] = 2
        return False

    for name in sorted(GRAPH):
        if state.get(name) is None and visit(name, []):
            break
    assert cycle == [], "import cycle: " + " -> ".join(cycle)


def _calls_execute(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [n.lineno for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr in ("execute", "executemany", "executescript")]


def test_only_the_store_runs_sql():
    offenders = {name: _calls_execute(path) for name, path in MODULES.items()
                 if name != "store" and not name.startswith("store.")}
    assert {k: v for k, v in offenders.items() if v} == {}


def _imports_top(path: Path, top: str) -> bool:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == top for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == top:
            return True
    return False


@pytest.mark.parametrize(("runtime", "owners"), [("llama_cpp", ["backends.llama"]),
                                                ("onnxruntime", ["backends.encoder", "int8mm"])])
def test_each_heavy_runtime_has_its_named_importers(runtime, owners):
    # onnxruntime runs the encoder and, in int8mm, the pair queue's integer products.
    importers = sorted(name for name, path in MODULES.items() if _imports_top(path, runtime))
    assert importers == owners


def test_the_checker_sees_upward_edges(tmp_path):
    # The parser must find each kind of import, or the tests above pass vacuously.
    assert "store.core" in GRAPH["store"] and "errors" in GRAPH["store.core"]
    assert "pipeline" in GRAPH["cli.compress_cmds"] or "pipeline" in GRAPH["cli"]
    assert "store.core" not in GRAPH["store.journal"]  # annotations only (TYPE_CHECKING)
