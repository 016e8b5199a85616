"""Search in the assistant loop: the index in memory follows every change, by any connection or process.

Each search is checked against a full recomputation: a scan of every live entry's stored
vector (``store.embeddings``), ties by insertion order, and a store opened afresh.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from memrefine_edge.core import Decision, Entry
from memrefine_edge.engine import Compressor
from memrefine_edge.methods import MemRefineMethod
from memrefine_edge.store import MemoryStore, _search_index
from memrefine_edge.testing import AlwaysJudge, FakeMerger, HashEncoder
from tests.support.fakes import ScriptedMethod
from tests.support.stores import compressor, synthetic_entries

ENC = HashEncoder()
QUERIES = ("tea coffee", "sister birthday concert", "dog cat w7", "Ana: paris museum", "zzz unknown words")


def scan(store: MemoryStore, query: str, k: int) -> list[tuple[str, float]]:
    """The top ``k`` by a brute-force scan of the stored vectors (ties by insertion order)."""
    ids, matrix = store.embeddings(model_id=ENC.model_id)
    if not ids:
        return []
    scores = np.einsum("ij,j->i", matrix, ENC.embed([query])[0].astype(np.float32))
    order = sorted(range(len(ids)), key=lambda i: (-scores[i], i))[:k]
    return [(ids[i], float(scores[i])) for i in order]


def hits(store: MemoryStore, query: str, k: int) -> list[tuple[str, float]]:
    return [(e.id, s) for e, s in store.search(query, k, encoder=ENC)]


def fresh(path: Path, query: str, k: int, **kw) -> list[tuple[str, float]]:
    with MemoryStore(path, create=False, **kw) as store:
        return hits(store, query, k)


def assert_follows(store: MemoryStore, path: Path) -> None:
    for query in QUERIES:
        for k in (1, 3, 10):
            got = hits(store, query, k)
            assert got == scan(store, query, k) == fresh(path, query, k), (query, k)


class Reads:
    """The SQL a store runs while the block runs (``store.set_trace``)."""

    def __init__(self, store: MemoryStore) -> None:
        self.store, self.sql = store, []

    def __enter__(self) -> list[str]:
        self.store.set_trace(self.sql.append)
        return self.sql

    def __exit__(self, *exc: object) -> None:
        self.store.set_trace(None)


def whole_store_reads(sql: list[str]) -> list[str]:
    """Statements that read every entry row (no row limit by number or id)."""
    return [s for s in sql if "FROM entries" in s and "WHERE seq IN" not in s and "WHERE id =" not in s
            and not s.startswith("UPDATE")]


@pytest.fixture
def screened(monkeypatch):
    """Every index of more than a few rows screened with int8 products (the path of a large store)."""
    monkeypatch.setattr(_search_index, "SCREEN_ROWS", 4)


def test_a_search_after_another_connections_add_reads_only_the_change(tmp_path):
    path = tmp_path / "s.db"
    with MemoryStore(path) as store, MemoryStore(path) as other:
        store.add_many(synthetic_entries(60))
        hits(store, "tea coffee", 5)  # builds the index (and embeds every entry)
        other.add(Entry(id="new", content="Ana: tea coffee tea coffee"))
        with Reads(store) as sql:
            got = hits(store, "tea coffee", 5)
        assert got[0][0] == "new" and got == scan(store, "tea coffee", 5)
        assert not whole_store_reads(sql), whole_store_reads(sql)
        other.remove("new")
        with Reads(store) as sql:
            assert "new" not in [i for i, _ in hits(store, "tea coffee", 5)]
        assert not whole_store_reads(sql), whole_store_reads(sql)


@pytest.mark.parametrize("screen", [False, True])
def test_adds_deletes_merges_and_evictions_by_another_connection_are_followed(tmp_path, request, screen):
    if screen:
        request.getfixturevalue("screened")
    path = tmp_path / "c.db"
    with MemoryStore(path) as store, MemoryStore(path) as other:
        store.add_many(synthetic_entries(40))
        assert_follows(store, path)
        index = store._search_index
        other.add_many([Entry(id=f"n{i}", content=f"Ben: tea w{i} coffee") for i in range(10)])
        assert_follows(store, path)
        other.remove("e003")
        other.remove("n4")
        assert_follows(store, path)
        # A compression on the other connection: deletes, merges (new entries), then strict evictions.
        report = compressor(other).run(budget=0.6)
        assert report.actions.get("merge") and report.actions.get("delete")
        assert_follows(store, path)
        evicted = compressor(other, ScriptedMethod(policy="preserve"), mode="strict").run(budget=0.3)
        assert evicted.actions.get("evict")
        assert_follows(store, path)
        other.journal.undo(evicted.run_id)  # undo puts entries back (without their embeddings)
        assert_follows(store, path)
        assert store._search_index is index  # followed all along, never read again from scratch


def test_changes_by_another_process_are_followed(tmp_path):
    path = tmp_path / "p.db"
    with MemoryStore(path) as store:
        store.add_many(synthetic_entries(30))
        assert_follows(store, path)
        index = store._search_index
        script = textwrap.dedent(f"""
            from memrefine_edge.core import Entry
            from memrefine_edge.store import MemoryStore
            from tests.support.stores import compressor
            with MemoryStore({str(path)!r}, create=False) as s:
                s.add_many([Entry(id=f"x{{i}}", content=f"Ana: sister birthday concert x{{i}}") for i in range(5)])
                s.remove("e007")
                compressor(s).run(budget=0.7)
        """)
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert_follows(store, path)
        assert "x0" in store and store._search_index is index


def test_a_feed_that_no_longer_reaches_back_makes_a_search_read_the_store_again(tmp_path):
    path = tmp_path / "t.db"
    with MemoryStore(path) as store, MemoryStore(path) as other:
        store.add_many(synthetic_entries(20))
        assert_follows(store, path)
        index = store._search_index
        # More changes than the feed keeps (64 + entries / 4): the oldest the index needs are gone.
        for i in range(120):
            other.add(Entry(id=f"t{i}", content=f"Ben: dog cat w{i % 9} biscuit"))
        low = other._db.conn.execute("SELECT MIN(n) FROM change_feed").fetchone()[0]
        assert low > index.position + 1
        assert_follows(store, path)
        assert store._search_index is not index and len(store._search_index) == len(store)


def test_a_store_opened_read_only_follows_a_writer_and_writes_nothing(tmp_path):
    path = tmp_path / "r.db"
    with MemoryStore(path) as writer:
        writer.add_many(synthetic_entries(25))
        writer.ensure_embeddings(ENC)
        with MemoryStore(path, read_only=True) as reader:
            assert hits(reader, "tea coffee", 5) == scan(writer, "tea coffee", 5)
            writer.add(Entry(id="late", content="Ana: tea coffee tea"))  # no embedding stored
            writer.remove("e002")
            got = hits(reader, "tea coffee", 5)
            assert got[0][0] == "late" and "e002" not in [i for i, _ in hits(reader, "tea coffee", 50)]
            assert got == fresh(path, "tea coffee", 5, read_only=True)
            assert writer._db.conn.execute("SELECT embedding FROM entries WHERE id = 'late'").fetchone()[0] is None
            writer.ensure_embeddings(ENC)  # stored now: the reader uses the stored (int8) vector
            assert hits(reader, "tea coffee", 5) == scan(writer, "tea coffee", 5)


def test_a_store_opened_read_only_with_no_embeddings_searches_from_vectors_in_memory(tmp_path):
    path = tmp_path / "ro.db"
    with MemoryStore(path) as writer:
        writer.add_many(synthetic_entries(12))
    with MemoryStore(path, read_only=True) as reader:
        got = hits(reader, "tea coffee", 3)
    with MemoryStore(path) as writer:
        assert writer.stats().embedded == 0  # nothing was written
        writer.ensure_embeddings(ENC)
        # The in-memory vectors rank as the stored ones do (the scores differ by the int8 rounding).
        assert [i for i, _ in got] == [i for i, _ in scan(writer, "tea coffee", 3)]


def test_an_index_whose_first_vectors_are_float32_grows_from_empty():
    index = _search_index.SearchIndex("m", 0)
    for i in range(100):  # one at a time, past the first allocation and its growth
        index.put_vector(i + 1, f"v{i}", np.eye(8, dtype=np.float32)[i % 8] * (1 + i))
    assert len(index) == 100 and [i for i, _ in index.search(np.eye(8, dtype=np.float32)[3], 2)] == ["v99", "v91"]


def test_a_search_inside_a_write_that_rolls_back_is_not_kept(tmp_path):
    path = tmp_path / "w.db"
    with MemoryStore(path) as store:
        store.add_many(synthetic_entries(20))
        assert_follows(store, path)
        with pytest.raises(RuntimeError), store.atomic():
            store.add(Entry(id="ghost", content="Ana: tea coffee ghost"))
            assert hits(store, "tea coffee ghost", 1)[0][0] == "ghost"  # the open transaction's own view
            raise RuntimeError("rolled back")
        assert "ghost" not in store
        assert_follows(store, path)
        store.add(Entry(id="real", content="Ana: tea coffee real"))
        assert hits(store, "tea coffee real", 1)[0][0] == "real"
        assert_follows(store, path)


def test_vectors_stored_as_float32_and_as_int8_rank_together_exactly(tmp_path, screened):
    path = tmp_path / "f.db"
    with MemoryStore(path) as store:
        store.add_many(synthetic_entries(30))
        store.ensure_embeddings(ENC)
        for entry_id in ("e001", "e010", "e020"):  # an older store's float32 blobs, say
            store.set_embedding(entry_id, ENC.embed([store.get(entry_id).content])[0], ENC.model_id, exact=True)
        assert_follows(store, path)
        store.set_embedding("e005", ENC.embed(["tea coffee"])[0], ENC.model_id, exact=True)
        assert hits(store, "tea coffee", 1)[0][0] == "e005"
        assert_follows(store, path)


def test_a_large_store_is_screened_and_gives_the_scans_top_k(tmp_path):
    path = tmp_path / "big.db"
    words = ("tea coffee hiking paris berlin guitar piano dog cat running yoga novel movie sister brother "
             "birthday concert garden painting camping beach museum").split()
    rng = np.random.default_rng(3)
    with MemoryStore(path) as store, MemoryStore(path) as other:
        store.add_many(Entry(id=f"b{i:05d}", content=" ".join(rng.choice(words, 4)))
                       for i in range(_search_index.SCREEN_ROWS + 500))
        assert hits(store, "tea coffee", 10) == scan(store, "tea coffee", 10)
        other.add(Entry(id="top", content="tea coffee tea coffee"))
        other.remove("b00007")
        for query in ("tea coffee", "paris berlin guitar", "dog"):  # many exact ties: insertion order decides
            for k in (1, 10, 40):
                assert hits(store, query, k) == scan(store, query, k), (query, k)


def test_a_merge_in_another_process_while_searching_keeps_search_and_scan_equal(tmp_path, screened):
    """Preserve-everything judge, then merges: new entries and removals arrive as one feed each."""
    path = tmp_path / "m.db"
    with MemoryStore(path) as store:
        store.add_many([Entry(id=f"m{i}", content=f"Ana took up {w} in {c}.") for i, (w, c) in
                        enumerate([("chess", "Oslo"), ("chess", "Oslo."), ("yoga", "Lima"), ("judo", "Riga")])])
        assert_follows(store, path)
        with MemoryStore(path) as other:
            Compressor(other, encoder=ENC, merger=FakeMerger(), method=MemRefineMethod(
                judge=AlwaysJudge(Decision("merge", None, merge_instruction="keep all", source="llm")))).run(
                budget=0.6)
        assert len(store) < 4
        assert_follows(store, path)


def test_the_screen_never_changes_the_top_k_of_a_scan(screened):
    """Seeded random indexes: near-duplicate rows, rows dropped, rows kept as float32, any k."""
    from memrefine_edge.store._vectors import decode_embedding, encode_embedding

    rng = np.random.default_rng(11)
    for _ in range(40):
        n, d = int(rng.integers(5, 1500)), int(rng.choice([8, 64, 384]))
        base = rng.standard_normal((max(3, n // 10), d))
        vecs = base[rng.integers(0, len(base), n)] + rng.standard_normal((n, d)) * rng.choice([0, 1e-3, 0.05, 1])
        vecs = (vecs / np.linalg.norm(vecs, axis=1, keepdims=True) * rng.choice([1, 3.7])).astype(np.float32)
        blobs = [encode_embedding(v) for v in vecs]
        index = _search_index.SearchIndex("m", 0)
        index.put_blobs([(i + 1, f"e{i}", b) for i, b in enumerate(blobs)])
        exact = {int(i) for i in rng.choice(n, size=min(n, 3), replace=False)}
        for i in exact:
            index.put_vector(i + 1, f"e{i}", vecs[i])
        dead = {int(i) for i in rng.choice(n, size=n // 5, replace=False)}
        for i in dead:
            index.drop(i + 1)
        matrix = np.stack([vecs[i] if i in exact else decode_embedding(blobs[i]) for i in range(n)])
        live = [i for i in range(n) if i not in dead]
        for _ in range(4):
            q = (base[rng.integers(0, len(base))] + rng.standard_normal(d) * rng.choice([0, 0.01, 0.3]))
            q = q.astype(np.float32)
            k = int(rng.integers(1, 40))
            scores = np.einsum("ij,j->i", matrix, q)
            want = sorted(live, key=lambda i: (-scores[i], i))[:k]
            assert index.search(q, k) == [(f"e{i}", float(scores[i])) for i in want], (n, d, k)
