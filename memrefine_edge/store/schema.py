"""Named, append-only schema migrations.

Each migration is applied once, in list order, inside one transaction with
the row that records it. Never edit or reorder a migration that has shipped:
append a new one.
"""

from __future__ import annotations

__all__ = ["MIGRATIONS", "Migration", "ENTRY_COLUMNS", "entry_row_bytes", "link_row_bytes", "split_sql"]

from dataclasses import dataclass

#: Every column of an entry row, in table order: what the undo history copies and restores.
ENTRY_COLUMNS = (
    "seq, id, content, keywords, timestamps, metadata, provenance, content_hash, json_bytes,"
    " embedding, embedding_model, embedded_hash"
)


def entry_row_bytes(row: str = "") -> str:
    """SQL for the disk estimate of one entry row (``row``: ``""``, ``"NEW."``, ``"OLD."`` or ``"entries."``).

    The one definition behind migration 0005's triggers and the store's recount of
    them: text as UTF-8, blobs, the id twice (table and index), 40 bytes per row.
    A change to it is a change to a shipped migration: add a migration instead.
    """
    r = row
    return (f"2 * LENGTH(CAST({r}id AS BLOB)) + LENGTH(CAST({r}content AS BLOB))"
            f" + LENGTH(CAST({r}keywords AS BLOB)) + LENGTH(CAST({r}timestamps AS BLOB))"
            f" + LENGTH(CAST({r}metadata AS BLOB)) + LENGTH(CAST({r}provenance AS BLOB))"
            f" + LENGTH({r}content_hash) + COALESCE(LENGTH({r}embedding), 0)"
            f" + COALESCE(LENGTH(CAST({r}embedding_model AS BLOB)), 0)"
            f" + COALESCE(LENGTH({r}embedded_hash), 0) + 40")


def link_row_bytes(row: str = "") -> str:
    """SQL for the disk estimate of one link row (both ids, twice for the two indexes, 12 bytes per row)."""
    return f"2 * (LENGTH(CAST({row}src AS BLOB)) + LENGTH(CAST({row}dst AS BLOB))) + 12"


@dataclass(frozen=True)
class Migration:
    name: str
    sql: str


MIGRATIONS: list[Migration] = [
    Migration(
        "0001_entries",
        """
        -- seq is the insertion order: the deterministic tie-break everywhere.
        CREATE TABLE entries (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            content TEXT NOT NULL,
            keywords TEXT NOT NULL DEFAULT '[]',
            timestamps TEXT NOT NULL DEFAULT '[]',
            metadata TEXT NOT NULL DEFAULT '{}',
            provenance TEXT NOT NULL DEFAULT '[]',
            content_hash TEXT NOT NULL,
            json_bytes INTEGER NOT NULL,
            embedding BLOB,
            embedding_model TEXT,
            embedded_hash TEXT               -- content_hash the embedding was computed from
        );
        -- Links live in their own table so pruning the links *to* an entry is
        -- an indexed delete rather than a scan of every entry.
        CREATE TABLE links (
            src TEXT NOT NULL,
            dst TEXT NOT NULL,
            ord INTEGER NOT NULL,
            PRIMARY KEY (src, dst)
        ) WITHOUT ROWID;
        CREATE INDEX links_dst ON links (dst);
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        """,
    ),
    Migration(
        "0002_journal",
        """
        CREATE TABLE runs (
            run_id TEXT PRIMARY KEY,
            started_at TEXT NOT NULL,
            finished_at TEXT,
            status TEXT NOT NULL,            -- running, done, undone
            method TEXT NOT NULL,
            params TEXT NOT NULL,            -- JSON: budget, metric, mode, models ...
            cursor INTEGER NOT NULL DEFAULT 0, -- number of decisions committed
            report TEXT
        );
        CREATE TABLE decisions (
            run_id TEXT NOT NULL,
            step INTEGER NOT NULL,
            a_id TEXT,
            b_id TEXT,
            similarity REAL,
            action TEXT NOT NULL,            -- delete, merge, preserve, evict
            target TEXT,
            source TEXT NOT NULL,            -- rule, llm, guard, evict, fallback
            reason TEXT NOT NULL DEFAULT '',
            merge_instruction TEXT NOT NULL DEFAULT '',
            created_ids TEXT NOT NULL DEFAULT '[]',
            removed_ids TEXT NOT NULL DEFAULT '[]',
            size_before INTEGER NOT NULL,
            size_after INTEGER NOT NULL,
            latency_ms REAL NOT NULL DEFAULT 0,
            at TEXT NOT NULL,
            PRIMARY KEY (run_id, step)
        );
        -- Pairs judged preserve; a_id < b_id. Never proposed again.
        CREATE TABLE preserved (
            a_id TEXT NOT NULL,
            b_id TEXT NOT NULL,
            run_id TEXT NOT NULL,
            PRIMARY KEY (a_id, b_id)
        ) WITHOUT ROWID;
        -- Entries removed by a decision, kept whole so `undo` restores them
        -- exactly, until `purge-history`.
        CREATE TABLE history (
            run_id TEXT NOT NULL,
            step INTEGER NOT NULL,
            seq INTEGER NOT NULL,
            id TEXT NOT NULL,
            content TEXT NOT NULL,
            keywords TEXT NOT NULL,
            timestamps TEXT NOT NULL,
            metadata TEXT NOT NULL,
            provenance TEXT NOT NULL,
            content_hash TEXT NOT NULL,
            json_bytes INTEGER NOT NULL,
            embedding BLOB,
            embedding_model TEXT,
            embedded_hash TEXT,
            PRIMARY KEY (run_id, step, id)
        );
        -- Every link a decision removed (the removed entries' own links and
        -- the links other entries had to them).
        CREATE TABLE history_links (
            run_id TEXT NOT NULL,
            step INTEGER NOT NULL,
            src TEXT NOT NULL,
            dst TEXT NOT NULL,
            ord INTEGER NOT NULL
        );
        CREATE INDEX history_links_step ON history_links (run_id, step);
        """,
    ),
    Migration(
        "0003_entries_json_bytes_index",
        """
        -- The json size is summed after every decision; a covering index
        -- keeps that sum off the embedding blobs (20k entries: 6.5 -> 0.5 ms).
        CREATE INDEX entries_json_bytes ON entries (json_bytes);
        """,
    ),
    Migration(
        "0004_size_totals",
        """
        -- Running totals of the json size, entries and links, kept by triggers in the
        -- same transaction as every change (undo's restores included): reading the
        -- store's size is O(1), whatever its length. `memrefine stats --recount` checks them.
        CREATE TABLE totals (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
        INSERT INTO totals (name, value) VALUES ('json_bytes', (SELECT COALESCE(SUM(json_bytes), 0) FROM entries));
        INSERT INTO totals (name, value) VALUES ('entries', (SELECT COUNT(*) FROM entries));
        INSERT INTO totals (name, value) VALUES ('links', (SELECT COUNT(*) FROM links));
        CREATE TRIGGER totals_entry_insert AFTER INSERT ON entries BEGIN
            UPDATE totals SET value = value + NEW.json_bytes WHERE name = 'json_bytes';
            UPDATE totals SET value = value + 1 WHERE name = 'entries';
        END;
        CREATE TRIGGER totals_entry_delete AFTER DELETE ON entries BEGIN
            UPDATE totals SET value = value - OLD.json_bytes WHERE name = 'json_bytes';
            UPDATE totals SET value = value - 1 WHERE name = 'entries';
        END;
        CREATE TRIGGER totals_entry_size AFTER UPDATE OF json_bytes ON entries BEGIN
            UPDATE totals SET value = value - OLD.json_bytes + NEW.json_bytes WHERE name = 'json_bytes';
        END;
        CREATE TRIGGER totals_link_insert AFTER INSERT ON links BEGIN
            UPDATE totals SET value = value + 1 WHERE name = 'links';
        END;
        CREATE TRIGGER totals_link_delete AFTER DELETE ON links BEGIN
            UPDATE totals SET value = value - 1 WHERE name = 'links';
        END;
        """,
    ),
    Migration(
        "0005_disk_estimate",
        f"""
        -- The disk metric read exactly (dbstat) visits every page: O(file). A running
        -- estimate, kept by triggers like the other totals, makes it O(1): the bytes of
        -- each row (text as UTF-8, blobs, the id twice for its index) plus a fixed
        -- overhead per row, and 'disk_offset' = exact - estimate at the last refresh
        -- (MemoryStore.refresh_disk: the start and end of every compression, stats).
        -- Between refreshes the error is that of the per-row overhead on the rows changed.
        INSERT INTO totals (name, value) VALUES ('disk_estimate',
            (SELECT COALESCE(SUM({entry_row_bytes("entries.")}), 0) FROM entries)
            + (SELECT COALESCE(SUM({link_row_bytes("links.")}), 0) FROM links));
        INSERT INTO totals (name, value) VALUES ('disk_offset', 0);
        CREATE TRIGGER disk_entry_insert AFTER INSERT ON entries BEGIN
            UPDATE totals SET value = value + ({entry_row_bytes("NEW.")}) WHERE name = 'disk_estimate';
        END;
        CREATE TRIGGER disk_entry_delete AFTER DELETE ON entries BEGIN
            UPDATE totals SET value = value - ({entry_row_bytes("OLD.")}) WHERE name = 'disk_estimate';
        END;
        CREATE TRIGGER disk_entry_update AFTER UPDATE ON entries BEGIN
            UPDATE totals SET value = value - ({entry_row_bytes("OLD.")}) + ({entry_row_bytes("NEW.")})
                WHERE name = 'disk_estimate';
        END;
        CREATE TRIGGER disk_link_insert AFTER INSERT ON links BEGIN
            UPDATE totals SET value = value + ({link_row_bytes("NEW.")}) WHERE name = 'disk_estimate';
        END;
        CREATE TRIGGER disk_link_delete AFTER DELETE ON links BEGIN
            UPDATE totals SET value = value - ({link_row_bytes("OLD.")}) WHERE name = 'disk_estimate';
        END;
        """,
    ),
]


def split_sql(script: str) -> list[str]:
    """Statements of a migration script (none of ours has ';' inside a string; a trigger's body stays whole)."""
    lines = [line for line in script.splitlines() if not line.strip().startswith("--")]
    out: list[str] = []
    pending = ""
    for piece in "\n".join(lines).split(";"):
        pending = f"{pending};{piece}" if pending else piece
        text = pending.strip()
        if text.upper().startswith("CREATE TRIGGER") and not text.upper().endswith("END"):
            continue  # inside BEGIN ... END
        if text:
            out.append(text)
        pending = ""
    return out
