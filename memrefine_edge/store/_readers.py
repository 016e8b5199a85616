"""Reading helpers of the store's importers (:mod:`~memrefine_edge.store._formats`): a file's text and
JSON with the line of any error, record and field checks that raise :class:`ImportFormatError`
naming the record, and :class:`Parsed`, what a parser returns.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memrefine_edge.core import Entry, ImportFormatError, InvalidEntryError, validate_entry

__all__ = ["Parsed", "checked_entry", "id_field", "json_type", "load_json_text", "read_json", "read_text",
           "record_error", "str_list", "text_field", "top_records"]


@dataclass
class Parsed:
    """What a format's parser read: the entries, and per reason the records skipped and links dropped."""

    entries: list[Entry]
    skipped: Counter  # reason -> records skipped
    dropped: Counter = field(default_factory=Counter)  # reason -> links dropped


def read_text(path: Path) -> str:
    """The file as text; bad UTF-8 is an ImportFormatError naming the line."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ImportFormatError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        # utf-8-sig: editors on Windows like to prepend a BOM, which is not content.
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ImportFormatError(
            f"{path.name} is not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})", line=line
        ) from exc


def load_json_text(text: str, *, where: str, line: int | None = None, malformed: str = "") -> Any:
    """``json.loads`` whose every failure is an ImportFormatError (``where`` names the input)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ImportFormatError(f"{where}: {malformed}{exc.msg} (column {exc.colno})",
                                line=exc.lineno if line is None else line) from exc
    except RecursionError as exc:  # "[[[[..." deeper than Python's parser goes
        raise ImportFormatError(f"{where}: arrays or objects nested too deeply", line=line) from exc
    except ValueError as exc:  # e.g. an integer of more than 4,300 digits
        raise ImportFormatError(f"{where}: {exc}", line=line) from exc


def read_json(path: Path) -> Any:
    return load_json_text(read_text(path), where=f"{path.name} is not valid JSON")


def record_error(n: int, message: str) -> ImportFormatError:
    """An ImportFormatError about the n-th (1-based) record of a JSON document."""
    err = ImportFormatError(f"record {n}: {message}")
    err.line = n
    return err


def checked_entry(entry: Entry, where: str) -> Entry:
    """Validate at parse time so the error can say which record was bad."""
    try:
        return validate_entry(entry)
    except InvalidEntryError as exc:
        raise InvalidEntryError(f"{where}: {exc}") from exc


def str_list(value: Any, what: str, n: int) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise record_error(n, f"{what} must be a list of strings, got {json_type(value)}")
    return tuple(value)


def json_type(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


def top_records(data: Any, keys: tuple[str, ...], what: str, path: Path) -> list[Any]:
    """The list of records in a JSON document: a bare list or ``{key: [...]}``."""
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        for key in keys:
            if isinstance(data.get(key), list):
                return data[key]
    raise ImportFormatError(
        f"{path.name}: expected {what}: a JSON list or an object with {' or '.join(map(repr, keys))}"
    )


def text_field(rec: dict, names: tuple[str, ...], n: int) -> str:
    for name in names:
        if name in rec:
            value = rec[name]
            if not isinstance(value, str):
                raise record_error(n, f"{name!r} must be a string, got {json_type(value)}")
            return value
    raise record_error(n, f"missing {' or '.join(map(repr, names))}")


def id_field(rec: dict, n: int) -> str:
    value = rec.get("id")
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)  # some exporters number their memories
    if not isinstance(value, str):
        raise record_error(n, "missing 'id'" if value is None else f"'id' must be a string, got {json_type(value)}")
    return value


# --- LoCoMo -------------------------------------------------------------------
