"""Compression methods: who decides what happens to a proposed pair.

Every method runs on the same engine (candidate order, application,
checkpoints, audit); only the decision differs. A new method is one class
registered with :func:`register`.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from .errors import MemRefineError

if TYPE_CHECKING:  # pragma: no cover
    from .judge import Decision, Judge
    from .store import Entry, MemoryStore

__all__ = ["Method", "PairContext", "MemRefineMethod", "register", "get_method", "method_names"]


@dataclass(frozen=True)
class PairContext:
    """The proposed pair: ``a`` is the earlier-inserted entry."""

    a: "Entry"
    b: "Entry"
    similarity: float
    store: "MemoryStore"


class Method(abc.ABC):
    """A compression method: one abstract method, :meth:`decide`."""

    #: Registry name, used by ``--method`` and recorded with each run.
    name: str = ""

    @abc.abstractmethod
    def decide(self, pair: PairContext) -> "Decision":
        """The decision for one proposed pair."""

    def prepare(self, store: "MemoryStore") -> None:
        """Called once before the loop (e.g. to compute graph scores)."""

    def load(self) -> None:
        """Load any model the method needs; called before a run records anything."""

    def describe(self) -> dict[str, Any]:
        """Parameters worth recording with the run."""
        return {}

    @property
    def llm_calls(self) -> int:
        """LLM calls made so far by this method's judge (0 for rule methods)."""
        return 0


_REGISTRY: dict[str, Callable[..., Method]] = {}


def register(cls: type[Method]) -> type[Method]:
    """Class decorator: make a method available by its ``name``."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    _REGISTRY[cls.name] = cls
    return cls


def _load_builtin() -> None:
    # The rule baselines register themselves on import; importing them here,
    # lazily, keeps `import memrefine_edge.methods` light.
    from . import baselines  # noqa: F401


def method_names() -> list[str]:
    """Registered method names."""
    _load_builtin()
    return sorted(_REGISTRY)


def get_method(name: str, **options: Any) -> Method:
    """Instantiate a registered method by name."""
    _load_builtin()
    try:
        factory = _REGISTRY[name]
    except KeyError:
        raise MemRefineError(f"unknown method {name!r}; known: {', '.join(method_names())}") from None
    return factory(**options)


@register
class MemRefineMethod(Method):
    """The paper's method: an LLM judge (behind the fast path and fact guard) decides."""

    name = "memrefine"

    def __init__(self, *, judge: "Judge") -> None:
        self.judge = judge

    def decide(self, pair: PairContext) -> "Decision":
        return self.judge.decide(pair.a.content, pair.b.content, pair.similarity)

    def load(self) -> None:
        """Load the judge's model now."""
        self.judge.load()

    def describe(self) -> dict[str, Any]:
        return {"judge": getattr(self.judge, "describe", lambda: type(self.judge).__name__)()}

    @property
    def llm_calls(self) -> int:
        stats = getattr(self.judge, "stats", None) or {}
        return int(stats.get("llm_calls", 0))
