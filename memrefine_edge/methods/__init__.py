"""Compression methods: who decides what happens to a proposed pair.

The built-in methods are listed in one explicit table, :data:`BUILTINS`;
:func:`register` adds a method of your own under its ``name``.

* ``memrefine`` (:class:`MemRefineMethod`): the paper's judge.
* ``rulesim`` and ``rulepr``: the paper's rule baselines.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memrefine_edge.core import UnknownMethodError

from ._base import Method, PairContext
from ._memrefine import MemRefineMethod
from ._rules import RulePR, RuleSim

__all__ = ["Method", "PairContext", "MemRefineMethod", "RuleSim", "RulePR", "BUILTINS", "register", "get_method",
           "method_names"]

#: The methods that ship with the package, by name.
BUILTINS: dict[str, Callable[..., Method]] = {
    MemRefineMethod.name: MemRefineMethod,
    RuleSim.name: RuleSim,
    RulePR.name: RulePR,
}
_REGISTRY: dict[str, Callable[..., Method]] = dict(BUILTINS)


def register(cls: type[Method]) -> type[Method]:
    """Class decorator: make a method of your own available by its ``name``."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    _REGISTRY[cls.name] = cls
    return cls


def method_names() -> list[str]:
    """Registered method names."""
    return sorted(_REGISTRY)


def get_method(name: str, **options: Any) -> Method:
    """Instantiate a registered method by name (:class:`UnknownMethodError` if there is none)."""
    try:
        factory = _REGISTRY[name]
    except KeyError:
        raise UnknownMethodError(f"unknown method {name!r}; known: {', '.join(method_names())}") from None
    return factory(**options)
