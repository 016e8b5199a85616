"""Importers, and the JSON-lines exporter: memory stores in other formats in.

Export in every format below but the LoCoMo ones, under the ids the user imported, is
:func:`~memrefine_edge.store._export.export_file`.

Every importer parses the whole file into :class:`~memrefine_edge.core.Entry`
objects first and then writes them with one :meth:`MemoryStore.add_many`
call, so an import is one transaction: a file that fails anywhere writes
nothing. Importers never embed unless asked (``encoder=``); embedding happens
lazily when compressing or searching.

Formats (``FORMATS``) and how each maps onto an entry:

``locomo-turns``
    A LoCoMo conversation file (a list of samples). One entry per dialogue
    turn: id ``"{sample_id}:{dia_id}"``, content ``"Speaker: text"`` (an image
    turn appends ``" [shares a photo: <blip_caption>]"``), timestamps the
    session's date string, provenance ``(dia_id,)``, metadata
    ``{sample_id, session, speaker}``. Each turn links to the previous turn of
    the same session (the conversation's own chain; LoCoMo has no graph).
    A turn with neither text nor caption is skipped (reason counted).
``locomo-observations``
    The samples' ``observation`` facts: one entry per fact, id
    ``"{sample_id}:O{session}:{n}"`` (n counts the session's facts from 1),
    content the fact, provenance its evidence dia_ids, timestamps the session
    date, metadata ``{sample_id, session, speaker}``, no links.
``text``
    Plain text, one memory per blank-line-separated paragraph. Id
    ``"{file stem}:p{n}"`` (n from 1), so the id already names the source;
    provenance, timestamps and metadata stay empty to keep the entry small.
``mem0``
    A mem0 export: a list of memories, or ``{"results": [...]}`` /
    ``{"memories": [...]}``. Content is ``memory`` (or ``text``); timestamps
    are ``created_at`` then ``updated_at`` (missing or repeated ones left
    out); ``categories`` become keywords; ``metadata`` plus ``hash``,
    ``user_id``, ``agent_id``, ``run_id`` become metadata.
``amem``
    A-MEM notes: a list, ``{"notes"|"memories": [...]}`` or ``{id: note}``.
    ``links`` hold ids (strings) or 0-based positions in the file (integers);
    links to missing ids are dropped and counted. ``timestamp`` is the
    timestamp; ``last_accessed``, ``context``, ``tags``, ``category``,
    ``retrieval_count`` and ``evolution_history`` go to metadata; other fields
    (e.g. a stored embedding) are ignored. A note's ``retrieval_count`` (with
    ``last_accessed``) also starts the store's record of its uses
    (:meth:`MemoryStore.uses`), which eviction reads.
``jsonl``
    One JSON object per line with the entry's fields (``id`` and ``content``
    required; ``keywords``, ``links``, ``timestamps``, ``metadata``,
    ``provenance`` optional; any other key is an error). :func:`export_jsonl`
    writes the same format, so export → import is lossless. A link to an id
    that is neither in the file nor in the store is an error unless
    ``drop_unknown_links``.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from memrefine_edge.core import (
    DuplicateIdError,
    Entry,
    ExportError,
    ImportFormatError,
    InvalidEntryError,
    validate_entry,
)

from ._core import MemoryStore
from ._readers import (
    Parsed,
    checked_entry,
    id_field,
    json_type,
    load_json_text,
    read_json,
    read_text,
    record_error,
    str_list,
    text_field,
    top_records,
)

if TYPE_CHECKING:  # pragma: no cover
    from memrefine_edge.backends import Encoder

__all__ = [
    "FORMATS",
    "ImportReport",
    "parse_file",
    "json_lines",
    "import_file",
    "export_jsonl",
    "entry_to_json",
    "entry_from_json",
    "sample_path",
    "load_sample",
]

FORMATS = ("locomo-turns", "locomo-observations", "text", "mem0", "amem", "jsonl")
_JSONL_FIELDS = ("id", "content", "keywords", "links", "timestamps", "metadata", "provenance")
_AMEM_META = ("last_accessed", "context", "tags", "category", "retrieval_count", "evolution_history")


@dataclass(frozen=True)
class ImportReport:
    """What one import did. ``reasons`` pairs every skip/drop reason with its count."""

    format: str
    source: str
    imported: int
    skipped: int = 0
    dropped_links: int = 0
    reasons: tuple[tuple[str, int], ...] = ()
    embedded: int = 0

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``reasons`` as an object)."""
        out = dict(self.__dict__)
        out["reasons"] = dict(self.reasons)
        return out


def _locomo_samples(path: Path, sample_id: str | None) -> list[tuple[int, dict]]:
    data = read_json(path)
    samples = [data] if isinstance(data, dict) and "conversation" in data else data
    if not isinstance(samples, list):
        raise ImportFormatError(f"{path.name}: expected a list of LoCoMo samples, got {json_type(samples)}")
    out = []
    for n, sample in enumerate(samples, 1):
        if not isinstance(sample, dict) or not isinstance(sample.get("conversation"), dict):
            raise record_error(n, "a LoCoMo sample must be an object with a 'conversation' object")
        sid = sample.get("sample_id")
        if not isinstance(sid, str) or not sid.strip():
            raise record_error(n, "LoCoMo sample has no 'sample_id'")
        if sample_id is None or sid == sample_id:
            out.append((n, sample))
    if sample_id is not None and not out:
        known = [s.get("sample_id") for s in samples if isinstance(s, dict)]
        raise ImportFormatError(
            f"no sample {sample_id!r} in {path.name} (it has: {', '.join(map(str, known[:20]))})"
        )
    return out


def _sessions(conv: dict, suffix: str = "") -> list[tuple[int, str]]:
    """(session number, key) of the ``session_N{suffix}`` keys, in numeric order."""
    pattern = re.compile(r"session_(\d+)" + re.escape(suffix))
    out = []
    for key in conv:
        if m := pattern.fullmatch(key):
            if len(m.group(1)) > 9:  # int() of thousands of digits is refused (and no chat is that long)
                raise ImportFormatError(f"{key[:40]!r}...: session number of {len(m.group(1)):,} digits")
            out.append((int(m.group(1)), key))
    return sorted(out)


def _session_date(conv: dict, session: int) -> tuple[str, ...]:
    date = conv.get(f"session_{session}_date_time")
    return (date,) if isinstance(date, str) and date.strip() else ()


def _parse_locomo_turns(path: Path, sample_id: str | None) -> Parsed:
    entries: list[Entry] = []
    skipped: Counter[str] = Counter()
    for n, sample in _locomo_samples(path, sample_id):
        sid, conv = sample["sample_id"], sample["conversation"]
        for session, key in _sessions(conv):
            turns = conv[key]
            if not isinstance(turns, list):
                raise record_error(n, f"{sid} {key} must be a list of turns, got {json_type(turns)}")
            date = _session_date(conv, session)
            prev: str | None = None
            for t, turn in enumerate(turns, 1):
                where = f"{sid} {key} turn {t}"
                if not isinstance(turn, dict):
                    raise record_error(n, f"{where} must be an object")
                speaker, dia_id, text = turn.get("speaker"), turn.get("dia_id"), turn.get("text", "")
                if not all(isinstance(v, str) for v in (speaker, dia_id, text)):
                    raise record_error(n, f"{where} needs string 'speaker', 'dia_id' and 'text'")
                caption = turn.get("blip_caption")
                content = text.strip()
                if isinstance(caption, str) and caption.strip():
                    content = f"{content} [shares a photo: {caption.strip()}]".lstrip()
                if not content:
                    skipped["empty turn (no text, no photo caption)"] += 1
                    continue
                entry = Entry(
                    id=f"{sid}:{dia_id}",
                    content=f"{speaker}: {content}",
                    links=(prev,) if prev else (),
                    timestamps=date,
                    metadata={"sample_id": sid, "session": session, "speaker": speaker},
                    provenance=(str(dia_id),),
                )
                entries.append(checked_entry(entry, f"record {n} ({where})"))
                prev = entry.id
    return Parsed(entries, skipped)


def _parse_locomo_observations(path: Path, sample_id: str | None) -> Parsed:
    entries: list[Entry] = []
    skipped: Counter[str] = Counter()
    for n, sample in _locomo_samples(path, sample_id):
        sid, conv, obs = sample["sample_id"], sample["conversation"], sample.get("observation")
        if not isinstance(obs, dict):
            raise record_error(n, f"{sid} has no 'observation' object")
        for session, key in _sessions(obs, "_observation"):
            per_speaker = obs[key]
            if not isinstance(per_speaker, dict):
                raise record_error(n, f"{sid} {key} must map speakers to facts")
            date, count = _session_date(conv, session), 0
            for speaker, facts in per_speaker.items():
                if not isinstance(facts, list):
                    raise record_error(n, f"{sid} {key} {speaker}: facts must be a list")
                for f, fact in enumerate(facts, 1):
                    where = f"{sid} {key} {speaker} fact {f}"
                    if not (isinstance(fact, list) and len(fact) == 2 and isinstance(fact[0], str)):
                        raise record_error(n, f"{where} must be [fact text, evidence]")
                    evidence = [fact[1]] if isinstance(fact[1], str) else fact[1]
                    if not isinstance(evidence, list) or not all(isinstance(e, str) for e in evidence):
                        raise record_error(n, f"{where}: evidence must be a dia_id or a list of them")
                    if not fact[0].strip():
                        skipped["empty observation"] += 1
                        continue
                    count += 1
                    entry = Entry(
                        id=f"{sid}:O{session}:{count}",
                        content=fact[0].strip(),
                        timestamps=date,
                        metadata={"sample_id": sid, "session": session, "speaker": speaker},
                        provenance=tuple(evidence),
                    )
                    entries.append(checked_entry(entry, f"record {n} ({where})"))
    return Parsed(entries, skipped)


# --- text, mem0, A-MEM ----------------------------------------------------------


def _parse_text(path: Path) -> Parsed:
    text = read_text(path).replace("\r\n", "\n").replace("\r", "\n")
    entries: list[Entry] = []
    para: list[str] = []
    start = 0
    lines = text.split("\n") + [""]  # the sentinel flushes the last paragraph
    for i, line in enumerate(lines, 1):
        if line.strip():
            if not para:
                start = i
            para.append(line.rstrip())
        elif para:
            n = len(entries) + 1
            entry = Entry(id=f"{path.stem}:p{n}", content="\n".join(para).strip())
            try:
                entries.append(validate_entry(entry))
            except InvalidEntryError as exc:
                raise InvalidEntryError(f"{path.name} line {start} (paragraph {n}): {exc}") from exc
            para = []
    return Parsed(entries, Counter())


def _parse_mem0(path: Path) -> Parsed:
    records = top_records(read_json(path), ("results", "memories"), "a mem0 export", path)
    entries = []
    for n, rec in enumerate(records, 1):
        if not isinstance(rec, dict):
            raise record_error(n, f"a mem0 memory must be an object, got {json_type(rec)}")
        meta = rec.get("metadata") or {}
        if not isinstance(meta, dict):
            raise record_error(n, f"'metadata' must be an object, got {json_type(meta)}")
        meta = dict(meta)
        for key in ("hash", "user_id", "agent_id", "run_id"):
            if rec.get(key) is not None:
                meta.setdefault(key, rec[key])
        stamps: list[str] = []
        for key in ("created_at", "updated_at"):
            value = rec.get(key)
            if value is None:
                continue
            if not isinstance(value, str):
                raise record_error(n, f"{key!r} must be a string, got {json_type(value)}")
            if value not in stamps:
                stamps.append(value)
        entry = Entry(
            id=id_field(rec, n),
            content=text_field(rec, ("memory", "text"), n),
            keywords=str_list(rec.get("categories"), "'categories'", n),
            timestamps=tuple(stamps),
            metadata=meta,
        )
        entries.append(checked_entry(entry, f"record {n}"))
    return Parsed(entries, Counter())


def amem_use(metadata: Mapping[str, Any]) -> tuple[int, int] | None:
    """``(uses, last use in unix seconds)`` from an A-MEM note's ``retrieval_count`` and ``last_accessed``
    (A-MEM writes ``YYYYMMDDHHMM``; an ISO time is read too, one unreadable or missing gives 0); None when
    the note counts no retrieval."""
    count = metadata.get("retrieval_count")
    if isinstance(count, bool) or not isinstance(count, int) or count <= 0:
        return None
    stamp, last = metadata.get("last_accessed"), 0
    if isinstance(stamp, str):
        for parse in (lambda t: datetime.strptime(t, "%Y%m%d%H%M"), datetime.fromisoformat):
            try:
                when = parse(stamp.strip())
            except ValueError:
                continue
            last = max(0, int((when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()))
            break
    return count, last


def _parse_amem(path: Path) -> Parsed:
    data = read_json(path)
    if isinstance(data, dict) and not any(isinstance(data.get(k), list) for k in ("notes", "memories")):
        # {id: note}: the shape of A-MEM's own `memories` dict.
        if not all(isinstance(v, dict) for v in data.values()):
            raise ImportFormatError(
                f"{path.name}: expected A-MEM notes: a list, {{'notes': [...]}} or {{id: note}}"
            )
        records = [{"id": k, **v} for k, v in data.items()]
    else:
        records = top_records(data, ("notes", "memories"), "A-MEM notes", path)
    for n, rec in enumerate(records, 1):
        if not isinstance(rec, dict):
            raise record_error(n, f"an A-MEM note must be an object, got {json_type(rec)}")
    ids = [id_field(rec, n) for n, rec in enumerate(records, 1)]
    known, entries, dropped = set(ids), [], 0
    for n, (rec, note_id) in enumerate(zip(records, ids, strict=True), 1):
        raw_links = rec.get("links") or []
        if isinstance(raw_links, dict):  # some versions keep {id: weight}
            raw_links = list(raw_links)
        if not isinstance(raw_links, list):
            raise record_error(n, f"'links' must be a list, got {json_type(raw_links)}")
        links = []
        for link in raw_links:
            if isinstance(link, bool) or not isinstance(link, (int, str)):
                raise record_error(n, f"a link must be an id or a position, got {json_type(link)}")
            target = ids[link] if isinstance(link, int) and 0 <= link < len(ids) else link
            if isinstance(target, str) and target in known:
                links.append(target)
            else:
                dropped += 1
        stamp = rec.get("timestamp")
        if stamp is not None and not isinstance(stamp, str):
            raise record_error(n, f"'timestamp' must be a string, got {json_type(stamp)}")
        keywords = str_list(rec.get("keywords"), "'keywords'", n)
        entry = Entry(
            id=note_id,
            content=text_field(rec, ("content",), n),
            keywords=tuple(k for k in keywords if k.strip()),  # A-MEM emits "" keywords; they carry nothing
            links=tuple(links),
            timestamps=(stamp,) if stamp else (),
            metadata={k: rec[k] for k in _AMEM_META if rec.get(k) not in (None, "", [])},
        )
        entries.append(checked_entry(entry, f"record {n}"))
    return Parsed(entries, Counter(), Counter({"link to a missing note": dropped}) if dropped else Counter())


# --- JSON lines -------------------------------------------------------------------


def entry_to_json(entry: Entry) -> dict[str, Any]:
    """The JSON object the ``jsonl`` format stores for an entry."""
    return entry.counted_fields()


def entry_from_json(obj: Any, *, line: int | None = None) -> Entry:
    """Parse one ``jsonl`` object (strict types; unknown keys are an error)."""
    if not isinstance(obj, dict):
        raise ImportFormatError(f"expected a JSON object, got {json_type(obj)}", line=line)
    unknown = sorted(set(obj) - set(_JSONL_FIELDS))
    if unknown:
        raise ImportFormatError(f"unknown field(s) {', '.join(map(repr, unknown))}", line=line)
    for key in ("id", "content"):
        if key not in obj:
            raise ImportFormatError(f"missing {key!r}", line=line)
        if not isinstance(obj[key], str):
            raise ImportFormatError(f"{key!r} must be a string, got {json_type(obj[key])}", line=line)
    lists = {}
    for key in ("keywords", "links", "timestamps", "provenance"):
        value = obj.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ImportFormatError(f"{key!r} must be a list of strings, got {json_type(value)}", line=line)
        lists[key] = tuple(value)
    metadata = obj.get("metadata", {})
    if not isinstance(metadata, dict):
        raise ImportFormatError(f"'metadata' must be an object, got {json_type(metadata)}", line=line)
    entry = Entry(id=obj["id"], content=obj["content"], metadata=metadata, **lists)
    return checked_entry(entry, f"line {line}" if line is not None else "entry")


def json_lines(path: Path) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` for every non-blank line of a JSON-lines file.

    Bad UTF-8 or a line that is not JSON raises :class:`ImportFormatError`
    naming the 1-based line.
    """
    text = read_text(path)
    # Split on "\n" only: str.splitlines() would also split on U+2028 etc.,
    # which json.dumps(ensure_ascii=False) leaves raw inside strings.
    for n, line in enumerate(text.split("\n"), 1):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        yield n, load_json_text(line, where="not valid JSON", line=n, malformed="malformed ")


def _parse_jsonl(path: Path) -> Parsed:
    entries = [entry_from_json(obj, line=n) for n, obj in json_lines(path)]
    return Parsed(entries, Counter())


# --- import / export ----------------------------------------------------------------


def parse_file(
    path: str | os.PathLike[str], *, format: str, sample_id: str | None = None
) -> tuple[list[Entry], ImportReport]:
    """Parse a file into validated entries without touching any store.

    Returns the entries and a report of what parsing skipped or dropped
    (``imported`` counts the parsed entries).
    """
    path = Path(path)
    if format not in FORMATS:
        raise ImportFormatError(f"unknown format {format!r}; use one of {', '.join(FORMATS)}")
    if sample_id is not None and not format.startswith("locomo"):
        raise ImportFormatError(f"--sample only applies to the locomo formats, not {format!r}")
    parsers: dict[str, Callable[[], Parsed]] = {
        "locomo-turns": lambda: _parse_locomo_turns(path, sample_id),
        "locomo-observations": lambda: _parse_locomo_observations(path, sample_id),
        "text": lambda: _parse_text(path),
        "mem0": lambda: _parse_mem0(path),
        "amem": lambda: _parse_amem(path),
        "jsonl": lambda: _parse_jsonl(path),
    }
    parsed = parsers[format]()
    first: dict[str, int] = {}
    for i, e in enumerate(parsed.entries, 1):
        if e.id in first:
            raise DuplicateIdError(f"id {e.id!r} appears twice in {path.name} (records {first[e.id]} and {i})")
        first[e.id] = i
    report = ImportReport(
        format=format,
        source=str(path),
        imported=len(parsed.entries),
        skipped=sum(parsed.skipped.values()),
        dropped_links=sum(parsed.dropped.values()),
        reasons=tuple(sorted((parsed.skipped + parsed.dropped).items())),
    )
    return parsed.entries, report


def import_file(
    store: MemoryStore,
    path: str | os.PathLike[str],
    *,
    format: str,
    sample_id: str | None = None,
    drop_unknown_links: bool = False,
    encoder: "Encoder | None" = None,
) -> ImportReport:
    """Import a file into ``store`` in one transaction; nothing is written if it fails.

    Ids already in the store raise :class:`DuplicateIdError`. Links that point
    to an id neither in the file nor in the store raise
    :class:`InvalidEntryError` unless ``drop_unknown_links`` (they are then
    dropped and counted). With ``encoder`` the new entries are embedded in
    the same transaction.
    """
    entries, report = parse_file(path, format=format, sample_id=sample_id)
    with store.atomic():
        stored = store.add_many(entries, unknown_links="drop" if drop_unknown_links else "error")
        if format == "amem":  # A-MEM counts its notes' retrievals: the store's record of use starts there
            store.add_uses({e.id: use for e in stored if (use := amem_use(e.metadata)) is not None})
        embedded = store.ensure_embeddings(encoder) if encoder is not None else 0
    dropped = sum(len(a.links) - len(b.links) for a, b in zip(entries, stored, strict=True))
    reasons = Counter(dict(report.reasons))
    if dropped:
        reasons["link to an unknown id"] += dropped
    return ImportReport(
        format=report.format,
        source=report.source,
        imported=len(stored),
        skipped=report.skipped,
        dropped_links=report.dropped_links + dropped,
        reasons=tuple(sorted(reasons.items())),
        embedded=embedded,
    )


def export_jsonl(store: MemoryStore, out: str | os.PathLike[str] | IO[str]) -> int:
    """Write every entry as one JSON line (insertion order); returns the count.

    A path is written atomically (temporary file, then rename), so a failed
    export never leaves half a file behind.
    """

    def write(stream: IO[str], entries: Iterable[Entry]) -> int:
        count = 0
        for entry in entries:
            stream.write(json.dumps(entry_to_json(entry), ensure_ascii=False) + "\n")
            count += 1
        return count

    if not isinstance(out, (str, os.PathLike)):
        return write(out, store.entries())
    target = Path(out)
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:
        raise ExportError(f"cannot write {target}: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as stream:
            count = write(stream, store.entries())
        os.replace(tmp, target)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):  # disk full, target is a directory ...
            raise ExportError(f"cannot write {target}: {exc.strerror or exc}") from exc
        raise
    return count


# --- bundled sample --------------------------------------------------------------------


def sample_path() -> Path:
    """Path of the bundled sample store (a self-written two-person chat, jsonl)."""
    return Path(__file__).resolve().parents[1] / "data" / "sample_store.jsonl"


def load_sample(store: MemoryStore) -> ImportReport:
    """Import the bundled sample into ``store``."""
    return import_file(store, sample_path(), format="jsonl")
