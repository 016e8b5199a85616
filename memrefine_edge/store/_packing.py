"""How the run journal packs what it keeps: the audit log's free texts, the undo history's fields
and the judged pairs of a removed entry.

A text is stored as the shorter of the text and its raw deflate with a preset dictionary, behind a
tag byte that names the dictionary. Part of the file format: a shipped tag's dictionary never
changes; a new dictionary gets a new tag. Judged pairs are varints (:func:`pack_pairs`).
"""

from __future__ import annotations

import zlib

__all__ = ["pack_field", "pack_pairs", "pack_text", "unpack_pairs", "unpack_text"]

#: The first byte of a packed text: raw deflate with :data:`_TEXT_DICTIONARY`. Part of the file
#: format: never change the dictionary of a tag that has shipped; add a tag with a new one.
_PACKED_V1 = b"\x01"
_TEXT_DICTIONARY = (
    b"logprobs target a= b= judge output invalid twice; preserved (no rule applies and no judge model is "
    b"configured strict budget: merge could not keep every fact; preserved (exact duplicate duplicate up to "
    b"case, punctuation and whitespace both entries are greetings, thanks or small talk each entry holds facts "
    b"of its own; similarity distinct facts (e.g. facts of A are all in the other entry guard: deleting A would "
    b"lose guard: both entries hold facts of their own (e.g. ) and guard: B holds no fact the other lacks; "
    b"deleted entry A is contained in entry B entry B is contained in entry A entry A is only greetings, thanks "
    b"or small talk entry B is only greetings, thanks or small talk Merge A and B into one entry that keeps "
    b"every fact of both and who said it; from A keep: ; from B keep: scorer: merge 0.0, delete_a 0.0, "
    b"delete_b 0.0, preserve 0.9, merge 0.0, delete_a 0.00, delete_b 0.00scorer: preserve 0.9"
)


#: The first byte of a packed text written since migration 0016: raw deflate with
#: :data:`_TEXT_DICTIONARY_V2`, the first dictionary followed by the wording of the reasons the
#: audit log holds most of (the eviction's, the scorer's, the fast path's). An eviction's reason of
#: about 120 bytes packs to about 27 with it, 96 with the first. Part of the file format, as above.
_PACKED_V2 = b"\x03"
# zlib looks back from the end: the likeliest strings go last.
_TEXT_DICTIONARY_V2 = _TEXT_DICTIONARY + (
    b" Merge A and B into one entry that keeps every fact of both and who said it; from A keep: ; from B keep: "
    b"; but entry A holds the store's last copy of : merged instead; but entry B holds the store's last copy of "
    b"entry A is contained in entry B entry B is contained in entry A both entries are greetings, thanks or small "
    b"talk entry B is only greetings, thanks or small talk entry A is only greetings, thanks or small talk "
    b"strict budget: pure filler strict budget: most redundant left (no neighbour), "
    b" specific words held nowhere else), 1 bytes, 0 of 2 specific words held nowhere else), 1 bytes, 0 of 3 "
    b"strict budget: most redundant left (nearest fact-1 at cos 0.9"
    b"scorer: delete_b 0.5, delete_a 0.4, merge 0.0, preserve 0.0scorer: delete_a 0.5, delete_b 0.4, merge 0.0, "
    b"preserve 0.0"
)


#: The first byte of a packed undo-history field (an entry's content, keywords, timestamps, metadata,
#: provenance or removed links): raw deflate with :data:`_HISTORY_DICTIONARY`. A removed entry's
#: fields are short (tens to hundreds of bytes) and deflate alone barely shrinks them; a dictionary of
#: everyday chat English and of the JSON the importers write takes them to about 60%, and with
#: 512-byte pages that is two removed entries a page instead of one. Part of the file format, as above.
_PACKED_HISTORY_V1 = b"\x02"
# zlib looks back from the end: the likeliest strings go last.
_HISTORY_DICTIONARY = (
    b"could would should there their about after before because really something anything everything "
    b"though through think thought going doing being having getting making taking looking feeling "
    b"working playing reading writing family friends together always never sometimes recently yesterday "
    b"tomorrow weekend morning evening night today last year month week time again great amazing awesome "
    b"wonderful beautiful happy glad proud excited lovely cool nice fun hard sorry interesting important "
    b"love like want need know feel make take help share keep try hope wish glad to hear that sounds "
    b"good idea Thank you so much! Thanks for sharing! That's great! That's awesome! Good luck with "
    b"How's it going? What have you been up to? Hey, Hi, I'm I've I'll I was I had I have you're you've "
    b"it's that's what's don't didn't can't won't doesn't isn't wasn't they're we're she's he's "
    b"with your for the and the of the in the on the to the at the it was it is this is I am you are "
    b"January, February, March, April, May, June, July, August, September, October, November, December, "
    b" am on  pm on  2020 2021 2022 2023 2024 2025 2026\"] [\"D1:1\"] "
    b"{\"source\":\"\",\"sample_id\":\"conv-\",\"session\":1,\"speaker\":\"\"} [[null,\"\",0],[\"\",null,0]]"
)


def _shorter(text: str, tag: bytes, dictionary: bytes) -> str | bytes:
    """The shorter of ``text`` and its raw deflate with ``dictionary`` behind ``tag``."""
    raw = text.encode("utf-8")
    packer = zlib.compressobj(9, zlib.DEFLATED, -15, 9, zlib.Z_DEFAULT_STRATEGY, dictionary)
    packed = tag + packer.compress(raw) + packer.flush()
    return packed if len(packed) < len(raw) else text


def pack_field(text: str) -> str | bytes:
    """How the undo history stores one field of a removed entry: the shorter of the text and its packed bytes."""
    if len(text) < 4:  # "[]", "{}": a tag byte and the shortest deflate block are never shorter
        return text
    return _shorter(text, _PACKED_HISTORY_V1, _HISTORY_DICTIONARY)


def pack_text(text: str) -> str | bytes | None:
    """How the audit log stores a free text: None for ``""``, else the shorter of the text and its packed bytes."""
    return _shorter(text, _PACKED_V2, _TEXT_DICTIONARY_V2) if text else None


def unpack_text(value: str | bytes | None) -> str:
    """The text :func:`pack_text` or :func:`pack_field` stored."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    dictionary = _DICTIONARIES.get(bytes(value[:1]))
    if dictionary is None:
        raise ValueError(f"unknown packed text tag {value[:1]!r}")
    unpacker = zlib.decompressobj(-15, dictionary)
    return (unpacker.decompress(value[1:]) + unpacker.flush()).decode("utf-8")


_DICTIONARIES = {_PACKED_V1: _TEXT_DICTIONARY, _PACKED_HISTORY_V1: _HISTORY_DICTIONARY,
                 _PACKED_V2: _TEXT_DICTIONARY_V2}


# --- the judged pairs of a removed entry (migration 0015) ---------------------------------------


def _varint(n: int, out: bytearray) -> None:
    if n < 0:
        raise ValueError(f"a judged pair's numbers are never negative, got {n}")
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def pack_pairs(pairs: list[tuple[int, int]]) -> bytes:
    """The judged pairs of one removed entry as bytes: ``(other entry's number, run number)`` each.

    By run, then by the other entry's number: the run, how many, the first number and the gaps
    to the next, each an unsigned LEB128 varint (two to three bytes a pair, against about twelve
    as rows of ``preserves``).
    """
    by_run: dict[int, list[int]] = {}
    for other, run in pairs:
        by_run.setdefault(int(run), []).append(int(other))
    out = bytearray()
    for run in sorted(by_run):
        others = sorted(set(by_run[run]))
        _varint(run, out)
        _varint(len(others), out)
        last = 0
        for other in others:
            _varint(other - last, out)
            last = other
    return bytes(out)


def unpack_pairs(blob: bytes) -> list[tuple[int, int]]:
    """The ``(other entry's number, run number)`` pairs :func:`pack_pairs` packed, in its order."""
    values: list[int] = []
    n = shift = 0
    for byte in bytes(blob):
        n |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            values.append(n)
            n = shift = 0
    if shift:
        raise ValueError("judged pairs end inside a number")
    out: list[tuple[int, int]] = []
    i = 0
    while i < len(values):
        if i + 1 >= len(values):
            raise ValueError("judged pairs end inside a run's header")
        run, count = values[i], values[i + 1]
        i += 2
        if i + count > len(values):
            raise ValueError("judged pairs end inside a run's pairs")
        last = 0
        for gap in values[i:i + count]:
            last += gap
            out.append((last, run))
        i += count
    return out
