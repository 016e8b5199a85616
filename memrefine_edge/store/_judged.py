"""The judged pairs of removed entries, kept with the entries' rows of the undo history (migration 0015).

A pass asks only about pairs of live entries, so a pair judged preserve that names an entry a
decision removes leaves ``preserves`` with it: packed (:func:`pack_pairs`) into the entry's row of
``removals``, put back by undo, dropped with the row by purge-history. Each function works inside
the caller's transaction, on the connection the journal gives it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

from ._packing import pack_pairs, unpack_pairs

__all__ = ["kept_pairs", "put_back_pairs", "take_pairs"]


def take_pairs(conn: sqlite3.Connection, seq: int) -> bytes | None:
    """Remove from ``preserves`` the pairs naming entry number ``seq``; return them packed (None: none)."""
    rows = conn.execute("SELECT b, run FROM preserves WHERE a = ? UNION ALL SELECT a, run FROM preserves WHERE b = ?",
                        (seq, seq)).fetchall()
    if not rows:
        return None
    conn.execute("DELETE FROM preserves WHERE a = ?", (seq,))
    conn.execute("DELETE FROM preserves WHERE b = ?", (seq,))
    return pack_pairs([(int(other), int(run)) for other, run in rows])


def put_back_pairs(conn: sqlite3.Connection, first: int, last: int) -> None:
    """Put the pairs kept with the removal rows keyed ``first`` .. ``last`` back into ``preserves``."""
    rows = conn.execute("SELECT seq, pairs FROM removals WHERE k BETWEEN ? AND ? AND pairs IS NOT NULL",
                        (first, last)).fetchall()
    pairs = [(min(seq, other), max(seq, other), run) for seq, blob in rows for other, run in unpack_pairs(blob)]
    conn.executemany("INSERT OR IGNORE INTO preserves (a, b, run) VALUES (?, ?, ?)", pairs)


def kept_pairs(conn: sqlite3.Connection) -> Iterator[tuple[int, int]]:
    """Every judged pair the store keeps, by its entries' numbers: rows of ``preserves``, then those
    kept with the undo history (a pair may show twice)."""
    yield from ((int(a), int(b)) for a, b in conn.execute("SELECT a, b FROM preserves"))
    for seq, blob in conn.execute("SELECT seq, pairs FROM removals WHERE pairs IS NOT NULL").fetchall():
        yield from ((int(seq), other) for other, _run in unpack_pairs(blob))
