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


def _feed(row: str) -> str:
    """The body of a change-feed trigger (migration 0012): the entry's number in, the oldest changes out."""
    return (f"INSERT INTO change_feed (seq) VALUES ({row}.seq); DELETE FROM change_feed WHERE n <= "
            "last_insert_rowid() - 64 - (SELECT value FROM totals WHERE name = 'entries') / 4;")


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
    Migration(
        "0006_compact_journal",
        """
        -- The audit log names entries, actions and sources by small integers: every such
        -- string once in `strings`, every run once in `runs` (rebuilt with a stable integer
        -- key: VACUUM keeps the rowid only of an INTEGER PRIMARY KEY). Each decision is one
        -- row of `audit` keyed by (run, step); what the action implies is not stored again
        -- (removed_ids / created_ids are NULL unless they differ from it). Free text is
        -- NULL when empty, else TEXT or a packed BLOB (journal.pack_text). `decisions` and
        -- `preserved` stay readable, as views with the columns of migration 0002.
        CREATE TABLE strings (num INTEGER PRIMARY KEY, text TEXT NOT NULL UNIQUE);
        CREATE TABLE runs_0006 (
            num INTEGER PRIMARY KEY,
            run_id TEXT NOT NULL UNIQUE,
            started_at TEXT NOT NULL,
            finished_at TEXT,
            status TEXT NOT NULL,
            method TEXT NOT NULL,
            params TEXT NOT NULL,
            cursor INTEGER NOT NULL DEFAULT 0,
            report TEXT
        );
        INSERT INTO runs_0006 (num, run_id, started_at, finished_at, status, method, params, cursor, report)
            SELECT rowid, run_id, started_at, finished_at, status, method, params, cursor, report
            FROM runs ORDER BY rowid;
        INSERT OR IGNORE INTO strings (text)
            SELECT v FROM (
                SELECT rowid AS o, 0 AS k, action AS v FROM decisions
                UNION ALL SELECT rowid, 1, source FROM decisions
                UNION ALL SELECT rowid, 2, a_id FROM decisions
                UNION ALL SELECT rowid, 3, b_id FROM decisions
                UNION ALL SELECT rowid, 4, target FROM decisions
                UNION ALL SELECT rowid, 5, json_extract(created_ids, '$[0]') FROM decisions
                    WHERE json_array_length(created_ids) = 1
                UNION ALL SELECT 1e18, 6, a_id FROM preserved
                UNION ALL SELECT 1e18, 7, b_id FROM preserved
            ) WHERE v IS NOT NULL ORDER BY o, k;
        CREATE TABLE audit (
            run INTEGER NOT NULL,               -- runs.num
            step INTEGER NOT NULL,
            a INTEGER,                          -- strings.num of the pair's ids
            b INTEGER,
            similarity REAL,
            action INTEGER NOT NULL,            -- strings.num: delete, merge, preserve, evict
            target INTEGER,                     -- strings.num: the id a delete or evict removed
            made INTEGER,                       -- strings.num: the id a merge created
            source INTEGER NOT NULL,            -- strings.num: rule, scorer, llm, guard, evict, fallback
            reason,                             -- NULL (none), TEXT, or packed BLOB
            merge_instruction,
            size_before INTEGER NOT NULL,
            size_after INTEGER NOT NULL,
            latency_us INTEGER NOT NULL DEFAULT 0,
            at,                                 -- unix seconds (or the ISO text of an older row it cannot hold)
            removed_ids TEXT,                   -- NULL: merge -> [a, b], a target -> [target], else []
            created_ids TEXT,                   -- NULL: a made id -> [made], else []
            PRIMARY KEY (run, step)
        ) WITHOUT ROWID;
        INSERT INTO audit (run, step, a, b, similarity, action, target, made, source, reason, merge_instruction,
                           size_before, size_after, latency_us, at, removed_ids, created_ids)
            SELECT r.num, d.step, sa.num, sb.num, d.similarity, sact.num, st.num, sm.num, ssrc.num,
                   NULLIF(d.reason, ''), NULLIF(d.merge_instruction, ''), d.size_before, d.size_after,
                   CAST(ROUND(d.latency_ms * 1000) AS INTEGER),
                   CASE WHEN strftime('%Y-%m-%dT%H:%M:%S+00:00', d.at) = d.at
                        THEN CAST(strftime('%s', d.at) AS INTEGER) ELSE d.at END,
                   CASE WHEN (SELECT json_group_array(value) FROM json_each(d.removed_ids))
                             = (CASE WHEN d.action = 'merge' THEN json_array(d.a_id, d.b_id)
                                     WHEN d.target IS NOT NULL THEN json_array(d.target) ELSE '[]' END)
                        THEN NULL ELSE d.removed_ids END,
                   CASE WHEN (SELECT json_group_array(value) FROM json_each(d.created_ids))
                             = (CASE WHEN sm.num IS NOT NULL THEN json_array(sm.text) ELSE '[]' END)
                        THEN NULL ELSE d.created_ids END
            FROM decisions d
            JOIN runs_0006 r ON r.run_id = d.run_id
            JOIN strings sact ON sact.text = d.action
            JOIN strings ssrc ON ssrc.text = d.source
            LEFT JOIN strings sa ON sa.text = d.a_id
            LEFT JOIN strings sb ON sb.text = d.b_id
            LEFT JOIN strings st ON st.text = d.target
            LEFT JOIN strings sm ON sm.text = json_extract(d.created_ids, '$[0]')
                AND json_array_length(d.created_ids) = 1
            ORDER BY d.rowid;
        -- Pairs judged preserve (a's id < b's id): never proposed again.
        CREATE TABLE preserves (
            a INTEGER NOT NULL,                 -- strings.num
            b INTEGER NOT NULL,
            run INTEGER NOT NULL,               -- runs.num
            PRIMARY KEY (a, b)
        ) WITHOUT ROWID;
        INSERT INTO preserves (a, b, run)
            SELECT sa.num, sb.num, r.num FROM preserved p
            JOIN strings sa ON sa.text = p.a_id JOIN strings sb ON sb.text = p.b_id
            JOIN runs_0006 r ON r.run_id = p.run_id;
        DROP TABLE decisions;
        DROP TABLE preserved;
        DROP TABLE runs;
        ALTER TABLE runs_0006 RENAME TO runs;
        CREATE VIEW decisions AS
            SELECT d.run * 4294967296 + d.step AS rowid, r.run_id AS run_id, d.step AS step, sa.text AS a_id,
                   sb.text AS b_id, d.similarity AS similarity, sact.text AS action, st.text AS target,
                   ssrc.text AS source, COALESCE(d.reason, '') AS reason,
                   COALESCE(d.merge_instruction, '') AS merge_instruction,
                   COALESCE(d.created_ids, CASE WHEN d.made IS NULL THEN '[]' ELSE json_array(sm.text) END)
                       AS created_ids,
                   COALESCE(d.removed_ids, CASE WHEN sact.text = 'merge' THEN json_array(sa.text, sb.text)
                                                WHEN d.target IS NOT NULL THEN json_array(st.text)
                                                ELSE '[]' END) AS removed_ids,
                   d.size_before AS size_before, d.size_after AS size_after, d.latency_us / 1000.0 AS latency_ms,
                   CASE WHEN typeof(d.at) = 'integer' THEN strftime('%Y-%m-%dT%H:%M:%S+00:00', d.at, 'unixepoch')
                        ELSE d.at END AS at
            FROM audit d
            JOIN runs r ON r.num = d.run
            JOIN strings sact ON sact.num = d.action
            JOIN strings ssrc ON ssrc.num = d.source
            LEFT JOIN strings sa ON sa.num = d.a
            LEFT JOIN strings sb ON sb.num = d.b
            LEFT JOIN strings st ON st.num = d.target
            LEFT JOIN strings sm ON sm.num = d.made;
        CREATE VIEW preserved AS
            SELECT sa.text AS a_id, sb.text AS b_id, r.run_id AS run_id FROM preserves p
            JOIN strings sa ON sa.num = p.a JOIN strings sb ON sb.num = p.b JOIN runs r ON r.num = p.run;
        """,
    ),
    Migration(
        "0007_compact_history",
        """
        -- The undo history in one table with no index of its own. Its key packs the run, the
        -- step and which of the step's removed entries (a merge removes two) into the rowid:
        -- runs.num * 2^32 + step * 8 + i, so a run's or a step's rows are one rowid range. A
        -- row keeps what undo restores and nothing it can recompute (the content hash; the
        -- embedding was never kept), and the links removed with the entry as JSON
        -- [[src, dst, ord], ...] in removal order, the entry's own id written as null. The
        -- migrated links of a step all go with its first row: undo restores them in the same
        -- order. `history` stays readable as a view with the columns of migration 0002, the
        -- links as one more column.
        CREATE TABLE removals (
            k INTEGER PRIMARY KEY,
            seq INTEGER NOT NULL,
            id TEXT NOT NULL,
            content TEXT NOT NULL,
            keywords TEXT NOT NULL,
            timestamps TEXT NOT NULL,
            metadata TEXT NOT NULL,
            provenance TEXT NOT NULL,
            json_bytes INTEGER NOT NULL,
            links TEXT
        );
        INSERT INTO removals (k, seq, id, content, keywords, timestamps, metadata, provenance, json_bytes, links)
            SELECT r.num * 4294967296 + h.step * 8 + h.i - 1, h.seq, h.id, h.content, h.keywords, h.timestamps,
                   h.metadata, h.provenance, h.json_bytes,
                   CASE WHEN h.i = 1 THEN (
                       SELECT NULLIF(json_group_array(json_array(CASE WHEN l.src = h.id THEN NULL ELSE l.src END,
                                                                 CASE WHEN l.dst = h.id THEN NULL ELSE l.dst END,
                                                                 l.ord)), '[]')
                       FROM (SELECT src, dst, ord FROM history_links
                             WHERE run_id = h.run_id AND step = h.step ORDER BY rowid) l) END
            FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY run_id, step ORDER BY seq) AS i FROM history) h
            JOIN runs r ON r.run_id = h.run_id
            ORDER BY 1;
        DROP TABLE history;
        DROP TABLE history_links;
        CREATE VIEW history AS
            SELECT r.run_id AS run_id, h.k % 4294967296 / 8 AS step, h.seq AS seq, h.id AS id, h.content AS content,
                   h.keywords AS keywords, h.timestamps AS timestamps, h.metadata AS metadata,
                   h.provenance AS provenance, NULL AS content_hash, h.json_bytes AS json_bytes, NULL AS embedding,
                   NULL AS embedding_model, NULL AS embedded_hash, h.links AS links
            FROM removals h JOIN runs r ON r.num = h.k / 4294967296;
        """,
    ),
    Migration(
        "0008_embedding_model_numbers",
        """
        -- An entry named the model of its embedding in full (45 bytes for the bundled encoder);
        -- it names it as '#' and the model's number in `strings` now.
        INSERT OR IGNORE INTO strings (text)
            SELECT DISTINCT embedding_model FROM entries
            WHERE embedding_model IS NOT NULL AND embedding_model NOT LIKE '#%' ORDER BY 1;
        UPDATE entries SET embedding_model = '#' || (SELECT num FROM strings WHERE text = entries.embedding_model)
            WHERE embedding_model IS NOT NULL AND embedding_model NOT LIKE '#%';
        """,
    ),
    Migration(
        "0009_packed_history",
        """
        -- From here on, a removed entry's content, keywords, timestamps, metadata, provenance and
        -- links may each be a packed BLOB in `removals` (journal.pack_field: raw deflate with a
        -- fixed dictionary, tag byte 0x02) where that is shorter than the text. Rows written
        -- before stay text; both read back the same. The `history` view shows a packed field as
        -- its BLOB. Nothing to rewrite: this migration marks the format, so that a release that
        -- cannot read packed fields refuses the store instead of undoing into BLOBs.
        SELECT 1;
        """,
    ),
    Migration(
        "0010_deferrals",
        """
        -- Deletes a method deferred (a preserve of source 'deferred', e.g. the last-copy check's):
        -- the pair, its similarity and when it was decided. Any later run that runs out of
        -- candidate pairs above its budget may take them, in (run, step) order, while both
        -- entries are live; they outlive a purge of the history, as the preserved pairs do, and
        -- go with their run's undo.
        CREATE TABLE deferrals (
            run INTEGER NOT NULL,               -- runs.num
            step INTEGER NOT NULL,
            a INTEGER NOT NULL,                 -- strings.num of the pair's ids, as proposed
            b INTEGER NOT NULL,
            similarity REAL NOT NULL,
            PRIMARY KEY (run, step)
        ) WITHOUT ROWID;
        INSERT INTO deferrals (run, step, a, b, similarity)
            SELECT d.run, d.step, d.a, d.b, d.similarity FROM audit d JOIN strings s ON s.num = d.source
            WHERE s.text = 'deferred' AND d.a IS NOT NULL AND d.b IS NOT NULL AND d.similarity IS NOT NULL;
        """,
    ),
    Migration(
        "0011_compact_preserves",
        """
        -- A preserve decision changes nothing in the memory; from here on it writes no audit row
        -- (but a deferred delete, source 'deferred', which stays audited as a delete is).
        -- Its pair is one row of `preserves`: the two entries' insertion numbers (entries.seq,
        -- never reused; a < b) and the run, so it needs no `strings` row and never stands for a
        -- later entry that takes a removed id. Each run counts those preserves by source in
        -- `runs.preserved` (JSON {source: n}), which its report and a resumed run read. The pairs
        -- of an entry a decision removed stay while the undo history keeps the entry (undo brings
        -- back what was judged of it) and go with it (purge-history).
        -- Existing pairs are renumbered through the live entries, then the undo history (its
        -- latest copy of an id); a pair naming an id in neither can never be proposed again and
        -- is dropped. The preserve rows of the audit log are counted into their run, then go.
        ALTER TABLE runs ADD COLUMN preserved TEXT;
        UPDATE runs SET preserved = (
            SELECT json_group_object(src, n) FROM (
                SELECT ss.text AS src, COUNT(*) AS n FROM audit d
                JOIN strings sa ON sa.num = d.action JOIN strings ss ON ss.num = d.source
                WHERE d.run = runs.num AND sa.text = 'preserve' AND ss.text != 'deferred'
                GROUP BY ss.text ORDER BY ss.text))
            WHERE num IN (SELECT d.run FROM audit d JOIN strings sa ON sa.num = d.action
                          JOIN strings ss ON ss.num = d.source WHERE sa.text = 'preserve' AND ss.text != 'deferred');
        CREATE TABLE entry_numbers_0011 (id TEXT PRIMARY KEY, seq INTEGER NOT NULL) WITHOUT ROWID;
        INSERT INTO entry_numbers_0011 (id, seq) SELECT id, seq FROM entries;
        INSERT OR IGNORE INTO entry_numbers_0011 (id, seq) SELECT id, seq FROM removals ORDER BY k DESC;
        -- a, b: entries.seq of the pair's entries (a < b); run: runs.num.
        CREATE TABLE preserves_0011 (a INTEGER NOT NULL, b INTEGER NOT NULL, run INTEGER NOT NULL,
                                     PRIMARY KEY (a, b)) WITHOUT ROWID;
        INSERT OR IGNORE INTO preserves_0011 (a, b, run)
            SELECT MIN(na.seq, nb.seq), MAX(na.seq, nb.seq), p.run FROM preserves p
            JOIN strings sa ON sa.num = p.a JOIN entry_numbers_0011 na ON na.id = sa.text
            JOIN strings sb ON sb.num = p.b JOIN entry_numbers_0011 nb ON nb.id = sb.text
            ORDER BY 1, 2;
        DROP VIEW preserved;
        DROP TABLE preserves;
        DROP TABLE entry_numbers_0011;
        ALTER TABLE preserves_0011 RENAME TO preserves;
        -- Readable as before: the ids of the pair (a_id < b_id), from the live entry or the undo history.
        CREATE VIEW preserved AS SELECT MIN(x, y) AS a_id, MAX(x, y) AS b_id, run_id FROM (SELECT
            COALESCE((SELECT id FROM entries WHERE seq = a), (SELECT id FROM removals WHERE seq = a)) AS x,
            COALESCE((SELECT id FROM entries WHERE seq = b), (SELECT id FROM removals WHERE seq = b)) AS y,
            r.run_id FROM preserves JOIN runs r ON r.num = run) WHERE x IS NOT NULL AND y IS NOT NULL;
        DELETE FROM audit WHERE action = (SELECT num FROM strings WHERE text = 'preserve')
            AND source IS NOT (SELECT num FROM strings WHERE text = 'deferred');
        """,
    ),
    Migration(
        "0012_change_feed",
        f"""
        -- Which entries changed, in order, so that a search index held in memory follows the store
        -- without reading it again (store._search_index): a row per insert, delete or change of an
        -- entry's content or embedding, by any connection, written by triggers in the writer's
        -- transaction. n grows by one a change; the feed keeps the last 64 + entries / 4 changes
        -- (a reader further behind reads the store again, which costs about as much).
        CREATE TABLE change_feed (n INTEGER PRIMARY KEY, seq INTEGER NOT NULL);
        CREATE TRIGGER feed_insert AFTER INSERT ON entries BEGIN {_feed("NEW")} END;
        CREATE TRIGGER feed_delete AFTER DELETE ON entries BEGIN {_feed("OLD")} END;
        CREATE TRIGGER feed_update AFTER UPDATE OF content, content_hash, embedding, embedding_model, embedded_hash
            ON entries BEGIN {_feed("NEW")} END;
        """,
    ),
    Migration(
        "0013_audit_rowid",
        """
        -- The audit log as a rowid table keyed as the undo history is: k = runs.num * 2^32 + step.
        -- As a WITHOUT ROWID table (0006) a row holds at most about a fifth of a page before its
        -- tail moves to an overflow page of its own: at 512-byte pages an eviction row of ~130
        -- bytes took a whole second page, three quarters of the log's pages empty. A rowid table
        -- keeps rows of up to nearly a page inline. Columns and meaning are those of 0006, with
        -- run and step read from k; the `decisions` view reads as before.
        CREATE TABLE audit_0013 (
            k INTEGER PRIMARY KEY,              -- runs.num * 4294967296 + step
            a INTEGER,
            b INTEGER,
            similarity REAL,
            action INTEGER NOT NULL,
            target INTEGER,
            made INTEGER,
            source INTEGER NOT NULL,
            reason,
            merge_instruction,
            size_before INTEGER NOT NULL,
            size_after INTEGER NOT NULL,
            latency_us INTEGER NOT NULL DEFAULT 0,
            at,
            removed_ids TEXT,
            created_ids TEXT
        );
        INSERT INTO audit_0013 (k, a, b, similarity, action, target, made, source, reason, merge_instruction,
                                size_before, size_after, latency_us, at, removed_ids, created_ids)
            SELECT run * 4294967296 + step, a, b, similarity, action, target, made, source, reason,
                   merge_instruction, size_before, size_after, latency_us, at, removed_ids, created_ids
            FROM audit ORDER BY run, step;
        DROP VIEW decisions;
        DROP TABLE audit;
        ALTER TABLE audit_0013 RENAME TO audit;
        CREATE VIEW decisions AS
            SELECT d.k AS rowid, r.run_id AS run_id, d.k % 4294967296 AS step, sa.text AS a_id,
                   sb.text AS b_id, d.similarity AS similarity, sact.text AS action, st.text AS target,
                   ssrc.text AS source, COALESCE(d.reason, '') AS reason,
                   COALESCE(d.merge_instruction, '') AS merge_instruction,
                   COALESCE(d.created_ids, CASE WHEN d.made IS NULL THEN '[]' ELSE json_array(sm.text) END)
                       AS created_ids,
                   COALESCE(d.removed_ids, CASE WHEN sact.text = 'merge' THEN json_array(sa.text, sb.text)
                                                WHEN d.target IS NOT NULL THEN json_array(st.text)
                                                ELSE '[]' END) AS removed_ids,
                   d.size_before AS size_before, d.size_after AS size_after, d.latency_us / 1000.0 AS latency_ms,
                   CASE WHEN typeof(d.at) = 'integer' THEN strftime('%Y-%m-%dT%H:%M:%S+00:00', d.at, 'unixepoch')
                        ELSE d.at END AS at
            FROM audit d
            JOIN runs r ON r.num = d.k / 4294967296
            JOIN strings sact ON sact.num = d.action
            JOIN strings ssrc ON ssrc.num = d.source
            LEFT JOIN strings sa ON sa.num = d.a
            LEFT JOIN strings sb ON sb.num = d.b
            LEFT JOIN strings st ON st.num = d.target
            LEFT JOIN strings sm ON sm.num = d.made;
        """,
    ),
    Migration(
        "0014_uses",
        """
        -- What searches returned (store._uses): per entry, by its insertion number, how many
        -- searches on a read-write connection returned it and when the last one did (unix
        -- seconds). A merged entry starts with the sum of its entries' counts; a removed entry's
        -- row stays while the undo history keeps the entry and goes with purge-history.
        CREATE TABLE uses (seq INTEGER PRIMARY KEY, hits INTEGER NOT NULL, last INTEGER NOT NULL);
        """,
    ),
    Migration(
        "0015_pairs_with_removals",
        """
        -- From here on, the pairs judged preserve that name an entry a decision removes leave
        -- `preserves` with it: they go into its row of the undo history (removals.pairs: the other
        -- entry's number and the run of each pair, journal.pack_pairs), and undo puts them back. A
        -- pass only ever asks about pairs of live entries, and a store at a hard budget removes most
        -- of what it judged: at 10,000 added facts, nine in ten rows of `preserves` named a removed
        -- entry. purge-history drops them with the row, as before. Pairs and rows written before stay
        -- where they are (undo and purge treat them as they did). The view `preserved` shows the
        -- pairs still in `preserves`; RunJournal.preserved_pairs() shows both. An index on b finds
        -- an entry's pairs on either side.
        ALTER TABLE removals ADD COLUMN pairs BLOB;
        CREATE INDEX preserves_b ON preserves (b);
        """,
    ),
    Migration(
        "0016_text_dictionary_v2",
        """
        -- From here on, the audit log's free texts are packed with a second dictionary (tag byte
        -- 0x03, journal.pack_text) that adds the wording of the eviction's, the scorer's and the
        -- fast path's reasons: an eviction's reason of about 120 bytes takes about 27 instead of 96.
        -- Texts written before keep their tag and read back the same. Nothing to rewrite: this
        -- migration marks the format, so that a release that cannot read the new tag refuses the
        -- store instead of showing packed bytes.
        SELECT 1;
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
