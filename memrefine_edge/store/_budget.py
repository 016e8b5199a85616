"""A store's standing budget: the size its owner wants it kept at, kept in the store.

``memrefine budget set 80KB`` (or ``0.5``, a ratio of the size *now*, turned
into bytes when it is set) records the budget in the store's ``meta`` table.
``memrefine compress`` with no budget argument and :class:`Upkeep` without
watermarks use it, so repeating a command is idempotent: a store already
within its budget is left alone. ``compress --budget R`` records its budget
the same way; given again with the same ``R`` it reuses the recorded bytes
instead of shrinking the store by ``R`` once more.

How a budget is written (:func:`parse_budget`, :func:`parse_ratio`,
:func:`parse_size`; the same rules for ``--budget``, ``--budget-bytes``,
``budget set`` and the Python API), read exactly, never through a float:

* a **ratio** of the store's size: a number more than 0 and at most 1
  (``0.5``, ``.25``, ``1``) or a percentage more than 0 and at most 100
  (``50%``, ``12.5%``);
* a **size**: a whole number of bytes (``80000``), or a number with a unit
  that comes to whole bytes (``80KB`` = 80,000, ``1.5MiB`` = 1,572,864; units
  B, KB, MB, GB, KiB, MiB, GiB), from 1 byte to :data:`MAX_BUDGET_BYTES`.

A bare number above 1 is a byte count, so it must be whole: ``1.5`` is
neither a ratio (at most 1) nor a number of bytes, and is refused rather
than read as 1 byte. The byte target of a ratio is rounded down from the
exact product of the ratio (as written) and the size.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING

from memrefine_edge.core import BudgetError, ConfigurationError, Metric

from ._sizes import METRICS
from ._vectors import stored_embedding_bytes

if TYPE_CHECKING:  # pragma: no cover
    from ._core import MemoryStore

__all__ = ["StandingBudget", "parse_budget", "parse_ratio", "parse_size", "check_budget_bytes", "get_budget",
           "set_budget", "clear_budget", "resolve_target", "MAX_BUDGET_BYTES"]

#: The largest budget in bytes: 2**53 - 1 (about 9 PB). More than any SQLite file can hold (about
#: 281 TB), within SQLite's signed 64-bit integers, and exact in every JSON reader.
MAX_BUDGET_BYTES = 2**53 - 1

_META_KEY = "budget"
_UNITS = {"": 1, "b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3, "kib": 1024, "mib": 1024**2, "gib": 1024**3}
# ASCII digits only (str.isdigit and \d take other scripts' digits too), no sign, no exponent.
_SPEC = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(%|[kmg]i?b|b)?\s*$", re.IGNORECASE | re.ASCII)
_FORMS = "a ratio (0.5 or 50%) or a size (80000, 80KB, 1.5MiB)"


@dataclass(frozen=True)
class StandingBudget:
    """The recorded budget: ``bytes`` in ``metric``, from the text ``spec`` the user gave."""

    bytes: int
    metric: str
    spec: str
    set_at: str


def _split(spec: object) -> tuple[Decimal, str]:
    if not isinstance(spec, str):
        raise BudgetError(f"a budget is written as text, {_FORMS}; got {spec!r}")
    m = _SPEC.match(spec)
    if not m:
        raise BudgetError(f"budget {spec!r} is neither {_FORMS.replace(' or a size', ' nor a size')}")
    return Decimal(m.group(1)), (m.group(2) or "").lower()


def parse_budget(spec: str) -> tuple[float | None, int | None]:
    """``"0.5"``, ``"50%"`` -> ``(0.5, None)`` (a ratio); ``"80KB"``, ``"1.5MiB"``, ``"80000"`` -> ``(None, bytes)``.

    A bare number up to 1 is a ratio; above 1 it is a whole number of bytes
    (see the module docstring for every rule).

    :raises BudgetError: anything else, with what was wrong.
    """
    number, unit = _split(spec)
    if unit == "%" or (not unit and number <= 1):
        return parse_ratio(spec), None
    if not unit and number != number.to_integral_value():
        raise BudgetError(f"budget {spec!r} is neither a ratio (at most 1, e.g. 0.5, or a percentage such as 50%) "
                          "nor a whole number of bytes (80000, 80KB)")
    return None, parse_size(spec)


def parse_ratio(spec: str) -> float:
    """A ratio written ``0.5``, ``.25``, ``1`` or ``50%``: more than 0 and at most 1 (100%).

    :raises BudgetError: anything else (a size, a ratio out of range, text).
    """
    number, unit = _split(spec)
    if unit not in ("", "%"):
        raise BudgetError(f"budget ratio {spec!r} is a size; give a ratio (0.5 or 50%), or the size as a budget "
                          "in bytes (--budget-bytes)")
    ratio = number / 100 if unit == "%" else number
    if not 0 < ratio <= 1:
        raise BudgetError(f"budget ratio must be in (0, 1] (more than 0% and at most 100%), got {spec!r}")
    return float(ratio)


def parse_size(spec: str) -> int:
    """A size written ``80000``, ``80KB``, ``1.5MiB``: a whole number of bytes, 1 to :data:`MAX_BUDGET_BYTES`.

    :raises BudgetError: anything else (a ratio, a fraction of a byte, text, too large).
    """
    number, unit = _split(spec)
    if unit == "%":
        raise BudgetError(f"budget in bytes {spec!r} is a percentage; give a size (80000, 80KB), or the "
                          "percentage as a budget ratio (--budget)")
    size = number * _UNITS[unit]
    if size != size.to_integral_value():
        raise BudgetError(f"budget {spec!r} is {size.normalize():f} bytes: give a whole number of bytes")
    return check_budget_bytes(int(size), spec=spec)


def check_budget_bytes(value: object, *, spec: object = None) -> int:
    """``value`` if it is a budget in bytes (an int from 1 to :data:`MAX_BUDGET_BYTES`), else :class:`BudgetError`."""
    shown = repr(spec if spec is not None else value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise BudgetError(f"budget in bytes must be a whole number of bytes, got {shown}")
    if value <= 0:
        raise BudgetError(f"budget {shown} must be more than 0 bytes")
    if value > MAX_BUDGET_BYTES:
        raise BudgetError(f"budget {shown} is more than the largest budget, {MAX_BUDGET_BYTES:,} bytes")
    return value


def get_budget(store: "MemoryStore") -> StandingBudget | None:
    """The store's standing budget, or None."""
    raw = store.get_meta(_META_KEY)
    if not raw:
        return None
    try:
        return StandingBudget(**json.loads(raw))
    except (ValueError, TypeError) as exc:
        raise BudgetError(f"the budget recorded in {store.path} is unreadable ({exc}); set it again "
                          "with `memrefine budget set`") from exc


def set_budget(store: "MemoryStore", *, target_bytes: int, metric: str, spec: str) -> StandingBudget:
    """Record ``target_bytes`` (see :func:`resolve_target`) as the store's standing budget.

    :raises BudgetError: ``target_bytes`` is not a budget in bytes (:func:`check_budget_bytes`), as a ratio
        of an empty store is (0 bytes).
    """
    if metric not in METRICS:
        raise ConfigurationError(f"unknown metric {metric!r}; use one of {', '.join(METRICS)}")
    if target_bytes == 0 and not isinstance(target_bytes, bool):
        raise BudgetError(f"budget {spec!r} comes to 0 bytes (a ratio of an empty store): give a size instead "
                          "(80KB)")
    budget = StandingBudget(bytes=check_budget_bytes(target_bytes), metric=metric, spec=str(spec),
                            set_at=datetime.now(UTC).isoformat(timespec="seconds"))
    store.set_meta(_META_KEY, json.dumps(asdict(budget)))
    return budget


def clear_budget(store: "MemoryStore") -> bool:
    """Forget the standing budget; returns whether there was one."""
    had = get_budget(store) is not None
    if had:
        store.delete_meta(_META_KEY)
    return had


def resolve_target(store: MemoryStore, *, metric: str, budget: float | None = None, budget_bytes: int | None = None,
                   dim: int = 384) -> int:
    """Validate a budget (a ratio of the store's size now, or bytes) and return it in bytes.

    ``dim`` is the embedding width: under the ``disk`` metric a ratio is of
    the store with every entry embedded. Raises :class:`BudgetError` for a
    malformed budget, or one below what any compression can reach (smaller
    than the smallest single entry).
    """
    if metric not in METRICS:
        raise ConfigurationError(f"unknown metric {metric!r}; use one of {', '.join(METRICS)}")
    if (budget is None) == (budget_bytes is None):
        raise BudgetError("give exactly one of a budget ratio or a budget in bytes")
    if budget is not None:
        if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not 0 < budget <= 1:
            raise BudgetError(f"budget ratio must be in (0, 1], got {budget!r}")
    else:
        check_budget_bytes(budget_bytes)
    current = store.size(metric)
    if metric == Metric.DISK:
        # Embeddings are part of the disk size; a ratio is of the store as
        # it will be compressed, with every entry embedded.
        current += (len(store) - store.stats().embedded) * stored_embedding_bytes(dim)
    # A ratio exactly as written (repr is the shortest text that reads back as the float: 0.29, not
    # 0.28999...), times the size, rounded down: 0.29 of 100 bytes is 29, where the float product is 28.99...
    target = (int(Decimal(repr(float(budget))) * current) if budget is not None
              else int(budget_bytes))  # type: ignore[arg-type]
    floor = (store.min_entry_json_bytes() if metric == Metric.JSON
             else store.min_disk_bytes(embedding_bytes=stored_embedding_bytes(dim)))
    if len(store) and target < floor:
        raise BudgetError(
            f"budget of {target:,} bytes ({metric}) is below what is possible: the smallest "
            f"store that still holds one entry takes {floor:,} bytes"
        )
    return target
