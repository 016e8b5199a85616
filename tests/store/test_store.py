"""The SQLite memory store: schema, validation, both size metrics, links, embeddings, search."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest

from memrefine_edge.core import (
    ConfigurationError,
    DuplicateIdError,
    Entry,
    EntryNotFoundError,
    InvalidEntryError,
    NotAStoreError,
    SchemaError,
    StoreError,
    json_size,
    stored_hash,
    validate_entry,
)
from memrefine_edge.store import MemoryStore
from memrefine_edge.store._schema import MIGRATIONS
from memrefine_edge.store._vectors import decode_embedding, encode_embedding
from memrefine_edge.testing import HashEncoder

# --- schema and migrations -----------------------------------------------------


def test_an_empty_file_is_refused_untouched(tmp_path):
    path = tmp_path / "empty.db"
    path.touch()  # SQLite would take a zero-byte file as an empty database
    with pytest.raises(NotAStoreError, match="empty file.*left untouched"):
        MemoryStore(path)
    assert path.read_bytes() == b"" and sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"]


def test_a_foreign_sqlite_database_is_refused_untouched(tmp_path):
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO users (name) VALUES ('ana')")
    conn.close()
    before = path.read_bytes()
    for kwargs in ({}, {"create": False}, {"read_only": True}):
        with pytest.raises(NotAStoreError, match="another application.*users"):
            MemoryStore(path, **kwargs)
    assert path.read_bytes() == before  # not switched to WAL, no tables added
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]


def test_another_applications_id_is_refused(tmp_path):
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA application_id = 1234")
        conn.execute("CREATE TABLE entries (x)")
        conn.execute("CREATE TABLE _migrations (name)")
    conn.close()
    with pytest.raises(NotAStoreError, match="another application"):
        MemoryStore(path)


def test_a_new_store_is_created_whole_and_marked(tmp_path):
    from memrefine_edge.store import APPLICATION_ID

    path = tmp_path / "sub" / "new.db"
    with MemoryStore(path) as store:
        assert store.applied_migrations == [m.name for m in MIGRATIONS]
        assert len(store) == 0 and store.json_bytes() == 0
    rows_before = sqlite3.connect(path).execute("SELECT name, applied_at FROM _migrations").fetchall()
    with MemoryStore(path, create=False) as store:  # reopening applies nothing twice
        assert store.applied_migrations == [m.name for m in MIGRATIONS]
    assert sqlite3.connect(path).execute("SELECT name, applied_at FROM _migrations").fetchall() == rows_before
    assert sqlite3.connect(path).execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert not [p for p in path.parent.iterdir() if "creating" in p.name]  # no temporary file left


def test_a_store_made_before_the_application_id_still_opens(tmp_path):
    path = tmp_path / "old.db"
    MemoryStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA application_id = 0")
    conn.close()
    with MemoryStore(path, create=False) as store:
        assert len(store) == 0


def test_read_only_open_writes_nothing(tmp_path):
    path = tmp_path / "ro.db"
    with MemoryStore(path) as store:
        store.add(Entry(id="a", content="Ana likes tea."))
    before = path.read_bytes()
    with MemoryStore(path, read_only=True) as store:
        assert [e.id for e in store.entries()] == ["a"] and store.stats().entries == 1
        with pytest.raises(Exception, match="readonly"):
            store.add(Entry(id="b", content="Ben likes coffee."))
    assert path.read_bytes() == before
    with pytest.raises(StoreError, match="no memory store"):
        MemoryStore(tmp_path / "missing.db", read_only=True)
    assert not (tmp_path / "missing.db").exists()


def test_store_from_a_newer_version(tmp_path):
    path = tmp_path / "m.db"
    MemoryStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO _migrations VALUES ('9999_from_the_future', datetime('now'))")
    with pytest.raises(SchemaError, match="newer memrefine_edge.*9999_from_the_future"):
        MemoryStore(path)


def test_not_a_database(tmp_path):
    path = tmp_path / "notes.db"
    path.write_text("this is a shopping list, not SQLite\n" * 200)
    with pytest.raises(NotAStoreError, match="not an SQLite database"):
        MemoryStore(path)
    with pytest.raises(StoreError, match="is a directory"):
        MemoryStore(tmp_path)
    with pytest.raises(StoreError, match="no memory store"):
        MemoryStore(tmp_path / "missing.db", create=False)
    assert not (tmp_path / "missing.db").exists()


# --- validation -------------------------------------------------------------------


def test_validation_normalises_and_rejects():
    e = validate_entry(Entry(id="a", content="c", links=["b", "b", "a", "c", "b"], provenance=["x", "x"]))
    assert e.links == ("b", "c")  # duplicates and the self-loop dropped, order kept
    assert e.provenance == ("x",)
    for bad, match in [
        (Entry(id="", content="c"), "id is empty"),
        (Entry(id="a", content=" \n"), "empty"),
        (Entry(id="a", content="x\x00"), "NUL"),
        (Entry(id="a", content="x", keywords="kw"), "list of strings"),
        (Entry(id="a", content="x", metadata={"f": float("nan")}), "JSON"),
        (Entry(id="a", content="x", metadata=[1]), "JSON object"),
        (Entry(id="x" * 257, content="c"), "limit is 256"),
    ]:
        with pytest.raises(InvalidEntryError, match=match):
            validate_entry(bad)


def test_add_and_get(tmp_store):
    e = Entry(id="a", content="Zoë", keywords=("k",), timestamps=("t1", "t2"), metadata={"n": 1}, provenance=("p",))
    assert tmp_store.add(e) == e
    assert tmp_store.get("a") == e and "a" in tmp_store and "zz" not in tmp_store
    assert e.timestamp == "t1"
    with pytest.raises(EntryNotFoundError, match="no entry with id 'zz'"):
        tmp_store.get("zz")
    with pytest.raises(DuplicateIdError):
        tmp_store.add(Entry(id="a", content="again"))
    with pytest.raises(DuplicateIdError, match="twice"):
        tmp_store.add_many([Entry(id="b", content="1"), Entry(id="b", content="2")])
    assert tmp_store.ids() == ["a"]


def test_duplicate_and_self_links_dropped_in_store(tmp_store):
    tmp_store.add_many([Entry(id="a", content="x", links=("b", "a", "b")), Entry(id="b", content="y", links=("a",))])
    assert tmp_store.get("a").links == ("b",)
    assert tmp_store.stats().links == 2
    assert tmp_store.get("a") == validate_entry(Entry(id="a", content="x", links=("b",)))


def test_unknown_links(tmp_store):
    with pytest.raises(InvalidEntryError, match="unknown id 'nope'"):
        tmp_store.add(Entry(id="a", content="x", links=("nope",)))
    assert len(tmp_store) == 0
    kept = tmp_store.add(Entry(id="a", content="x", links=("nope",)), unknown_links="drop")
    assert kept.links == () and tmp_store.get("a").links == ()
    with pytest.raises(ValueError):
        tmp_store.add(Entry(id="b", content="x"), unknown_links="ignore")


# --- the json metric --------------------------------------------------------------


def test_json_metric_by_hand(tmp_store):
    a = Entry(
        id="a1",
        content="Zoë visited Kraków — twice",
        keywords=("travel",),
        timestamps=("2024-05-01",),
        metadata={"speaker": "Zoë", "n": 2},
        provenance=("D1:3",),
    )
    b = Entry(id="b2", content="日本", links=("a1",))
    # Written out by hand: default separators, non-ASCII kept as UTF-8.
    text_a = (
        '{"id": "a1", "content": "Zoë visited Kraków — twice", "keywords": ["travel"], "links": [], '
        '"timestamps": ["2024-05-01"], "metadata": {"speaker": "Zoë", "n": 2}, "provenance": ["D1:3"]}'
    )
    text_b = '{"id": "b2", "content": "日本", "keywords": [], "links": ["a1"], "timestamps": [], "metadata": {}, "provenance": []}'
    # ë, ó are 2 bytes, — is 3, each kanji is 3.
    assert len(text_a.encode()) == len(text_a) + 1 + 1 + 2 + 1
    assert len(text_b.encode()) == len(text_b) + 2 * 2
    fields_b = {"id": "b2", "content": "日本", "keywords": [], "links": ["a1"], "timestamps": [], "metadata": {}, "provenance": []}
    assert len(json.dumps(fields_b, ensure_ascii=False).encode()) == len(text_b.encode())
    assert json_size(a) == len(text_a.encode()) and json_size(b) == len(text_b.encode())
    tmp_store.add_many([a, b])
    assert tmp_store.json_bytes() == tmp_store.size("json") == len(text_a.encode()) + len(text_b.encode())
    with pytest.raises(ValueError, match="unknown metric"):
        tmp_store.size("tokens")


def test_remove_prunes_links_and_updates_json_size(tmp_store):
    tmp_store.add_many(
        [
            Entry(id="a", content="alpha"),
            Entry(id="b", content="beta", links=("a", "c")),
            Entry(id="c", content="gamma", links=("a",)),
        ]
    )
    removed = tmp_store.remove("a")
    assert sorted(removed) == [("b", "a", 0), ("c", "a", 0)]
    assert tmp_store.get("b").links == ("c",) and tmp_store.get("c").links == ()
    expected = len('{"id": "b", "content": "beta", "keywords": [], "links": ["c"], "timestamps": [], "metadata": {}, "provenance": []}')
    expected += len('{"id": "c", "content": "gamma", "keywords": [], "links": [], "timestamps": [], "metadata": {}, "provenance": []}')
    assert tmp_store.json_bytes() == expected
    assert tmp_store.stats().links == 1
    with pytest.raises(EntryNotFoundError):
        tmp_store.remove("a")
    tmp_store.add(Entry(id="a", content="alpha"))
    tmp_store.add_links(removed)  # what undo does
    assert tmp_store.get("b").links == ("a", "c")
    assert tmp_store.json_bytes() == sum(json_size(e) for e in tmp_store.entries())


# --- the disk metric: SQLite page arithmetic ------------------------------------------


def _varint_len(v: int) -> int:
    for n in range(1, 9):
        if v < 1 << (7 * n):
            return n
    return 9


def _serial(value) -> tuple[int, int]:
    """(serial type, body bytes) of one value in SQLite's record format (file format 4)."""
    if value is None:
        return 0, 0
    if isinstance(value, int):
        if value in (0, 1):
            return 8 + value, 0
        for st, size in ((1, 1), (2, 2), (3, 3), (4, 4), (5, 6), (6, 8)):
            if -(1 << (8 * size - 1)) <= value < 1 << (8 * size - 1):
                return st, size
    if isinstance(value, str):
        n = len(value.encode())
        return 2 * n + 13, n
    n = len(value)
    return 2 * n + 12, n


def _record(values) -> int:
    types = [_serial(v) for v in values]
    header = sum(_varint_len(st) for st, _ in types)
    header += _varint_len(header + 1)  # the header size counts itself (1 byte here)
    return header + sum(size for _, size in types)


def _leaf_page(cells: list[int]) -> int:
    """Used bytes of a b-tree leaf page: 8-byte header, a 2-byte pointer and the cell per row."""
    return 8 + sum(2 + c for c in cells)


def _expected_disk(rows: list[tuple[int, Entry, tuple | None]]) -> int:
    """Disk bytes of entries (rowid, entry, (blob, model) or None), all fitting on one leaf page each table."""
    entry_cells, id_cells, link_cells, dst_cells, size_cells = [], [], [], [], []
    for rowid, e, emb in rows:
        blob, model = emb if emb else (None, None)
        values = [
            None,  # seq is the rowid alias: stored as NULL in the record
            e.id,
            e.content,
            json.dumps(list(e.keywords), ensure_ascii=False, separators=(",", ":")),
            json.dumps(list(e.timestamps), ensure_ascii=False, separators=(",", ":")),
            json.dumps(dict(e.metadata), ensure_ascii=False, separators=(",", ":")),
            json.dumps(list(e.provenance), ensure_ascii=False, separators=(",", ":")),
            stored_hash(e.content),  # 16 bytes, not the 64 hex characters of content_hash
            json_size(e),
            blob,
            model,
            stored_hash(e.content) if emb else None,
        ]
        payload = _record(values)
        entry_cells.append(_varint_len(payload) + _varint_len(rowid) + payload)
        idx = _record([e.id, rowid])
        id_cells.append(_varint_len(idx) + idx)
        idx = _record([json_size(e), rowid])  # entries_json_bytes (migration 0003)
        size_cells.append(_varint_len(idx) + idx)
        for i, dst in enumerate(e.links):
            rec = _record([e.id, dst, i])  # WITHOUT ROWID: the row is an index record
            link_cells.append(_varint_len(rec) + rec)
            rec = _record([dst, e.id])  # links_dst: (dst) plus the primary key's other column
            dst_cells.append(_varint_len(rec) + rec)
    return sum(_leaf_page(c) for c in (entry_cells, id_cells, link_cells, dst_cells, size_cells))


def test_disk_metric_by_page_arithmetic(tmp_path):
    # Pages of 4 KB: every table and index of these few rows fits on one leaf page.
    tmp_store = MemoryStore(tmp_path / "pages.db", page_size=4096)
    assert tmp_store.pragma("page_size") == 4096
    assert tmp_store.disk_bytes() == 5 * 8  # five empty b-trees: just their page headers
    a = Entry(id="a", content="Zoë likes tea", keywords=("tea",), metadata={"s": 1}, provenance=("D1:1",))
    b = Entry(id="b", content="x" * 300, links=("a",), timestamps=("2024-01-01",))
    tmp_store.add_many([a, b])
    assert tmp_store.disk_bytes() == tmp_store.size("disk") == _expected_disk([(1, a, None), (2, b, None)])
    # Embeddings count under the disk metric (not under json).
    encoder = HashEncoder(dim=16, model_id="m16")
    json_before = tmp_store.json_bytes()
    tmp_store.ensure_embeddings(encoder)
    blobs = {e.id: encode_embedding(encoder.embed([e.content])[0]) for e in (a, b)}
    # The model is named by its number in the store's strings: "#1", the first string (migration 0008).
    expected = _expected_disk([(1, a, (blobs["a"], "#1")), (2, b, (blobs["b"], "#1"))])
    assert tmp_store.disk_bytes() == expected
    assert tmp_store.json_bytes() == json_before
    stats = tmp_store.stats()
    assert stats.embedding_bytes == 2 * (16 + 8) and stats.embedded == 2
    # Removing an entry frees its cells (secure_delete zeroes them; they become unused bytes).
    tmp_store.remove("a")
    b_after = Entry(id="b", content="x" * 300, timestamps=("2024-01-01",))
    assert tmp_store.disk_bytes() == _expected_disk([(2, b_after, (blobs["b"], "#1"))])
    tmp_store.close()


def test_solo_disk_size_is_what_the_entry_alone_takes(tmp_path):
    store = MemoryStore(tmp_path / "solo.db", page_size=4096)
    store.add_many([Entry(id="a", content="Zoë likes tea"), Entry(id="b", content="Sam paints " * 20),
                    Entry(id="c", content="Evan runs")])
    store.ensure_embeddings(HashEncoder(dim=16, model_id="m16"))
    # Not yet embedded: measured as it will be once the model the others have embeds it.
    store.add(Entry(id="d", content="Ana sings"))
    estimate = store.solo_size("d", "disk", embedding_bytes=16 + 8)
    store.ensure_embeddings(HashEncoder(dim=16, model_id="m16"))
    for gone in ("a", "b", "c"):
        store.remove(gone)
    assert store.solo_size("d", "disk") == estimate == store.disk_bytes()
    store.close()


def test_disk_metric_matches_dbstat_on_a_bigger_store(tmp_store):
    tmp_store.add_many(Entry(id=f"e{i}", content=f"memory number {i} " * 20) for i in range(300))
    conn = sqlite3.connect(tmp_store.path)  # a reader of its own
    manual = 0
    for name in ("entries", "links", "links_dst", "sqlite_autoindex_entries_1", "entries_json_bytes"):
        manual += conn.execute("SELECT SUM(pgsize) - SUM(unused) FROM dbstat WHERE name = ?", (name,)).fetchone()[0]
    assert tmp_store.disk_bytes() == manual
    stats = tmp_store.stats()
    assert stats.file_bytes >= stats.disk_bytes > tmp_store.json_bytes() * 0.9
    assert stats.overhead_bytes == stats.file_bytes - stats.disk_bytes


# --- embeddings and search -------------------------------------------------------------


class CountingEncoder(HashEncoder):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.seen: list[str] = []

    def embed_batch(self, texts):
        self.seen.extend(texts)
        return super().embed_batch(texts)


def test_ensure_embeddings_skips_unchanged_and_follows_model(tmp_store):
    tmp_store.add_many([Entry(id="a", content="red apple"), Entry(id="b", content="green pear"), Entry(id="c", content="red apple")])
    enc = CountingEncoder()
    assert tmp_store.ensure_embeddings(enc) == 3
    assert sorted(enc.seen) == ["green pear", "red apple"]  # identical contents embedded once
    enc.seen.clear()
    assert tmp_store.ensure_embeddings(enc) == 0 and enc.seen == []
    tmp_store.add(Entry(id="d", content="blue plum"))
    assert tmp_store.ensure_embeddings(enc) == 1 and enc.seen == ["blue plum"]
    other = CountingEncoder(model_id="hash-v2")
    assert tmp_store.ensure_embeddings(other) == 4  # another model: everything again
    ids, matrix = tmp_store.embeddings(model_id="hash-v2")
    assert ids == ["a", "b", "c", "d"] and matrix.shape == (4, 384) and matrix.dtype == np.float32
    assert tmp_store.embeddings(model_id="hash-bow")[0] == []
    with pytest.raises(EntryNotFoundError):
        tmp_store.set_embedding("zz", np.zeros(3), "m")


def test_ensure_embeddings_reads_the_store_a_page_at_a_time(tmp_path):
    # Repeated contents spread over pages are still embedded once, every entry gets
    # the same stored bytes as a pass that reads everything at once, and progress
    # counts every entry up to the total.
    contents = [f"note {i % 7}" if i % 3 == 0 else f"unique text {i}" for i in range(40)]
    stored = {}
    for page_rows in (5, 10_000):
        with MemoryStore(tmp_path / f"p{page_rows}.db") as store:
            store.add_many([Entry(id=f"e{i:02d}", content=c) for i, c in enumerate(contents)])
            enc, seen = CountingEncoder(), []
            assert store.ensure_embeddings(enc, batch_size=3, page_rows=page_rows,
                                           progress=lambda d, t: seen.append((d, t))) == 40
            assert sorted(enc.seen) == sorted(set(contents))  # each distinct content once
            assert [d for d, _ in seen] == sorted(d for d, _ in seen) and seen[-1] == (40, 40)
            assert store.stats().embedded == 40 and store.ensure_embeddings(enc, page_rows=page_rows) == 0
            stored[page_rows] = store.embeddings(model_id=enc.model_id)[1].tobytes()
    assert stored[5] == stored[10_000]


def test_search_ordering_ties_and_cache(tmp_store):
    enc = HashEncoder()
    tmp_store.add_many(
        [
            Entry(id="tea", content="Alex drinks green tea every morning"),
            Entry(id="dog", content="the dog is called Biscuit"),
            Entry(id="tea2", content="Alex drinks green tea every morning"),
            Entry(id="car", content="a blue car parked outside"),
        ]
    )
    hits = tmp_store.search("green tea morning", 3, encoder=enc)
    assert [e.id for e, _ in hits][:2] == ["tea", "tea2"]  # a tie resolves by insertion order
    scores = [s for _, s in hits]
    assert scores == sorted(scores, reverse=True) and scores[0] == pytest.approx(scores[1])
    assert len(tmp_store.search("anything", 50, encoder=enc)) == 4
    index = tmp_store._search_index
    tmp_store.search("dog", 1, encoder=enc)
    assert tmp_store._search_index is index  # no write since: the index is reused
    tmp_store.add(Entry(id="new", content="Biscuit the dog chewed a sock"))
    assert tmp_store.search("Biscuit dog sock", 1, encoder=enc)[0][0].id == "new"  # the add, followed
    assert tmp_store._search_index is index  # the same index, brought up to date from the change feed
    tmp_store.remove("new")
    assert "new" not in [e.id for e, _ in tmp_store.search("Biscuit dog sock", 5, encoder=enc)]
    assert tmp_store._search_index is index
    with pytest.raises(ValueError):
        tmp_store.search("x", 0, encoder=enc)


def test_search_empty_store(tmp_store):
    assert tmp_store.search("anything", encoder=HashEncoder()) == []


# --- transactions, meta, vacuum ---------------------------------------------------------


def test_transaction_rollback(tmp_store):
    tmp_store.add(Entry(id="keep", content="kept"))
    with pytest.raises(RuntimeError):
        with tmp_store.atomic():
            tmp_store.add(Entry(id="a", content="x"))
            tmp_store.remove("keep")
            tmp_store.set_meta("k", "v")
            raise RuntimeError("boom")
    assert tmp_store.ids() == ["keep"] and tmp_store.get_meta("k") is None
    # A failing batch (the last entry links nowhere) writes none of its entries.
    with pytest.raises(InvalidEntryError):
        tmp_store.add_many([Entry(id="b", content="y"), Entry(id="c", content="z", links=("ghost",))])
    assert tmp_store.ids() == ["keep"]
    assert tmp_store.json_bytes() == json_size(tmp_store.get("keep"))


def test_a_nested_block_rolls_back_alone_when_its_error_is_caught(tmp_store):
    with tmp_store.atomic():
        tmp_store.add(Entry(id="outer", content="written by the outer block"))
        with pytest.raises(DuplicateIdError):
            with tmp_store.atomic():
                tmp_store.add(Entry(id="inner", content="written by the inner block"))
                tmp_store.add(Entry(id="outer", content="a clash"))  # fails inside the savepoint
        tmp_store.set_meta("after", "yes")
    assert tmp_store.ids() == ["outer"] and tmp_store.get_meta("after") == "yes"
    with pytest.raises(RuntimeError):  # and an error leaving the outer block still undoes everything
        with tmp_store.atomic():
            tmp_store.add(Entry(id="x", content="x"))
            with tmp_store.atomic():
                tmp_store.add(Entry(id="y", content="y"))
            raise RuntimeError("boom")
    assert tmp_store.ids() == ["outer"]


def test_grouped_blocks_share_a_transaction_and_each_stays_all_or_nothing(tmp_path):
    path = tmp_path / "g.db"

    def seen() -> list[str]:  # what another connection sees: the committed state
        other = sqlite3.connect(path)
        try:
            return [r[0] for r in other.execute("SELECT id FROM entries ORDER BY seq")]
        finally:
            other.close()

    with MemoryStore(path) as store:
        with store.grouped(window_s=60) as group:
            assert not group.open  # nothing begun before the first write
            store.add(Entry(id="a", content="first"))
            with pytest.raises(DuplicateIdError):
                store.add_many([Entry(id="b", content="second"), Entry(id="a", content="a clash")])
            store.add(Entry(id="c", content="third"))
            assert group.open and store.ids() == ["a", "c"] and seen() == []
            assert not group.commit_if_due()  # younger than the window
            group.commit()
            assert not group.open and group.commits == 1 and seen() == ["a", "c"]
            store.add(Entry(id="d", content="fourth"))
            assert seen() == ["a", "c"]
        assert seen() == ["a", "c", "d"]  # leaving the block commits
        with pytest.raises(RuntimeError, match="boom"):
            with store.grouped(window_s=60):
                store.add(Entry(id="e", content="fifth"))
                raise RuntimeError("boom")
        assert seen() == ["a", "c", "d", "e"]  # a block that completed is kept when a later error leaves
        with store.grouped(window_s=0) as group:
            store.add(Entry(id="f", content="sixth"))
            assert group.commit_if_due() and seen()[-1] == "f"  # window 0: each block is due at once
            with pytest.raises(RuntimeError, match="nest"):
                with store.grouped(window_s=0):
                    pass
        with pytest.raises(ValueError, match="window_s"):
            with store.grouped(window_s=-1):
                pass
        assert store.integrity_check() == "ok" and store.ids() == ["a", "c", "d", "e", "f"]


def test_string_numbers_never_outlive_a_rollback(tmp_path):
    """A string added in a block that rolls back is forgotten: its number goes to the next string."""
    path = tmp_path / "s.db"

    def table() -> dict[str, int]:  # what the file holds, read past the store's memory
        other = sqlite3.connect(path)
        try:
            return dict(other.execute("SELECT text, num FROM strings"))
        finally:
            other.close()

    with MemoryStore(path) as store:
        with store.atomic():
            kept = store.string_num("kept", add=True)
        assert store.string_num("kept") == kept and table()["kept"] == kept
        with pytest.raises(RuntimeError):  # the outer transaction rolls back
            with store.atomic():
                lost = store.string_num("lost", add=True)
                assert store.string_num("lost") == lost
                raise RuntimeError("boom")
        assert store.string_num("lost") is None
        with store.atomic():  # a savepoint rolls back inside a transaction that commits
            with pytest.raises(RuntimeError):
                with store.atomic():
                    store.string_num("inner", add=True)
                    raise RuntimeError("boom")
            assert store.string_num("inner") is None
            after = store.string_num("after", add=True)
        with pytest.raises(RuntimeError):  # a group that fails after its first block
            with store.grouped(window_s=60):
                with store.atomic():
                    grouped = store.string_num("grouped", add=True)
                with store.atomic():
                    store.string_num("rolled", add=True)
                    raise RuntimeError("boom")
        assert store.string_num("rolled") is None and store.string_num("grouped") == grouped
        assert table() == {**{t: n for t, n in table().items() if t not in {"kept", "after", "grouped"}},
                           "kept": kept, "after": after, "grouped": grouped}
        for text, num in table().items():  # every remembered number is the file's
            assert store.string_num(text) == num
        assert len(set(table().values())) == len(table())


def test_identical_groups_compare_the_text_not_only_its_hash(tmp_path):
    path = tmp_path / "i.db"
    with MemoryStore(path) as store:
        store.add_many([Entry(id="a", content="same"), Entry(id="b", content="other"), Entry(id="c", content="same"),
                        Entry(id="d", content="odd"), Entry(id="e", content="other"), Entry(id="f", content="same")])
        assert store.identical_groups(max_seq=store.max_seq()) == [[(1, "a"), (3, "c"), (6, "f")],
                                                                   [(2, "b"), (5, "e")]]
        assert store.identical_groups(max_seq=3) == [[(1, "a"), (3, "c")]]
    other = sqlite3.connect(path)  # a hash collision, forged: "odd" takes the hash of "same"
    other.execute("UPDATE entries SET content_hash = (SELECT content_hash FROM entries WHERE id = 'a') WHERE id = 'd'")
    other.commit()
    other.close()
    with MemoryStore(path) as store:
        assert [[i for _, i in g] for g in store.identical_groups(max_seq=10)] == [["a", "c", "f"], ["b", "e"]]


def test_meta_vacuum_and_reopen(tmp_path):
    path = tmp_path / "m.db"
    with MemoryStore(path) as store:
        store.add_many(Entry(id=f"e{i}", content="y" * 500) for i in range(50))
        store.set_meta("owner", "agent-7")
        for i in range(40):
            store.remove(f"e{i}")
        before = store.stats().file_bytes
        store.vacuum()
        assert store.stats().file_bytes < before
        assert store.get_meta("owner") == "agent-7" and store.get_meta("x", "d") == "d"
        assert store.seq_of("e45") == 46
    with MemoryStore(path, create=False) as store:
        assert len(store) == 10 and store.get("e49").content == "y" * 500


def _all_bytes(folder) -> bytes:
    """The store file and whatever SQLite keeps next to it (-wal, -shm, journals)."""
    return b"".join(f.read_bytes() for f in sorted(folder.iterdir()) if f.is_file())


def test_a_removed_entry_is_gone_from_the_files_once_the_store_is_closed(tmp_path):
    folder = tmp_path / "dd"
    folder.mkdir()
    with MemoryStore(folder / "s.db") as store:
        store.add_many([Entry(id="a", content="the door code is zebra-7781-quokka", links=("b",)),
                        Entry(id="b", content="Ben likes green tea", links=("a",))])
        store.set_embedding("a", np.full(8, 0.123456, dtype=np.float32), "m")
        store.remove("a")
        assert "a" not in store and store.get("b").links == ()
    # Until the checkpoint at close, SQLite's write-ahead log may hold the old page (README says so).
    data = _all_bytes(folder)
    assert b"zebra-7781" not in data and encode_embedding(np.full(8, 0.123456, dtype=np.float32)) not in data
    assert b"Ben likes green tea" in data


def test_the_after_test_totals_check_catches_drifted_totals_and_skips_other_files(tmp_path):
    # Every test's tmp_path gets this check when the test ends (conftest); it must be able to fail.
    from tests.conftest import check_totals_under

    with MemoryStore(tmp_path / "ok.db") as store:
        store.add_many([Entry(id=f"e{i}", content=f"Note {i}.") for i in range(3)])
    sqlite3.connect(tmp_path / "other.sqlite").execute("CREATE TABLE t (x)").connection.close()
    (tmp_path / "notes.txt").write_text("not a database")
    assert check_totals_under(tmp_path) == 1
    con = sqlite3.connect(tmp_path / "ok.db")
    with con:
        con.execute("UPDATE totals SET value = value + 1 WHERE name = 'json_bytes'")
    con.close()
    with pytest.raises(AssertionError, match="json_bytes"):
        check_totals_under(tmp_path)
    con = sqlite3.connect(tmp_path / "ok.db")
    with con:  # put right again, so the check this test gets when it ends passes
        con.execute("UPDATE totals SET value = value - 1 WHERE name = 'json_bytes'")
    con.close()
    assert check_totals_under(tmp_path) == 1


def test_running_totals_equal_a_recount_after_every_kind_of_change(tmp_path):
    from memrefine_edge.engine import Compressor
    from memrefine_edge.testing import FakeMerger
    from tests.support.fakes import ScriptedMethod

    def check(store):
        for name, v in store.recount().items():
            assert v["total"] == v["recount"], (name, v)

    with MemoryStore(tmp_path / "t.db") as store:
        check(store)
        store.add_many([Entry(id=f"e{i}", content=f"Ana talked about topic {i % 7} on day {i}.",
                              links=(f"e{i - 1}",) if i else ()) for i in range(40)])
        check(store)
        store.remove("e5")  # its links go, the neighbours' json sizes shrink
        check(store)
        store.ensure_embeddings(HashEncoder())
        check(store)
        run = Compressor(store, encoder=HashEncoder(), method=ScriptedMethod(), merger=FakeMerger()).run(budget=0.5)
        check(store)
        store.journal.undo(run.run_id)
        check(store)
        run = Compressor(store, encoder=HashEncoder(), method=ScriptedMethod(), merger=FakeMerger(),
                         mode="strict").run(budget=0.3)
        check(store)
        store.journal.purge_history()
        check(store)
        assert len(store) == len(store.ids()) and store.json_bytes() == sum(json_size(e) for e in store.entries())


# --- compact embeddings -------------------------------------------------------------------


def test_embeddings_are_stored_as_int8_with_a_scale_and_read_back_within_half_a_step(tmp_store):
    rng = np.random.default_rng(7)
    v = rng.standard_normal(384).astype(np.float32)
    v /= np.linalg.norm(v)
    blob = encode_embedding(v)
    assert len(blob) == 384 + 8  # against 1,536 bytes as float32
    assert np.isnan(np.frombuffer(blob[:4], dtype=np.float32)[0])  # never the start of a float32 embedding
    back = decode_embedding(blob)
    step = np.abs(v).max() / 127
    assert back.dtype == np.float32 and np.abs(back - v).max() <= step  # half a step, and the length kept
    assert abs(float(np.linalg.norm(back.astype(np.float64))) - 1.0) < 1e-6
    assert decode_embedding(encode_embedding(np.zeros(4, dtype=np.float32))).tolist() == [0.0] * 4
    tmp_store.add(Entry(id="a", content="x"))
    tmp_store.set_embedding("a", v, "m")
    ids, matrix = tmp_store.embeddings()
    assert ids == ["a"] and matrix.tobytes() == back.tobytes()
    tmp_store.set_embedding("a", v, "m", exact=True)  # float32 as given, every bit
    assert tmp_store.embeddings()[1].tobytes() == v.tobytes()


def test_float32_embeddings_of_older_stores_are_read_as_they_are(tmp_store):
    """A store written before the compact format keeps working: raw float32 blobs are read unchanged."""
    tmp_store.add_many([Entry(id="old", content="x"), Entry(id="new", content="y")])
    old = np.linspace(-0.5, 0.5, 8, dtype=np.float32)
    with tmp_store.atomic():
        tmp_store._db.conn.execute("UPDATE entries SET embedding = ?, embedding_model = 'm' WHERE id = 'old'",
                                   (old.tobytes(),))
    tmp_store.set_embedding("new", old, "m")
    ids, matrix = tmp_store.embeddings(model_id="m")
    assert ids == ["old", "new"]
    assert matrix[0].tobytes() == old.tobytes() and np.abs(matrix[1] - old).max() <= 0.5 / 127
    assert tmp_store.embedding_codes(model_id="m") is None  # not all int8: the caller reads float32


def test_embedding_codes_decode_to_the_embeddings_bit_for_bit(tmp_store):
    rng = np.random.default_rng(3)
    empty_ids, empty_codes, _ = tmp_store.embedding_codes(model_id="m")
    assert empty_ids == [] and empty_codes.size == 0
    tmp_store.add_many([Entry(id=f"e{i}", content=f"text {i}") for i in range(5)])
    for i in (0, 2, 3, 4):
        tmp_store.set_embedding(f"e{i}", rng.standard_normal(16).astype(np.float32), "m" if i != 3 else "other")
    ids, codes, scales = tmp_store.embedding_codes(model_id="m")
    want_ids, matrix = tmp_store.embeddings(model_id="m")
    assert ids == want_ids == ["e0", "e2", "e4"]  # insertion order, this model's only
    assert codes.dtype == np.int8 and codes.shape == (3, 16) and scales.dtype == np.float32
    assert (codes.astype(np.float32) * scales[:, None]).tobytes() == matrix.tobytes()


# --- the running disk estimate -----------------------------------------------------------


def test_the_running_disk_size_is_exact_after_a_refresh_and_close_between(tmp_path):
    from memrefine_edge.engine import Compressor
    from memrefine_edge.testing import FakeMerger
    from tests.support.fakes import ScriptedMethod

    with MemoryStore(tmp_path / "d.db") as store:
        store.add_many([Entry(id=f"e{i:04d}", content=f"Ana talked about topic {i % 13} on day {i} " * (1 + i % 4),
                              keywords=("ana",), links=(f"e{i - 1:04d}",) if i % 3 else ()) for i in range(400)])
        store.ensure_embeddings(HashEncoder())
        assert store.refresh_disk() == store.disk_bytes() == store.running_size("disk")
        for i in range(0, 400, 3):
            store.remove(f"e{i:04d}")
        exact = store.disk_bytes()
        assert abs(store.running_size("disk") - exact) <= 0.02 * exact  # no refresh since a third was removed
        assert store.recount()["disk_estimate"]["total"] == store.recount()["disk_estimate"]["recount"]
        # A run under the disk metric ends at or under its byte budget measured exactly, and says so.
        target = int(store.disk_bytes() * 0.6)
        report = Compressor(store, encoder=HashEncoder(), method=ScriptedMethod(), merger=FakeMerger(),
                            metric="disk").run(budget_bytes=target)
        assert report.budget_met and store.disk_bytes() <= target
        assert report.after["disk_bytes"] == store.disk_bytes() == store.running_size("disk")
        assert report.before["file_bytes"] > 0 and report.after["file_bytes"] == store.file_bytes()
        stats = store.stats()
        assert stats.history_entries > 0 and stats.history_bytes > 0
        assert stats.history_bytes_per_entry == stats.history_bytes // stats.history_entries
        store.journal.purge_history()
        stats = store.stats()
        assert stats.history_entries == 0 and stats.history_bytes_per_entry == 0


def test_an_older_store_gets_its_disk_estimate_from_its_rows(tmp_path):
    """Migration 0005 on a store that already holds entries and links: the estimate is their recount."""
    path = tmp_path / "old.db"
    with MemoryStore(path) as store:
        store.add_many([Entry(id="a", content="Ana likes tea."), Entry(id="b", content="Ben too.", links=("a",))])
        store.set_embedding("a", np.full(8, 0.5, dtype=np.float32), "m")
    with sqlite3.connect(path) as conn:  # as version 0004 left it
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'disk_%'"):
            conn.execute(f"DROP TRIGGER {name}")
        conn.execute("DELETE FROM totals WHERE name IN ('disk_estimate', 'disk_offset')")
        conn.execute("DELETE FROM _migrations WHERE name = '0005_disk_estimate'")
    conn.close()
    with MemoryStore(path) as store:
        assert store.applied_migrations[-1] == "0005_disk_estimate"
        assert all(v["total"] == v["recount"] for v in store.recount().values())
        store.refresh_disk()
        assert store.running_size("disk") == store.disk_bytes()


# --- page size and compaction ------------------------------------------------------


def test_a_new_store_has_small_pages_and_an_existing_one_keeps_its_own(tmp_path):
    with MemoryStore(tmp_path / "new.db") as store:
        assert store.pragma("page_size") == 512
    with MemoryStore(tmp_path / "big.db", page_size=4096) as store:
        store.add(Entry(id="a", content="x"))
    with MemoryStore(tmp_path / "big.db", page_size=1024) as store:  # an existing file keeps its pages
        assert store.pragma("page_size") == 4096 and store.get("a").content == "x"
    for bad in (256, 1000, 131072, True, "512"):
        with pytest.raises(ValueError, match="page_size"):
            MemoryStore(tmp_path / "bad.db", page_size=bad)
    assert not (tmp_path / "bad.db").exists()


def test_compact_vacuums_only_when_enough_of_the_file_is_free(tmp_path):
    with MemoryStore(tmp_path / "c.db") as store:
        store.add_many(Entry(id=f"e{i}", content=f"memory number {i} " * 30) for i in range(200))
        assert not store.compact()  # freshly written: nothing worth a rewrite
        disk = store.disk_bytes()
        for i in range(0, 200, 2):
            store.remove(f"e{i}")  # half the rows: part-empty pages all over the file
        freed = disk - store.disk_bytes()
        before = store.pragma("page_count")
        assert not store.compact(freed_bytes=freed, min_share=0.99)
        assert store.pragma("page_count") == before
        assert store.compact(freed_bytes=freed)
        assert store.pragma("page_count") < 0.7 * before and store.pragma("freelist_count") == 0
        assert [e.id for e in store.entries()] == [f"e{i}" for i in range(1, 200, 2)]
        assert store.integrity_check() == "ok"
        assert all(v["total"] == v["recount"] for v in store.recount().values())


def test_an_entry_row_keeps_a_16_byte_hash_and_compact_json(tmp_path):
    with MemoryStore(tmp_path / "h.db") as store:
        store.add(Entry(id="a", content="Zoë likes tea", keywords=("tea", "Zoë"), metadata={"s": 1, "t": "x"}))
        row = store._db.conn.execute("SELECT content_hash, keywords, metadata FROM entries").fetchone()
    assert row == (stored_hash("Zoë likes tea"), '["tea","Zoë"]', '{"s":1,"t":"x"}') and len(row[0]) == 16


def test_a_model_id_in_the_form_of_a_model_number_is_refused(tmp_store):
    # Rows name their embedding model by number ('#' and the number): a model may not be called so.
    tmp_store.add(Entry(id="a", content="x"))
    with pytest.raises(ConfigurationError, match="may not start with '#'"):
        tmp_store.set_embedding("a", np.ones(4, dtype=np.float32), "#1")
    with pytest.raises(ConfigurationError):
        tmp_store.ensure_embeddings(HashEncoder(dim=4, model_id="#2"))
    assert tmp_store.stats().embedded == 0


def test_long_write_lets_the_log_grow_and_restores_the_setting_even_on_error(tmp_path):
    from memrefine_edge.store._maintenance import LONG_WRITE_WAL_BYTES

    with MemoryStore(tmp_path / "w.db") as store:
        default = store.pragma("wal_autocheckpoint")
        assert store.pragma("journal_size_limit") > 0  # the log file is truncated back after a checkpoint
        with store.long_write():
            inside = store.pragma("wal_autocheckpoint")
            store.add(Entry(id="a", content="Ana keeps bees"))
        assert inside == LONG_WRITE_WAL_BYTES // (store.pragma("page_size") + 24) > default
        assert store.pragma("wal_autocheckpoint") == default
        with pytest.raises(RuntimeError), store.long_write():
            raise RuntimeError("boom")
        assert store.pragma("wal_autocheckpoint") == default
        assert store.get("a").content == "Ana keeps bees"
    with MemoryStore(tmp_path / "w.db", read_only=True) as store, store.long_write():
        assert store.get("a").content == "Ana keeps bees"
