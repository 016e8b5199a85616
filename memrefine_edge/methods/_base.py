"""The method interface: what the engine asks about a proposed pair, and the options a method declares.

Every method runs on the same engine (candidate order, application,
checkpoints, audit); only the decision differs. A method declares its
options (:attr:`Method.options`, each a :class:`MethodOption`), so the
pipeline, the command line (``--method-option NAME=VALUE``) and the
evaluation check and build any registered method the same way.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

from memrefine_edge.core import MethodOptionError, OptionConflictError

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Sequence

    from memrefine_edge.core import Decision, Entry
    from memrefine_edge.judging import Judge
    from memrefine_edge.store import MemoryStore

__all__ = ["Method", "MethodOption", "PairContext"]

_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})


@dataclass(frozen=True)
class PairContext:
    """The proposed pair: ``a`` is the earlier-inserted entry."""

    a: "Entry"
    b: "Entry"
    similarity: float
    store: "MemoryStore"


@dataclass(frozen=True, kw_only=True)
class MethodOption:
    """One option a method declares: its type, its default and what it does.

    ``type`` is ``bool``, ``int``, ``float`` or ``str``. Numbers may be
    bounded by ``low``/``high`` (inclusive; ``low_open``/``high_open``
    exclude the bound); a ``str`` option may list its ``choices``. A
    default of ``None`` lets the option be unset. ``flag`` names the command
    line's own flag for the option, if it has one (``--tau``), so messages
    name what the user typed; any option can also be given as
    ``--method-option NAME=VALUE``.
    """

    type: type
    default: Any
    help: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple[str, ...] = ()
    flag: str | None = None

    def __post_init__(self) -> None:
        if self.type not in (bool, int, float, str):
            raise TypeError(f"a method option is a bool, int, float or str, not {self.type!r}")
        if self.choices and self.type is not str:
            raise TypeError("only a str option has choices")
        if self.default is not None:
            self.check("default", self.default)

    def label(self, name: str) -> str:
        """How messages name the option: ``tau (--tau)``, or the name alone."""
        return f"{name} ({self.flag})" if self.flag else name

    def describe(self) -> str:
        """The type, bounds and default in words (``float in [-1.0, 1.0], default 0.8``)."""
        kind = {bool: "true or false", int: "integer", float: "number", str: "text"}[self.type]
        if self.choices:
            kind = "one of " + ", ".join(self.choices)
        bounds = self._bounds()
        return f"{kind}{' ' + bounds if bounds else ''}, default {self._shown(self.default)}"

    def check(self, name: str, value: Any) -> Any:
        """``value`` as the option holds it; :class:`MethodOptionError` when the option does not take it."""
        if value is None and self.default is None:
            return None
        if self.type is bool:
            if not isinstance(value, bool):
                raise MethodOptionError(f"{name} must be true or false, got {value!r}")
            return value
        if self.type is str:
            if not isinstance(value, str):
                raise MethodOptionError(f"{name} must be text, got {value!r}")
            if self.choices and value not in self.choices:
                raise MethodOptionError(f"{name} must be one of {', '.join(self.choices)}, got {value!r}")
            return value
        if self.type is int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise MethodOptionError(f"{name} must be an integer{self._tail()}, got {value!r}")
        elif isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
            raise MethodOptionError(f"{name} must be a number, got {value!r}")
        if not self._within(value):
            raise MethodOptionError(f"{name} must be {self._where()}, got {value!r}")
        return float(value) if self.type is float else value

    def parse(self, name: str, text: str) -> Any:
        """The value a command-line text stands for (``"0.9"``, ``"true"``), checked (:meth:`check`)."""
        word = text.strip()
        value: Any = word
        if self.default is None and word.lower() == "none":
            value = None
        elif self.type is bool:
            if word.lower() not in _TRUE | _FALSE:
                raise MethodOptionError(f"{name} must be true or false, got {text!r}")
            value = word.lower() in _TRUE
        elif self.type is int:
            try:
                value = int(word)
            except ValueError:
                raise MethodOptionError(f"{name} must be an integer{self._tail()}, got {text!r}") from None
        elif self.type is float:
            try:
                value = float(word)
            except ValueError:
                raise MethodOptionError(f"{name} must be a number, got {text!r}") from None
        return self.check(name, value)

    # --- words ---------------------------------------------------------------

    def _within(self, value: float) -> bool:
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            return False
        return not (self.high is not None and (value > self.high or (self.high_open and value == self.high)))

    def _bounds(self) -> str:
        if self.low is not None and self.high is not None:
            return f"in {'(' if self.low_open else '['}{self.low}, {self.high}{')' if self.high_open else ']'}"
        if self.low is not None:
            return f"{'>' if self.low_open else '>='} {self.low}"
        if self.high is not None:
            return f"{'<' if self.high_open else '<='} {self.high}"
        return ""

    def _where(self) -> str:
        bounds = self._bounds()
        return bounds if bounds.startswith("in ") else (f"an integer {bounds}" if self.type is int else bounds)

    def _tail(self) -> str:
        bounds = self._bounds()
        return f" {bounds}" if bounds and not bounds.startswith("in ") else ""

    @staticmethod
    def _shown(value: Any) -> str:
        return "none" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


class Method(abc.ABC):
    """A compression method: one abstract method, :meth:`decide`; the rest are hooks with defaults.

    A method of your own sets :attr:`name`, declares its :attr:`options`
    (its constructor takes each as a keyword argument of the same name),
    and is registered with :func:`~memrefine_edge.methods.register` or
    through an entry point in the ``memrefine_edge.methods`` group.
    """

    #: Registry name, used by ``--method`` and recorded with each run.
    name: ClassVar[str] = ""
    #: The options the method takes, by keyword (see :class:`MethodOption`). The pipeline, the
    #: command line and the evaluation check every value against them before anything runs.
    options: ClassVar[Mapping[str, MethodOption]] = MappingProxyType({})
    #: Whether the method decides with the product's judge: the pipeline then builds one (the judge
    #: kind, its model, ``merge_min_similarity``) and passes it to the constructor as ``judge=``.
    uses_judge: ClassVar[bool] = False

    #: The options a method built by :meth:`create` was given (defaults filled in); see :meth:`describe`.
    _created_with: Mapping[str, Any] | None = None

    @abc.abstractmethod
    def decide(self, pair: PairContext) -> "Decision":
        """The decision for one proposed pair."""

    @classmethod
    def check_options(cls, given: Mapping[str, Any]) -> dict[str, Any]:
        """Every declared option's value: ``given`` checked, the defaults for the rest.

        A name the method does not declare is an :class:`OptionConflictError`;
        a value the option does not take is a :class:`MethodOptionError`; then
        :meth:`validate_options` checks the combination.
        """
        unknown = sorted(set(given) - set(cls.options))
        if unknown:
            offer = f"its options: {', '.join(cls.options)}" if cls.options else "it takes none"
            raise OptionConflictError(f"method {cls.name!r} has no option {unknown[0]!r} ({offer})")
        values = {name: option.check(name, given[name]) if name in given else option.default
                  for name, option in cls.options.items()}
        cls.validate_options(values)
        return values

    @classmethod
    def validate_options(cls, values: Mapping[str, Any]) -> None:
        """Check options that do not go together (each one alone is already checked); raise
        :class:`OptionConflictError`. ``values`` holds every declared option. Default: nothing to check."""

    @classmethod
    def create(cls, options: Mapping[str, Any] | None = None, *, judge: "Judge | None" = None) -> "Method":
        """An instance built from checked options (:meth:`check_options`); ``judge`` goes to a method
        that :attr:`uses_judge` (``None``: the method's own default)."""
        values = cls.check_options(options or {})
        if judge is not None and not cls.uses_judge:
            raise OptionConflictError(f"method {cls.name!r} decides without a judge: do not give it one")
        extra: dict[str, Any] = {"judge": judge} if cls.uses_judge else {}
        method = cls(**values, **extra)
        method._created_with = dict(values)
        return method

    def prepare(self, store: "MemoryStore") -> None:
        """Called once before the loop (e.g. to compute graph scores)."""

    def applied(self, removed: "Sequence[Entry]", added: "Entry | None") -> None:
        """Called after each delete or merge the engine applied: ``removed`` left the store, ``added`` joined it."""

    def deferred(self, pair: PairContext) -> "Decision | None":
        """The delete to take now for a pair this method preserved with ``source="deferred"``, or None.

        The engine asks only when the candidate pairs run out (or fall below
        ``min_similarity``) with the store still above budget, for each
        deferred pair (of this run or an earlier one) whose two entries are
        both still live, in the order they were decided, until the budget holds. A delete returned is
        applied as a decision of its own, audited as returned; None leaves the
        pair preserved; anything else is a
        :class:`~memrefine_edge.core.ConfigurationError`. Methods
        that never defer keep this default.
        """
        return None

    def load(self) -> None:
        """Load any model the method needs; called before a run records anything."""

    def describe(self) -> dict[str, Any]:
        """Parameters worth recording with the run (an interrupted run resumes only with the same ones).

        Default: the options the method was built with by :meth:`create` (the
        registry and the pipeline build that way); nothing for a method
        constructed directly. Override it to record more.
        """
        return dict(self._created_with or {})

    @property
    def llm_calls(self) -> int:
        """LLM calls made so far by this method's judge (0 for rule methods)."""
        return 0
