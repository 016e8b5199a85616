"""The method registry: methods by name, the built-ins and plugins alike.

:func:`register` adds a method class under its :attr:`~Method.name`; the
built-in methods register themselves with it when the package is imported.
A method from another distribution is a *plugin*: it names itself in the
entry point group :data:`ENTRY_POINT_GROUP` (the entry point's name is the
method's name; its value the class, ``package.module:ClassName``, or a
module that registers the method when imported), and is loaded the first
time a name the registry does not hold is asked for -- by ``--method``,
:func:`get_method` or the evaluation. A plugin that fails to load is one
:class:`~memrefine_edge.core.PluginError` naming it.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from memrefine_edge.core import ConfigurationError, OptionConflictError, PluginError, UnknownMethodError

from ._base import Method, MethodOption

if TYPE_CHECKING:  # pragma: no cover
    from memrefine_edge.judging import Judge

__all__ = ["ENTRY_POINT_GROUP", "register", "method_class", "method_names", "get_method", "check_method_options"]

#: The entry point group a distribution names its methods in (``[project.entry-points."memrefine_edge.methods"]``).
ENTRY_POINT_GROUP = "memrefine_edge.methods"

_REGISTRY: dict[str, type[Method]] = {}


def register(cls: type[Method]) -> type[Method]:
    """Class decorator: make a method available by its ``name`` (the built-ins register this way too).

    The class must be a :class:`Method` with a ``name`` and its
    :attr:`~Method.options` must be :class:`MethodOption` s; a name another
    class holds already is a :class:`~memrefine_edge.core.ConfigurationError`
    (registering the same class again changes nothing).
    """
    if not (isinstance(cls, type) and issubclass(cls, Method)):
        raise TypeError(f"{cls!r} is not a Method subclass")
    if not isinstance(cls.name, str) or not cls.name.strip():
        raise ValueError(f"{cls.__name__} has no name")
    for key, option in cls.options.items():
        if not isinstance(option, MethodOption):
            raise TypeError(f"{cls.__name__}.options[{key!r}] is not a MethodOption")
        if not key.isidentifier() or key == "judge":
            raise ValueError(f"{cls.__name__}.options: {key!r} cannot name an option (a keyword argument, "
                             "not 'judge')")
    held = _REGISTRY.get(cls.name)
    if held is not None and held is not cls:
        raise ConfigurationError(f"method name {cls.name!r} is taken by {held.__module__}.{held.__qualname__}")
    _REGISTRY[cls.name] = cls
    return cls


def _entry_points() -> list[importlib.metadata.EntryPoint]:
    return list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))


def _origin(ep: importlib.metadata.EntryPoint) -> str:
    dist = ep.dist
    return f"{ep.value} from {dist.name} {dist.version}" if dist is not None else ep.value


def _load_plugin(name: str) -> type[Method] | None:
    """The plugin method named ``name``, loaded and registered; None when no plugin names it."""
    found = [ep for ep in _entry_points() if ep.name == name]
    if not found:
        return None
    if len({ep.value for ep in found}) > 1:
        raise PluginError(f"method {name!r} is named by several plugins ({'; '.join(_origin(ep) for ep in found)}); "
                          "uninstall all but one")
    ep = found[0]
    try:
        loaded = ep.load()
    except Exception as exc:  # a plugin's import can fail in any way: one line, naming it
        first = (str(exc).strip().splitlines() or [""])[0]
        raise PluginError(f"method plugin {name!r} ({_origin(ep)}) failed to load: "
                          f"{type(exc).__name__}{': ' + first if first else ''}") from exc
    if isinstance(loaded, type) and issubclass(loaded, Method):
        if loaded.name != name:
            raise PluginError(f"method plugin {name!r} ({_origin(ep)}) names its method {loaded.name!r}: the "
                              "entry point's name must be the method's name")
        try:
            register(loaded)
        except (ConfigurationError, TypeError, ValueError) as exc:
            raise PluginError(f"method plugin {name!r} ({_origin(ep)}) cannot be registered: {exc}") from exc
    cls = _REGISTRY.get(name)
    if cls is None:
        raise PluginError(f"method plugin {name!r} ({_origin(ep)}) is neither a Method subclass nor a module that "
                          "registers one by that name")
    return cls


def method_class(name: str) -> type[Method]:
    """The method class registered as ``name``, loading a plugin that names it if the registry has none.

    :class:`~memrefine_edge.core.UnknownMethodError` when neither has it;
    :class:`~memrefine_edge.core.PluginError` when its plugin fails to load.
    """
    cls = _REGISTRY.get(name)
    if cls is None:
        cls = _load_plugin(name)
    if cls is None:
        raise UnknownMethodError(f"unknown method {name!r}; known: {', '.join(method_names())}")
    return cls


def method_names() -> list[str]:
    """The registered method names and those plugins name (the plugins are not loaded for this)."""
    return sorted(set(_REGISTRY) | {ep.name for ep in _entry_points()})


def check_method_options(name: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """Every option of method ``name`` checked (:meth:`Method.check_options`), defaults filled in.

    An option the method does not declare is an
    :class:`~memrefine_edge.core.OptionConflictError` that names the
    methods taking it, by the option's own flag when it has one
    (``protect (--protect) applies to --method rulepr, not rulesim``).
    """
    cls = method_class(name)
    for key in options:
        if key not in cls.options:
            holders = sorted(n for n, c in _REGISTRY.items() if key in c.options)
            if holders:
                label = _REGISTRY[holders[0]].options[key].label(key)
                raise OptionConflictError(f"{label} applies to --method {' or '.join(holders)}, not {name}")
    return cls.check_options(options)


def get_method(name: str, *, judge: "Judge | None" = None, **options: Any) -> Method:
    """A method by name, built from checked options (see :func:`check_method_options`).

    ``judge``: the judge of a method that decides with one (``memrefine``;
    ``None``: its default judge); giving one to another method is an
    :class:`~memrefine_edge.core.OptionConflictError`.
    """
    cls = method_class(name)
    return cls.create(check_method_options(name, options), judge=judge)
