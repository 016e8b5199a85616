"""The package's architecture, checked from its source (``ast``).

The package is a stack of stages, one subpackage each (``core`` at the bottom, ``cli`` at the
top). Checked here:

* imports only go down the stack or stay within a stage, and never form a cycle; an import under
  ``if TYPE_CHECKING:`` counts as an edge like any other (an annotation that names a higher
  stage is a dependency on it);
* a stage reaches another only through that stage's package (``memrefine_edge.store``), never
  into its private modules (``memrefine_edge.store._core``);
* no module reads or imports another module's private names (``obj._name`` where ``_name`` is
  defined in another module of the package and not in this one); a class's own attributes are its
  own, those it inherits included (``self._name`` in a class whose base, defined in another module,
  defines ``_name``: a mixin's methods);
* SQL runs only in ``store``; each heavy runtime has its named importers.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "memrefine_edge"

#: Bottom to top, by stage (a subpackage, or a module at the package root). A stage not listed here
#: fails the test: place it.
LAYERS: list[list[str]] = [
    ["core"],
    ["text"],
    ["index"],
    ["backends"],
    ["store"],
    ["judging"],
    ["methods"],
    ["engine"],
    ["testing", "eval", "fleet"],
    ["cli"],
    ["", "__main__"],
]
RANK = {name: i for i, layer in enumerate(LAYERS) for name in layer}


def _modules(root: Path) -> dict[str, Path]:
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def stage(name: str) -> str:
    return name.split(".")[0]


def _package_of(name: str, path: Path) -> list[str]:
    parts = name.split(".") if name else []
    return parts if path.name == "__init__.py" else parts[:-1]


def _imports(name: str, path: Path, known: set[str]) -> list[tuple[str, int]]:
    """Package modules ``name`` imports (relative to the package root), with the line; every import counts."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: list[tuple[str, int]] = []
    for node in ast.walk(tree):
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
        else:
            continue
        out += [(t, node.lineno) for t in targets if t in known and t != name]
    return out


def graph(root: Path) -> dict[str, set[str]]:
    modules = _modules(root)
    return {name: {t for t, _ in _imports(name, path, set(modules))} for name, path in modules.items()}


def upward_edges(g: dict[str, set[str]]) -> list[str]:
    return sorted(f"{a} -> {b}" for a, targets in g.items() for b in targets if RANK[stage(b)] > RANK[stage(a)])


def find_cycle(g: dict[str, set[str]]) -> list[str]:
    state: dict[str, int] = {}
    cycle: list[str] = []

    def visit(node: str, trail: list[str]) -> bool:
        state[node] = 1
        for nxt in sorted(g[node]):
            if state.get(nxt) == 1:
                cycle.extend(trail[trail.index(nxt):] + [node, nxt] if nxt in trail else [node, nxt])
                return True
            if state.get(nxt) is None and visit(nxt, trail + [node]):
                return True
        state[node] = 2
        return False

    for name in sorted(g):
        if state.get(name) is None and visit(name, []):
            break
    return cycle


def private_reach_ins(root: Path) -> list[str]:
    """Imports into another stage's private modules, and uses of another module's private names."""
    modules = _modules(root)
    defined: dict[str, set[str]] = {}
    classes: dict[str, set[str]] = {}  # class name -> modules defining a class of that name
    for name, path in modules.items():
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                classes.setdefault(node.name, set()).add(name)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
        defined[name] = {n for n in names if n.startswith("_") and not n.startswith("__")}
    everywhere: dict[str, set[str]] = {}
    for name, names in defined.items():
        for n in names:
            everywhere.setdefault(n, set()).add(name)
    out = []
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        inherited = _inherited_reads(tree, classes, defined)
        for target, line in _imports(name, path, set(modules)):
            parts = target.split(".")
            private = [p for p in parts[1:] if p.startswith("_")]
            if private and stage(target) != stage(name):
                out.append(f"{name}:{line} imports {target}")
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("memrefine_edge")):
                out += [f"{name}:{node.lineno} imports private {a.name}" for a in node.names
                        if a.name.startswith("_") and not a.name.startswith("__") and not (
                            node.level and node.module is None)]  # `from . import _cmds`: a module
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                owners = everywhere.get(node.attr, set())
                if owners and name not in owners and id(node) not in inherited:
                    out.append(f"{name}:{node.lineno} reads .{node.attr} of {sorted(owners)}")
    return sorted(out)


def _inherited_reads(tree: ast.Module, classes: dict[str, set[str]], defined: dict[str, set[str]]) -> set[int]:
    """Ids of the ``self._name`` nodes that read what a class inherits: inside a class whose base (by
    name) is defined in a module that defines ``_name`` (a mixin's method, the base's declared state)."""
    out: set[int] = set()
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        bases = {b.id if isinstance(b, ast.Name) else b.attr for b in cls.bases
                 if isinstance(b, (ast.Name, ast.Attribute))}
        owned = set().union(*(defined[m] for b in bases for m in classes.get(b, ())))
        for node in ast.walk(cls):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"
                    and node.attr in owned):
                out.add(id(node))
    return out


MODULES = _modules(PKG)
GRAPH = graph(PKG)


def test_every_module_has_a_layer():
    assert sorted({stage(m) for m in MODULES} - set(RANK)) == []


def test_the_stack_is_short():
    assert len(LAYERS) <= 12


def test_imports_only_go_down_annotations_included():
    assert upward_edges(GRAPH) == []


def test_no_import_cycles_annotations_included():
    assert find_cycle(GRAPH) == [], "import cycle: " + " -> ".join(find_cycle(GRAPH))


def test_no_module_reaches_into_another_modules_private_names():
    assert private_reach_ins(PKG) == []


def _calls_execute(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [n.lineno for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr in ("execute", "executemany", "executescript")]


def test_only_the_store_runs_sql():
    offenders = {name: _calls_execute(path) for name, path in MODULES.items() if stage(name) != "store"}
    assert {k: v for k, v in offenders.items() if v} == {}


def _imports_top(path: Path, top: str) -> bool:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == top for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == top:
            return True
    return False


@pytest.mark.parametrize(("runtime", "owners"), [("llama_cpp", ["backends._llama"]),
                                                ("onnxruntime", ["backends._encoder", "index._int8mm"]),
                                                ("ray", ["fleet._ray"])])
def test_each_heavy_runtime_has_its_named_importers(runtime, owners):
    # onnxruntime runs the encoder and, in the index, the pair queue's integer products.
    importers = sorted(name for name, path in MODULES.items() if _imports_top(path, runtime))
    assert importers == owners


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_the_checker_sees_each_kind_of_violation(tmp_path):
    # A small package with one violation of each kind: the checks above must not pass vacuously.
    root = _write(tmp_path / "pkg", {
        "__init__.py": "",
        "core/__init__.py": "from ._a import A\n",
        "core/_a.py": ("from typing import TYPE_CHECKING\n"
                       "if TYPE_CHECKING:\n    from memrefine_edge.store import S\n"
                       "class A:\n    def __init__(self):\n        self._hidden = 1\n"),
        "store/__init__.py": "from ._s import S\n",
        "store/_s.py": ("from memrefine_edge.core._a import A\n"
                        "def peek(a: A) -> int:\n    return a._hidden\n"
                        "class S:\n    pass\n"),
    })
    g = graph(root)
    assert "core._a -> store" in upward_edges(g)  # an annotation-only import is an edge
    assert find_cycle(g) != []
    found = private_reach_ins(root)
    assert any("imports core._a" in f for f in found)
    assert any("reads ._hidden" in f for f in found)


def test_a_class_reads_what_it_inherits_but_no_other_objects_privates(tmp_path):
    root = _write(tmp_path / "pkg", {
        "__init__.py": "",
        "store/__init__.py": "from ._core import Store\n",
        "store/_mixin.py": "class Mixin:\n    def _helper(self):\n        return 1\n",
        "store/_core.py": ("from ._mixin import Mixin\n"
                           "class Store(Mixin):\n    def use(self):\n        return self._helper()\n"
                           "def peek(other):\n    return other._helper()\n"),
    })
    found = private_reach_ins(root)
    assert [f for f in found if "._helper" in f] == ["store._core:6 reads ._helper of ['store._mixin']"]
    # and the real package's graph is read: it has edges in every direction that is allowed
    assert "store._core" in GRAPH["store"] and "core" in GRAPH["store._core"]
    assert "store._core" in GRAPH["store._journal"] or "store" in GRAPH["engine._compressor"]
