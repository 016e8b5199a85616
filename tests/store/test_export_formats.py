"""Export in every import format: what the importer reads back, under the user's ids, minus what the format
cannot hold (and only that)."""

from __future__ import annotations

import hashlib
import io
import json
import tempfile
from pathlib import Path

from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings

from memrefine_edge.cli import cli
from memrefine_edge.core import Decision, Entry, ExportError
from memrefine_edge.store import EXPORT_FORMATS, MemoryStore, export_file, import_file, parse_file, user_ids
from tests.support.roundtrip import entries, play, runs
from tests.support.stores import OneShot, compressor

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "importers"
AMEM_FIELDS = ("last_accessed", "context", "tags", "category", "retrieval_count", "evolution_history")


def held(entry: Entry, fmt: str, ids, stem: str = "", n: int = 0) -> Entry:
    """``entry`` as exported and re-imported in ``fmt``: the user's ids, and without exactly what the format drops
    (the list in ``memrefine export --help``)."""
    entry_id = ids(entry.id)
    links = tuple(dict.fromkeys(ids(link) for link in entry.links))
    meta = dict(entry.metadata)
    if ids.is_merged(entry.id) and isinstance(meta.get("merged_from"), list):
        meta["merged_from"] = [ids(m) for m in meta["merged_from"]]
    if fmt == "jsonl":
        return Entry(id=entry_id, content=entry.content, keywords=entry.keywords, links=links,
                     timestamps=entry.timestamps, metadata=meta, provenance=entry.provenance)
    if fmt == "mem0":  # links, provenance and the middle timestamps go; a merged memory's hash is of its text
        if ids.is_merged(entry.id) and "hash" in meta:
            meta["hash"] = hashlib.md5(entry.content.encode()).hexdigest()
        stamps = entry.timestamps[:1] + entry.timestamps[1:][-1:]
        return Entry(id=entry_id, content=entry.content, keywords=entry.keywords, timestamps=stamps, metadata=meta)
    if fmt == "amem":  # provenance, later timestamps, other metadata and empty values go
        return Entry(id=entry_id, content=entry.content, keywords=entry.keywords, links=links,
                     timestamps=entry.timestamps[:1],
                     metadata={k: meta[k] for k in AMEM_FIELDS if meta.get(k) not in (None, "", [])})
    # text: the paragraph only, numbered by its place
    lines = entry.content.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return Entry(id=f"{stem}:p{n}", content="\n".join(line.rstrip() for line in lines if line.strip()).strip())


def reimported(store: MemoryStore, fmt: str, folder: Path) -> list[Entry]:
    path = folder / f"export.{fmt}"
    export_file(store, path, format=fmt)
    return parse_file(path, format=fmt)[0]


def expected(store: MemoryStore, fmt: str) -> list[Entry]:
    ids = user_ids(store)
    return [held(e, fmt, ids, "export", n) for n, e in enumerate(store.entries(), 1)]


# --- the fixtures of the importers ----------------------------------------------------------


def test_each_importer_fixture_comes_back_the_same_from_its_own_format(tmp_path):
    for name, fmt in (("mem0_results.json", "mem0"), ("mem0_list.json", "mem0"), ("amem_notes.json", "amem"),
                      ("amem_dict.json", "amem"), ("entries.jsonl", "jsonl")):
        with MemoryStore(tmp_path / f"{name}.db") as store:
            import_file(store, FIX / name, format=fmt, drop_unknown_links=True)
            assert reimported(store, fmt, tmp_path) == list(store.entries()), name


def test_a_text_export_reimports_paragraph_by_paragraph(tmp_path):
    with MemoryStore(tmp_path / "t.db") as store:
        import_file(store, FIX / "memories.txt", format="text")
        back = reimported(store, "text", tmp_path)
        assert [e.content for e in back] == [e.content for e in store.entries()]
        assert [e.id for e in back] == [f"export:p{n}" for n in range(1, len(back) + 1)]


def test_mem0_export_keeps_ids_hashes_metadata_and_timestamps(tmp_path):
    with MemoryStore(tmp_path / "m.db") as store:
        import_file(store, FIX / "mem0_list.json", format="mem0")
        out = io.StringIO()
        export_file(store, out, format="mem0")
    first, second, third = json.loads(out.getvalue())["results"]
    assert first == {"id": "6f1c2d3e-0001", "memory": "Likes hiking in the Alps", "hash": "a1b2c3",
                     "metadata": {"source": "chat"}, "categories": ["hobbies"],
                     "created_at": "2024-03-01T10:00:00-08:00", "updated_at": None, "user_id": "alex"}
    assert second["updated_at"] == "2024-04-11T12:00:00-07:00" and second["metadata"] == {}
    assert third["created_at"] == "2024-03-05T08:00:00Z" and "hash" not in third


# --- merged entries --------------------------------------------------------------------------


def _merge_all(store: MemoryStore) -> None:
    comp = compressor(store, OneShot(Decision("merge", None, merge_instruction="keep all", reason="same")))
    comp.run(budget_bytes=store.min_entry_json_bytes())


def test_a_merged_entry_is_written_under_its_first_source_and_chained_merges_resolve(tmp_path):
    with MemoryStore(tmp_path / "s.db") as store:
        store.add_many([
            Entry(id="a", content="Ana likes tea", metadata={"hash": "ha", "user_id": "ana"}, timestamps=("t1",)),
            Entry(id="b", content="Ana likes tea a lot", metadata={"hash": "hb"}, timestamps=("t2",)),
            Entry(id="c", content="Ana likes tea and cake", metadata={"hash": "hc"}, timestamps=("t3",)),
        ])
        _merge_all(store)
        (merged,) = store.entries()
        first, second = store.journal.decisions()
        assert second.a_id == first.created_ids[0] or second.b_id == first.created_ids[0]  # a merge of a merge
        root = second.a_id if second.a_id != first.created_ids[0] else first.a_id  # its first source, imported
        assert root in ("a", "b", "c") and merged.timestamps[0] == {"a": "t1", "b": "t2", "c": "t3"}[root]
        for fmt in ("jsonl", "mem0", "amem"):
            (back,) = reimported(store, fmt, tmp_path)
            assert back.id == root and back.content == merged.content
        out = io.StringIO()
        export_file(store, out, format="mem0")
        (record,) = json.loads(out.getvalue())["results"]
        assert record["hash"] == hashlib.md5(merged.content.encode()).hexdigest()  # of the merged text, as mem0
        assert record["created_at"] == merged.timestamps[0] and record["updated_at"] == merged.timestamps[-1]
        assert root in record["metadata"]["merged_from"]
        assert not any(m.startswith("m-") for m in record["metadata"]["merged_from"])


def test_links_to_a_merged_entry_name_its_export_id(tmp_path):
    with MemoryStore(tmp_path / "s.db") as store:
        store.add_many([Entry(id="a", content="Ana likes green tea"), Entry(id="b", content="Ana likes green tea!"),
                        Entry(id="x", content="Ben plays the cello on Thursdays", links=("b",))])
        comp = compressor(store, OneShot(Decision("merge", None, merge_instruction="keep all", reason="same")))
        comp.run(budget_bytes=store.size("json") - 10)
        assert store.get("x").links[0].startswith("m-")
        back = {e.id: e for e in reimported(store, "amem", tmp_path)}
        assert back["x"].links == ("a",)


def test_an_id_added_again_after_its_merge_is_not_taken_twice(tmp_path):
    with MemoryStore(tmp_path / "s.db") as store:
        store.add_many([Entry(id="a", content="Ana likes green tea"), Entry(id="b", content="Ana likes green tea!")])
        _merge_all(store)
        store.add(Entry(id="a", content="Ana moved to Porto"))  # the application reuses the id
        ids = [e.id for e in reimported(store, "jsonl", tmp_path)]
        assert len(ids) == len(set(ids)) == 2 and "a" in ids


# --- property: every format, every generated history --------------------------------------------


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(batch=entries(), plans=runs)
def test_every_export_reimports_as_the_store_up_to_what_its_format_cannot_hold(batch, plans):
    with tempfile.TemporaryDirectory() as tmp, MemoryStore(Path(tmp) / "s.db") as store:
        store.add_many(batch)
        play(store, plans)
        for fmt in EXPORT_FORMATS:
            assert reimported(store, fmt, Path(tmp)) == expected(store, fmt), fmt


# --- refusals and the command line ---------------------------------------------------------------


def test_an_export_to_a_missing_folder_is_refused_and_writes_nothing(tmp_path):
    with MemoryStore(tmp_path / "s.db") as store:
        store.add(Entry(id="a", content="Ana likes tea"))
        try:
            export_file(store, tmp_path / "nope" / "out.json", format="mem0")
        except ExportError as exc:
            assert "cannot write" in str(exc)
        else:
            raise AssertionError("no ExportError")
    assert not (tmp_path / "nope").exists()


def test_cli_export_writes_each_format_and_says_what_it_drops(tmp_path):
    db = tmp_path / "s.db"
    runner = CliRunner()
    assert runner.invoke(cli, ["import", "--format", "mem0", str(FIX / "mem0_results.json"), "--db", str(db)]
                         ).exit_code == 0
    for fmt in EXPORT_FORMATS:
        out = tmp_path / f"out.{fmt}"
        result = runner.invoke(cli, ["export", "--format", fmt, str(out), "--db", str(db), "--json"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout) == {"exported": 2, "output": str(out), "format": fmt}
        assert len(parse_file(out, format=fmt)[0]) == 2
    help_text = " ".join(runner.invoke(cli, ["export", "--help"]).output.split())
    assert "links, provenance" in help_text and "first source" in help_text


def test_cli_export_to_a_missing_folder_is_one_error_line(tmp_path):
    db = tmp_path / "s.db"
    CliRunner().invoke(cli, ["import", "--format", "mem0", str(FIX / "mem0_results.json"), "--db", str(db)])
    result = CliRunner().invoke(cli, ["export", "--format", "amem", str(tmp_path / "no" / "x.json"), "--db", str(db)])
    assert result.exit_code == 1 and result.stderr.count("\n") == 1 and result.stderr.startswith("Error: ")
