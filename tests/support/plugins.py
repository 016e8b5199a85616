"""A method plugin as another distribution ships one: a module and an installed-looking ``dist-info`` folder.

Put ``root`` on ``sys.path`` (or on a subprocess's ``PYTHONPATH``) and ``importlib.metadata`` finds the
distribution and its entry points, exactly as it finds one that pip installed.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

#: A third-party method: deletes the later entry of a pair at or above ``cut``, else preserves; every reason
#: says which plugin decided and with which settings, so a test can find its decisions in the audit log.
THRESHOLD_SOURCE = '''
from types import MappingProxyType

from memrefine_edge.core import Decision
from memrefine_edge.methods import Method, MethodOption


class CutMethod(Method):
    name = "{name}"
    options = MappingProxyType({{
        "cut": MethodOption(type=float, default=0.5, low=0.0, high=1.0, help="delete B at or above this cosine"),
        "label": MethodOption(type=str, default="acme", help="a word each reason starts with"),
    }})

    def __init__(self, *, cut=0.5, label="acme"):
        self.cut, self.label = cut, label

    def decide(self, pair):
        if pair.similarity >= self.cut:
            return Decision("delete", "b", reason=f"{{self.label}}: sim {{pair.similarity:.2f}} >= {{self.cut}}",
                            source="rule")
        return Decision("preserve", None, reason=f"{{self.label}}: below {{self.cut}}", source="rule")
'''


def write_plugin(root: Path, *, dist: str, module: str, source: str, entry_points: dict[str, str],
                 group: str = "memrefine_edge.methods") -> Path:
    """Write ``module`` (``source``) and the ``dist`` distribution naming ``entry_points`` in ``group``; returns
    ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    info = root / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n", encoding="utf-8")
    lines = [f"[{group}]", *(f"{name} = {value}" for name, value in entry_points.items())]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root
