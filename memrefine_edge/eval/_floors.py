"""Two floors any user could write in ten lines; a method that does not beat them adds nothing.

* ``fifo``: remove the oldest entries (lowest insertion number) until the store fits.
* ``random``: remove entries in a seeded random order until the store fits.

Both work on the store directly (no judge, no merges): each removal prunes the
entry's links, and the loop stops as soon as the size is within the target.
"""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from memrefine_edge.store import MemoryStore

__all__ = ["FLOORS", "evict_floor"]

#: The floor methods by name.
FLOORS = ("fifo", "random")


def evict_floor(store: MemoryStore, name: str, *, target_bytes: int, metric: str = "json",
                seed: int = 0) -> dict[str, Any]:
    """Remove entries in the floor's order until ``store.size(metric) <= target_bytes``; a report dict."""
    if name not in FLOORS:
        raise ValueError(f"unknown floor {name!r}; use one of {', '.join(FLOORS)}")
    started = time.perf_counter()
    order = store.ids()  # insertion order: oldest first
    if name == "random":
        random.Random(f"{seed}").shuffle(order)
    removed = 0
    for entry_id in order:
        if store.size(metric) <= target_bytes:
            break
        store.remove(entry_id)
        removed += 1
    size = store.size(metric)
    return {"target_bytes": target_bytes, "budget_met": size <= target_bytes,
            "stop_reason": "budget met" if size <= target_bytes else "store empty",
            "actions": {"evict": removed} if removed else {}, "sources": {name: removed} if removed else {},
            "llm_calls": 0, "seconds": time.perf_counter() - started}
