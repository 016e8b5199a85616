"""A store's standing budget: the size its owner wants it kept at, kept in the store.

``memrefine budget set 80KB`` (or ``0.5``, a ratio of the size *now*, turned
into bytes when it is set) records the budget in the store's ``meta`` table.
``memrefine compress`` with no budget argument and :class:`Upkeep` without
watermarks use it, so repeating a command is idempotent: a store already
within its budget is left alone. ``compress --budget R`` records its budget
the same way; given again with the same ``R`` it reuses the recorded bytes
instead of shrinking the store by ``R`` once more.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from .errors import BudgetError, ConfigurationError
from .store import METRICS
from .store.vectors import stored_embedding_bytes

if TYPE_CHECKING:  # pragma: no cover
    from .store import MemoryStore

__all__ = ["StandingBudget", "parse_budget", "get_budget", "set_budget", "clear_budget", "resolve_target"]

_META_KEY = "budget"
_UNITS = {"": 1, "b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3, "kib": 1024, "mib": 1024**2, "gib": 1024**3}
_SPEC = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmg]i?b|b)?\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class StandingBudget:
    """The recorded budget: ``bytes`` in ``metric``, from the text ``spec`` the user gave."""

    bytes: int
    metric: str
    spec: str
    set_at: str


def parse_budget(spec: str) -> tuple[float | None, int | None]:
    """``"0.5"`` -> ``(0.5, None)`` (a ratio); ``"80KB"``, ``"1.5MiB"``, ``"80000"`` -> ``(None, bytes)``.

    A bare number up to 1 is a ratio; above 1 it is bytes.

    :raises BudgetError: anything else.
    """
    m = _SPEC.match(str(spec))
    if not m:
        raise BudgetError(f"budget {spec!r} is neither a ratio (0.5) nor a size (80KB, 1.5MiB, 80000)")
    number, unit = float(m.group(1)), (m.group(2) or "").lower()
    if not unit and 0 < number <= 1:
        return number, None
    size = int(number * _UNITS[unit])
    if size <= 0:
        raise BudgetError(f"budget {spec!r} must be more than 0 bytes")
    return None, size


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
    """Record ``target_bytes`` (already validated) as the store's standing budget."""
    budget = StandingBudget(bytes=int(target_bytes), metric=metric, spec=str(spec),
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
    elif isinstance(budget_bytes, bool) or not isinstance(budget_bytes, int) or budget_bytes <= 0:
        raise BudgetError(f"budget in bytes must be a positive integer, got {budget_bytes!r}")
    current = store.size(metric)
    if metric == "disk":
        # Embeddings are part of the disk size; a ratio is of the store as
        # it will be compressed, with every entry embedded.
        current += (len(store) - store.stats().embedded) * stored_embedding_bytes(dim)
    target = int(current * budget) if budget is not None else int(budget_bytes)  # type: ignore[arg-type]
    floor = (store.min_entry_json_bytes() if metric == "json"
             else store.min_disk_bytes(embedding_bytes=stored_embedding_bytes(dim)))
    if len(store) and target < floor:
        raise BudgetError(
            f"budget of {target:,} bytes ({metric}) is below what is possible: the smallest "
            f"store that still holds one entry takes {floor:,} bytes"
        )
    return target
