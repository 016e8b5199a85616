"""What the store's parts need of :class:`~memrefine_edge.store.MemoryStore`, stated as protocols.

The run journal is made by the store and works through it; naming here the
part of the store it uses keeps the journal's module from importing the
store's (which imports the journal's).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from memrefine_edge.core import Entry

__all__ = ["JournalStore"]


class JournalStore(Protocol):
    """The part of :class:`~memrefine_edge.store.MemoryStore` a :class:`~memrefine_edge.store.RunJournal` uses."""

    @property
    def path(self) -> Path: ...

    def atomic(self) -> AbstractContextManager[None]: ...

    def __contains__(self, entry_id: object) -> bool: ...

    def get(self, entry_id: str) -> Entry: ...

    def add(self, entry: Entry, *, unknown_links: str = "error") -> Entry: ...

    def remove(self, entry_id: str) -> list[tuple[str, str, int]]: ...

    def reinsert(self, rows: Iterable[Sequence[Any]]) -> None: ...

    def links_touching(self, entry_id: str) -> list[tuple[str, str, int]]: ...

    def add_links(self, links: Iterable[tuple[str, str, int]]) -> None: ...

    def set_embedding(self, entry_id: str, vector: np.ndarray, model_id: str, *, exact: bool = False) -> None: ...

    def running_size(self, metric: str = "json") -> int: ...

    def string_num(self, text: str, *, add: bool = False) -> int | None: ...

    def get_meta(self, key: str, default: str | None = None) -> str | None: ...

    def vacuum_room(self) -> tuple[int, list[tuple[str, int]]]: ...

    def vacuum(self) -> None: ...
