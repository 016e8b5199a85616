"""Schema migrations: a store written with an earlier schema opens, migrates and keeps working."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from pathlib import Path

from memrefine_edge.core import Entry, content_hash, json_size
from memrefine_edge.store import APPLICATION_ID, MemoryStore
from memrefine_edge.store._schema import MIGRATIONS, split_sql

RUN = "20250101-000000-abcdef"
ENTRIES = [Entry(id=i, content=f"Entry {i}: Ana's note number {n}.", timestamps=("2023-05-0%d" % n,),
                 provenance=(f"D1:{n}",)) for n, i in enumerate(["a", "b", "c", "d", "é"], 1)]
#: The same entries with links, as the run of OLD_DECISIONS removes them (see OLD_LINKS).
LINKED = [replace(e, links={"b": ("a",), "c": ("a",), "d": ("c",)}.get(e.id, ())) for e in ENTRIES]
#: (step, src, dst, ord): the links each decision removed, in the order the journal of migration 0002 kept
#: them. The merge (step 2) redirected c's link to a onto m, which the eviction of c (step 3) removed.
OLD_LINKS = [(0, "b", "a", 0), (2, "d", "c", 0), (2, "c", "a", 0), (3, "c", "m", 0)]
MERGED = Entry(id="m", content="Entry a and d: Ana's notes 1 and 4.", provenance=("D1:1", "D1:4"))

#: (step, a_id, b_id, similarity, action, target, source, reason, merge_instruction, created, removed, latency_ms)
OLD_DECISIONS = [
    (0, "a", "b", 0.9512345678901234, "delete", "b", "scorer",
     "scorer: delete_b 0.91, preserve 0.05, merge 0.03, delete_a 0.01", "", [], ["b"], 0.7131009988370351),
    (1, "a", "c", 0.9, "preserve", None, "rule", "", "", [], [], 0.25),
    (2, "d", "a", 0.8, "merge", None, "llm", "same event", "Merge A and B; keep the dates", ["m"], ["d", "a"], 12.5),
    (3, "c", None, None, "evict", "c", "evict", "strict budget: over by 10 B", "", [], ["c"], 0.0),
    (4, "é", "m", 0.7, "delete", "é", "guard", "guard: deleting A would lose 'é'", "", [], ["é"], 1.0),
]


def _old_store(path: Path, *, linked: bool = False) -> None:
    """A store as migrations 0001-0005 and the journal of that schema wrote it: one run of five decisions
    (``linked``: of the entries of LINKED, with the links it removed kept in ``history_links``)."""
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    for migration in MIGRATIONS[:5]:
        for statement in split_sql(migration.sql):
            conn.execute(statement)
        conn.execute("INSERT INTO _migrations VALUES (?, datetime('now'))", (migration.name,))

    def row(e: Entry, seq: int) -> tuple:
        return (seq, e.id, e.content, json.dumps(list(e.keywords)), json.dumps(list(e.timestamps)),
                json.dumps(dict(e.metadata)), json.dumps(list(e.provenance)), content_hash(e.content), json_size(e))

    cols = "seq, id, content, keywords, timestamps, metadata, provenance, content_hash, json_bytes"
    conn.execute(f"INSERT INTO entries ({cols}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", row(MERGED, 6))
    entries = LINKED if linked else ENTRIES
    for seq, e in enumerate(entries, 1):
        if e.id != "é":  # removed by the run: kept in its history for undo
            step = {"b": 0, "a": 2, "d": 2, "c": 3}[e.id]
            conn.execute(f"INSERT INTO history (run_id, step, {cols}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         (RUN, step, *row(e, seq)))
    conn.execute(f"INSERT INTO history (run_id, step, {cols}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                 (RUN, 4, *row(entries[4], 5)))
    if linked:
        conn.execute("UPDATE history SET json_bytes = ? WHERE id = 'c'",  # removed when it linked to m
                     (json_size(replace(LINKED[2], links=("m",))),))
        conn.executemany("INSERT INTO history_links (run_id, step, src, dst, ord) VALUES (?, ?, ?, ?, ?)",
                         [(RUN, *link) for link in OLD_LINKS])
    conn.execute("INSERT INTO runs (run_id, started_at, finished_at, status, method, params, cursor, report)"
                 " VALUES ('20240101-000000-000000', '2024-01-01T00:00:00+00:00', NULL, 'undone', 'memrefine',"
                 " '{}', 0, NULL)")
    conn.execute("INSERT INTO runs (run_id, started_at, finished_at, status, method, params, cursor, report)"
                 " VALUES (?, '2025-01-01T00:00:00+00:00', '2025-01-01T00:00:05+00:00', 'done', 'memrefine', '{}',"
                 " 5, '{}')", (RUN,))
    for step, a, b, sim, action, target, source, reason, instruction, created, removed, lat in OLD_DECISIONS:
        conn.execute(
            "INSERT INTO decisions (run_id, step, a_id, b_id, similarity, action, target, source, reason,"
            " merge_instruction, created_ids, removed_ids, size_before, size_after, latency_ms, at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (RUN, step, a, b, sim, action, target, source, reason, instruction, json.dumps(created),
             json.dumps(removed), 1000 - step, 999 - step, lat,
             "2025-01-01 00:00:01" if step == 3 else f"2025-01-01T00:00:0{step}+00:00"))
    conn.execute("INSERT INTO preserved (a_id, b_id, run_id) VALUES ('a', 'c', ?)", (RUN,))
    conn.commit()
    conn.close()


def test_a_store_of_the_previous_schema_migrates_and_its_run_still_undoes(tmp_path):
    path = tmp_path / "old.db"
    _old_store(path)
    with sqlite3.connect(path) as conn:
        old_view = conn.execute("SELECT * FROM decisions ORDER BY rowid").fetchall()
    conn.close()
    with MemoryStore(path) as store:
        assert store.applied_migrations == [m.name for m in MIGRATIONS]
        decisions = store.journal.decisions(RUN)
        got = [(d.step, d.a_id, d.b_id, d.similarity, d.action, d.target, d.source, d.reason, d.merge_instruction,
                d.created_ids, d.removed_ids, d.latency_ms) for d in decisions]
        # Latencies are kept to the microsecond. The preserve (step 1) is counted with its run, not listed.
        assert got == [(*d[:-1], round(d[-1], 3)) for d in OLD_DECISIONS if d[4] != "preserve"]
        assert store.journal.preserve_counts(RUN) == {"rule": 1}
        assert [d.at for d in decisions][:2] == ["2025-01-01T00:00:00+00:00", "2025-01-01T00:00:02+00:00"]
        assert decisions[2].at == "2025-01-01 00:00:01"  # a time it cannot hold as seconds stays as written
        assert [(d.size_before, d.size_after) for d in decisions] == [(1000 - s, 999 - s) for s in (0, 2, 3, 4)]
        assert store.journal.preserved_pairs() == [("a", "c")]
        assert [r.run_id for r in store.journal.runs()] == ["20240101-000000-000000", RUN]
        assert [e.id for e in store.entries()] == ["m"]
        store.journal.undo(RUN)
        assert [e.counted_fields() for e in store.entries()] == [e.counted_fields() for e in ENTRIES]
        assert [store.seq_of(e.id) for e in ENTRIES] == [1, 2, 3, 4, 5]
        assert store.journal.preserved_pairs() == []
        assert all(v["total"] == v["recount"] for v in store.recount().values())
    with sqlite3.connect(path) as conn:  # the audit log reads as before through the view
        new_view = conn.execute("SELECT * FROM decisions ORDER BY rowid").fetchall()
    conn.close()
    old_view = [row for row in old_view if row[5] != "preserve"]
    assert len(new_view) == len(old_view) == 4
    for old, new in zip(old_view, new_view, strict=True):  # the view's first column is its rowid
        new = new[1:]
        assert old[:8] == new[:8] and old[12:14] == new[12:14]  # ids, similarity, action, target, source, sizes
        assert json.loads(old[10]) == json.loads(new[10]) and json.loads(old[11]) == json.loads(new[11])
        assert abs(old[14] - new[14]) < 1e-3


def test_the_audit_log_stores_what_the_action_implies_only_once(tmp_path):
    path = tmp_path / "old.db"
    _old_store(path)
    with MemoryStore(path) as store:
        rows = store._db.conn.execute("SELECT removed_ids, created_ids, typeof(at) FROM audit ORDER BY k").fetchall()
        strings = [r[0] for r in store._db.conn.execute("SELECT text FROM strings")]
    assert all(r[0] is None and r[1] is None for r in rows)  # implied by action, target, pair and made
    assert [r[2] for r in rows] == ["integer"] * 2 + ["text", "integer"]  # the preserve has no row (0011)
    assert len(strings) == len(set(strings))
    assert {"delete", "merge", "preserve", "evict", "a", "b", "m", "é"} <= set(strings)


def test_the_undo_history_of_a_previous_schema_migrates_with_its_links_and_still_undoes(tmp_path):
    path = tmp_path / "old.db"
    _old_store(path, linked=True)
    with sqlite3.connect(path) as conn:
        old_rows = conn.execute("SELECT run_id, step, seq, id, content, keywords, timestamps, metadata, provenance,"
                                " json_bytes FROM history ORDER BY run_id, step, seq").fetchall()
    conn.close()
    with MemoryStore(path) as store:
        conn = store._db.conn
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'index')")}
        assert "removals" in tables and not tables & {"history_links", "history_links_step"}
        # The view reads the rows as the history table held them.
        assert conn.execute("SELECT run_id, step, seq, id, content, keywords, timestamps, metadata, provenance,"
                            " json_bytes FROM history ORDER BY run_id, step, seq").fetchall() == old_rows
        # The links of a step go with its first row, the removed entry's own id as null.
        links = {(step, entry_id): json.loads(packed) for step, entry_id, packed in conn.execute(
            "SELECT step, id, links FROM history WHERE links IS NOT NULL")}
        assert links == {(0, "b"): [[None, "a", 0]], (2, "a"): [["d", "c", 0], ["c", None, 0]],
                         (3, "c"): [[None, "m", 0]]}
        assert store.stats().history_entries == 5
        store.journal.undo(RUN)
        assert [e.counted_fields() for e in store.entries()] == [e.counted_fields() for e in LINKED]
        assert [store.seq_of(e.id) for e in LINKED] == [1, 2, 3, 4, 5]
        assert all(v["total"] == v["recount"] for v in store.recount().values())
        assert store.stats().history_entries == 0


def test_embedding_model_names_become_numbers_and_embeddings_stay_current(tmp_path):
    from memrefine_edge.store._vectors import encode_embedding
    from memrefine_edge.testing import HashEncoder

    path = tmp_path / "old.db"
    _old_store(path)
    encoder = HashEncoder(dim=16, model_id="mini@0123456789ab")
    blob = encode_embedding(encoder.embed([MERGED.content])[0])
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE entries SET embedding = ?, embedding_model = ?, embedded_hash = content_hash",
                     (blob, encoder.model_id))
    conn.close()
    with MemoryStore(path) as store:
        conn = store._db.conn
        [(tag,)] = conn.execute("SELECT embedding_model FROM entries").fetchall()
        assert tag == f"#{store.string_num(encoder.model_id)}"
        assert store.ensure_embeddings(encoder) == 0  # still current: nothing to embed again
        ids, matrix = store.embeddings(model_id=encoder.model_id)
        assert ids == ["m"] and matrix.shape == (1, 16)
        assert store.embeddings(model_id="another@model")[0] == []
        assert all(v["total"] == v["recount"] for v in store.recount().values())
        store.journal.undo(RUN)  # the restored entries wait for an embedding; m is gone
        assert store.ensure_embeddings(encoder) == 5
        assert {r[0] for r in conn.execute("SELECT embedding_model FROM entries")} == {tag}


def _add_old_decision(path: Path, step: int, a: str, b: str, sim: float, source: str) -> None:
    """One more preserve in the run of :func:`_old_store`, as the journal of that schema wrote it."""
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO decisions (run_id, step, a_id, b_id, similarity, action, target, source, reason,"
            " merge_instruction, created_ids, removed_ids, size_before, size_after, latency_ms, at)"
            " VALUES (?, ?, ?, ?, ?, 'preserve', NULL, ?, 'kept', '', '[]', '[]', 990, 990, 0.5,"
            " '2025-01-01T00:00:09+00:00')", (RUN, step, a, b, sim, source))
        conn.execute("INSERT OR IGNORE INTO preserved (a_id, b_id, run_id) VALUES (?, ?, ?)",
                     (min(a, b), max(a, b), RUN))
        conn.execute("UPDATE runs SET cursor = ? WHERE run_id = ?", (step + 1, RUN))
    conn.close()


def test_deferred_preserves_written_before_the_deferrals_table_are_carried_into_it(tmp_path):
    path = tmp_path / "d.db"
    _old_store(path)
    # A delete the last-copy check deferred: a preserve of source "deferred", only in the audit log then.
    _add_old_decision(path, 5, "m", "é", 0.625, "deferred")
    with MemoryStore(path) as store:
        assert store.applied_migrations == [m.name for m in MIGRATIONS]
        assert store.journal.deferrals() == [("m", "é", 0.625)]
        # A deferred delete stays in the audit log (its reason names what it would delete); the
        # other preserve is counted with its run.
        assert store.journal.preserve_counts(RUN) == {"rule": 1}
        assert [(d.step, d.action, d.source) for d in store.journal.decisions(RUN)] == [
            (0, "delete", "scorer"), (2, "merge", "llm"), (3, "evict", "evict"), (4, "delete", "guard"),
            (5, "preserve", "deferred")]


def test_preserves_become_pairs_of_entry_numbers_counted_with_their_run(tmp_path):
    path = tmp_path / "p.db"
    _old_store(path)
    _add_old_decision(path, 5, "m", "a", 0.5, "scorer")   # m live, a in the undo history
    _add_old_decision(path, 6, "m", "zz", 0.5, "scorer")  # zz neither live nor kept: never proposed again
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE runs SET status = 'running', finished_at = NULL WHERE run_id = ?", (RUN,))
    conn.close()
    with MemoryStore(path) as store:
        conn = store._db.conn
        run = store.journal.run(RUN)
        # An interrupted run resumes at its cursor and reports every preserve it took, by source.
        assert run.status == "running" and run.cursor == 7
        assert run.preserved == store.journal.preserve_counts(RUN) == {"rule": 1, "scorer": 2}
        assert [d.step for d in store.journal.decisions(RUN)] == [0, 2, 3, 4]
        assert conn.execute("SELECT COUNT(*) FROM audit WHERE action = ?",
                            (store.string_num("preserve"),)).fetchone()[0] == 0
        # Pairs by the entries' insertion numbers: a = 1, c = 3 (undo history), m = 6 (live).
        assert sorted(conn.execute("SELECT a, b FROM preserves").fetchall()) == [(1, 3), (1, 6)]
        assert store.journal.preserved_pairs() == [("a", "c"), ("a", "m")]
        assert conn.execute("SELECT a_id, b_id, run_id FROM preserved ORDER BY 1, 2").fetchall() == [
            ("a", "c", RUN), ("a", "m", RUN)]
        assert list(store.journal.live_preserved_pairs()) == []  # a and c are not live
        store.journal.undo(RUN)  # undone: its pairs and its entries' removal with it
        assert store.journal.preserved_pairs() == [] and [e.id for e in store.entries()] == ["a", "b", "c", "d", "é"]
