"""A memory entry: its fields, validation, and its size under the ``json`` metric."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ._errors import InvalidEntryError

__all__ = [
    "Entry",
    "json_size",
    "content_hash",
    "stored_hash",
    "validate_entry",
    "MAX_CONTENT_CHARS",
    "MAX_ID_CHARS",
    "MAX_METADATA_DEPTH",
    "is_lookup_key",
]

#: Longest content accepted (characters). A memory is a note, not a document;
#: the judge only ever reads the first 2,000 characters of it.
MAX_CONTENT_CHARS = 1_000_000
MAX_ID_CHARS = 256
#: Deepest nesting of objects/lists in metadata (the metadata object is level 1).
#: Far below Python's recursion limit, so an accepted entry can always be
#: serialised and read back, whatever the call stack looks like.
MAX_METADATA_DEPTH = 32


@dataclass(frozen=True)
class Entry:
    """One memory entry. Immutable; the store hands out fresh copies."""

    id: str
    content: str
    keywords: tuple[str, ...] = ()
    links: tuple[str, ...] = ()
    timestamps: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    provenance: tuple[str, ...] = ()

    @property
    def timestamp(self) -> str | None:
        """The entry's first (earliest recorded) timestamp, if any."""
        return self.timestamps[0] if self.timestamps else None

    def counted_fields(self) -> dict[str, Any]:
        """The fields the ``json`` size metric serialises, in order."""
        return {
            "id": self.id,
            "content": self.content,
            "keywords": list(self.keywords),
            "links": list(self.links),
            "timestamps": list(self.timestamps),
            "metadata": dict(self.metadata),
            "provenance": list(self.provenance),
        }


def json_size(entry: Entry) -> int:
    """Bytes of one entry under the ``json`` metric."""
    return len(json.dumps(entry.counted_fields(), ensure_ascii=False).encode("utf-8"))


def content_hash(content: str) -> str:
    """The hash that decides whether an entry must be re-embedded (SHA-256, hex)."""
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def stored_hash(content: str) -> bytes:
    """:func:`content_hash` as a store writes it: the first 16 bytes of the digest (not 64 hex characters).

    Rows written before keep their hex text: a store only ever compares a row's hash with
    itself or with its copy (``embedded_hash``), never with a freshly computed one.
    """
    return hashlib.sha256(content.encode("utf-8")).digest()[:16]


def _validate_text(value: Any, what: str, *, max_chars: int, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise InvalidEntryError(f"{what} must be a string, got {type(value).__name__}")
    if not allow_empty and not value.strip():
        raise InvalidEntryError(f"{what} is empty")
    if "\x00" in value:
        raise InvalidEntryError(f"{what} contains a NUL character")
    if len(value) > max_chars:
        raise InvalidEntryError(f"{what} is {len(value):,} characters; the limit is {max_chars:,}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:  # lone surrogates from bad decoding
        raise InvalidEntryError(f"{what} is not valid Unicode text: {exc.reason}") from exc
    return value


def _str_tuple(value: Any, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise InvalidEntryError(f"{what} must be a list of strings, got {type(value).__name__}")
    out = []
    for item in value:
        out.append(_validate_text(item, f"an item of {what}", max_chars=MAX_CONTENT_CHARS))
    return tuple(out)


def _check_tree(value: Any, what: str) -> None:
    """Metadata must be a JSON tree: string keys, at most MAX_METADATA_DEPTH levels.

    Iterative, so a hostile (deep or self-referencing) structure ends in an
    InvalidEntryError rather than a RecursionError. Non-string keys are
    refused because JSON would turn them into strings: ``{1: "a", "1": "b"}``
    would silently lose a value.
    """
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, Mapping):
            children: Iterable[Any] = node.values()
            for key in node:
                if not isinstance(key, str):
                    raise InvalidEntryError(
                        f"{what} has a key {key!r:.50} that is not a string (JSON keys are strings)"
                    )
        elif isinstance(node, (list, tuple)):
            children = node
        else:
            continue
        if depth > MAX_METADATA_DEPTH:
            raise InvalidEntryError(
                f"{what} is nested more than {MAX_METADATA_DEPTH} levels deep (or contains itself)"
            )
        stack.extend((child, depth + 1) for child in children)


def is_lookup_key(entry_id: object) -> bool:
    """Whether ``entry_id`` could be an id at all (a str SQLite can bind); no such entry otherwise."""
    if not isinstance(entry_id, str):
        return False
    try:
        entry_id.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: never a stored id
        return False
    return True


def validate_entry(entry: Entry) -> Entry:
    """Check every field of an entry; return it normalised (tuples, plain dict)."""
    if not isinstance(entry, Entry):
        raise InvalidEntryError(f"expected an Entry, got {type(entry).__name__}")
    _validate_text(entry.id, "id", max_chars=MAX_ID_CHARS)
    _validate_text(entry.content, f"content of {entry.id!r}", max_chars=MAX_CONTENT_CHARS)
    if not isinstance(entry.metadata, Mapping):
        raise InvalidEntryError(f"metadata of {entry.id!r} must be a JSON object")
    _check_tree(entry.metadata, f"metadata of {entry.id!r}")
    try:
        text = json.dumps(dict(entry.metadata), ensure_ascii=False, allow_nan=False)
        text.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate in a key or value
        raise InvalidEntryError(f"metadata of {entry.id!r} is not valid Unicode text: {exc.reason}") from exc
    except (TypeError, ValueError) as exc:
        raise InvalidEntryError(f"metadata of {entry.id!r} is not JSON-serialisable: {exc}") from exc
    metadata = json.loads(text)
    links = _str_tuple(entry.links, f"links of {entry.id!r}")
    # Duplicates and self-loops carry nothing; drop them here, once.
    links = tuple(dict.fromkeys(link for link in links if link != entry.id))
    return replace(
        entry,
        keywords=_str_tuple(entry.keywords, f"keywords of {entry.id!r}"),
        links=links,
        timestamps=_str_tuple(entry.timestamps, f"timestamps of {entry.id!r}"),
        metadata=metadata,
        provenance=tuple(dict.fromkeys(_str_tuple(entry.provenance, f"provenance of {entry.id!r}"))),
    )
