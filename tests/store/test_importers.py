"""Importers, the jsonl exporter, the bundled sample and the store CLI commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import memrefine_edge.cli._store_cmds  # noqa: F401  (registers the store commands on `cli`)
from memrefine_edge.cli import cli
from memrefine_edge.core import (
    MAX_CONTENT_CHARS,
    DuplicateIdError,
    Entry,
    ImportFormatError,
    InvalidEntryError,
    MemRefineError,
)
from memrefine_edge.store import (
    ImportReport,
    MemoryStore,
    export_jsonl,
    import_file,
    load_sample,
    parse_file,
    sample_path,
)
from memrefine_edge.store import _formats as importers
from memrefine_edge.testing import HashEncoder

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "importers"


def _write(tmp_path: Path, name: str, data: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return path


def _line(**fields) -> str:
    return json.dumps(fields, ensure_ascii=False)


# --- formats -------------------------------------------------------------------


def test_mem0_list(tmp_store):
    report = import_file(tmp_store, FIX / "mem0_list.json", format="mem0")
    assert isinstance(report, ImportReport) and report.imported == 3 and report.skipped == 0
    a, b, c = tmp_store.entries()
    assert a.id == "6f1c2d3e-0001" and a.content == "Likes hiking in the Alps"
    assert a.timestamps == ("2024-03-01T10:00:00-08:00",)  # updated_at null is left out
    assert a.keywords == ("hobbies",)
    assert a.metadata == {"source": "chat", "hash": "a1b2c3", "user_id": "alex"}
    assert b.timestamps == ("2024-03-02T09:30:00-08:00", "2024-04-11T12:00:00-07:00")
    assert b.content == "Allergic to peanuts — carries an EpiPen"
    assert c.content == "Prefers tea over coffee"  # "text" instead of "memory"
    assert c.timestamps == ("2024-03-05T08:00:00Z",)  # equal created/updated kept once
    assert all(e.links == () and e.provenance == () for e in (a, b, c))


def test_mem0_results_object(tmp_store):
    import_file(tmp_store, FIX / "mem0_results.json", format="mem0")
    assert tmp_store.ids() == ["m-1", "m-2"]
    assert tmp_store.get("m-2").metadata == {"confidence": 0.9, "hash": "h2"}


def test_amem_notes_links_and_metadata(tmp_store):
    report = import_file(tmp_store, FIX / "amem_notes.json", format="amem")
    # n1 -> "ghost" and n2 -> position 7 do not exist: dropped and counted.
    assert report.imported == 3 and report.dropped_links == 2 and report.skipped == 0
    assert dict(report.reasons) == {"link to a missing note": 2}
    n1, n2, n3 = (tmp_store.get(i) for i in ("n1", "n2", "n3"))
    assert n1.links == ("n2",)
    assert n2.links == ("n1", "n3")  # integer links are 0-based positions in the file
    assert n1.keywords == ("cello", "music")  # the empty keyword is dropped
    assert n1.timestamps == ("202403011200",)
    assert n1.metadata == {
        "last_accessed": "202403051800",
        "context": "hobbies",
        "tags": ["music"],
        "category": "Personal",
        "retrieval_count": 2,
    }
    assert n2.metadata == {"last_accessed": "202403021000"}  # empty context/tags left out
    assert n3.metadata == {} and n3.keywords == ()  # the stored embedding is ignored
    assert n2.content == "Sam's cello teacher is called Mrs. Øvrebø."


def test_amem_id_mapping_and_self_links(tmp_store):
    import_file(tmp_store, FIX / "amem_dict.json", format="amem")
    assert tmp_store.get("a").links == ("b",)
    assert tmp_store.get("b").links == ("a",)  # the self-link b -> b carries nothing


def test_text_paragraphs(tmp_store):
    report = import_file(tmp_store, FIX / "memories.txt", format="text")
    assert report.imported == 3
    entries = list(tmp_store.entries())
    assert [e.id for e in entries] == ["memories:p1", "memories:p2", "memories:p3"]
    assert entries[0].content == "Alex likes hiking in the Alps and goes every summer.\nHe usually stays in Zermatt."
    assert entries[2].content == "Alex prefers tea — especially genmaicha — over coffee."
    assert all(e.provenance == () and e.timestamps == () and e.metadata == {} for e in entries)


def test_text_crlf(tmp_path, tmp_store):
    path = _write(tmp_path, "w.txt", "one\r\ntwo\r\n\r\nthree\r\n")
    import_file(tmp_store, path, format="text")
    assert [e.content for e in tmp_store.entries()] == ["one\ntwo", "three"]


def test_jsonl_round_trip_is_lossless(tmp_path, tmp_store):
    import_file(tmp_store, FIX / "entries.jsonl", format="jsonl")
    original = list(tmp_store.entries())
    assert original[0].links == ("e3", "e2")  # order kept, even a forward link
    assert "\u2028" in original[1].content
    out = tmp_path / "out.jsonl"
    assert export_jsonl(tmp_store, out) == 3
    with MemoryStore(tmp_path / "copy.db") as copy:
        import_file(copy, out, format="jsonl")
        assert list(copy.entries()) == original
        assert copy.json_bytes() == tmp_store.json_bytes()
        again = tmp_path / "again.jsonl"
        export_jsonl(copy, again)
    assert again.read_bytes() == out.read_bytes()
    # Every line is the entry's counted fields: json_bytes is exactly the export minus newlines.
    assert len(out.read_bytes()) - 3 == tmp_store.json_bytes()


def test_jsonl_defaults_and_entry_json(tmp_path, tmp_store):
    path = _write(tmp_path, "m.jsonl", _line(id="x", content="minimal") + "\n")
    import_file(tmp_store, path, format="jsonl")
    e = tmp_store.get("x")
    assert e == Entry(id="x", content="minimal")
    assert importers.entry_from_json(importers.entry_to_json(e)) == e


# --- LoCoMo (real shared files) ---------------------------------------------------


@pytest.mark.locomo
def test_locomo_turns_one_sample(locomo_dir, tmp_store):
    data = json.loads((locomo_dir / "locomo-dev.json").read_text())
    sample = next(s for s in data if s["sample_id"] == "conv-26")
    conv = sample["conversation"]
    turns = [(k, t) for k, v in conv.items() if k.startswith("session_") and isinstance(v, list) for t in v]
    report = import_file(tmp_store, locomo_dir / "locomo-dev.json", format="locomo-turns", sample_id="conv-26")
    assert report.imported == len(turns) == len(tmp_store)
    sessions = {k for k, _ in turns}
    assert tmp_store.stats().links == len(turns) - len(sessions)  # a chain per session
    key, first = turns[0]
    e = tmp_store.get(f"conv-26:{first['dia_id']}")
    assert e.content == f"{first['speaker']}: {first['text'].strip()}"
    assert e.timestamps == (conv[f"{key}_date_time"],)
    assert e.provenance == (first["dia_id"],) and e.links == ()
    assert e.metadata == {"sample_id": "conv-26", "session": int(key.split("_")[1]), "speaker": first["speaker"]}
    second = tmp_store.get(f"conv-26:{turns[1][1]['dia_id']}")
    assert second.links == (e.id,)
    key, img = next((k, t) for k, t in turns if t.get("blip_caption"))
    assert tmp_store.get(f"conv-26:{img['dia_id']}").content.endswith(f"[shares a photo: {img['blip_caption']}]")


@pytest.mark.locomo
def test_locomo_turns_all_samples_unique(locomo_dir):
    data = json.loads((locomo_dir / "locomo-dev.json").read_text())
    entries, _ = parse_file(locomo_dir / "locomo-dev.json", format="locomo-turns")
    total = sum(len(v) for s in data for k, v in s["conversation"].items() if k.startswith("session_") and isinstance(v, list))
    assert len(entries) == total == len({e.id for e in entries})
    assert {e.metadata["sample_id"] for e in entries} == {s["sample_id"] for s in data}


@pytest.mark.locomo
def test_locomo_observations(locomo_dir, tmp_store):
    data = json.loads((locomo_dir / "locomo-dev.json").read_text())
    obs = next(s for s in data if s["sample_id"] == "conv-30")["observation"]
    facts = [f for sess in obs.values() for per in sess.values() for f in per]
    import_file(tmp_store, locomo_dir / "locomo-dev.json", format="locomo-observations", sample_id="conv-30")
    entries = list(tmp_store.entries())
    assert len(entries) == len(facts)
    by_content = {e.content: e for e in entries}
    multi = next(f for f in facts if isinstance(f[1], list))
    assert by_content[multi[0].strip()].provenance == tuple(dict.fromkeys(multi[1]))
    single = next(f for f in facts if isinstance(f[1], str))
    assert by_content[single[0].strip()].provenance == (single[1],)
    assert all(e.links == () and e.timestamps for e in entries)


@pytest.mark.locomo
def test_locomo_mem0_style_text(locomo_dir, tmp_store):
    path = locomo_dir / "mem0-style-stores" / "conv-26.txt"
    paragraphs = [p for p in path.read_text().replace("\r\n", "\n").split("\n\n") if p.strip()]
    import_file(tmp_store, path, format="text")
    assert len(tmp_store) == len(paragraphs)
    assert tmp_store.get("conv-26:p1").content == paragraphs[0].strip()


def test_locomo_missing_sample(tmp_path, tmp_store):
    doc = [{"sample_id": "s1", "conversation": {"speaker_a": "A", "speaker_b": "B"}}]
    path = _write(tmp_path, "l.json", json.dumps(doc))
    with pytest.raises(ImportFormatError, match="no sample 'conv-99'.*s1"):
        import_file(tmp_store, path, format="locomo-turns", sample_id="conv-99")
    doc.append({"conversation": {}})
    path = _write(tmp_path, "l2.json", json.dumps(doc))
    with pytest.raises(ImportFormatError, match="record 2.*sample_id") as info:
        import_file(tmp_store, path, format="locomo-turns")
    assert info.value.line == 2


def test_locomo_synthetic_turns(tmp_path, tmp_store):
    conv = {
        "speaker_a": "A",
        "speaker_b": "B",
        "session_2_date_time": "d2",
        "session_2": [{"speaker": "A", "dia_id": "D2:1", "text": "later"}],
        "session_1_date_time": "d1",
        "session_1": [
            {"speaker": "A", "dia_id": "D1:1", "text": "hi"},
            {"speaker": "B", "dia_id": "D1:2", "text": "", "blip_caption": "a cat"},
            {"speaker": "A", "dia_id": "D1:3", "text": "   "},
        ],
    }
    path = _write(tmp_path, "l.json", json.dumps({"sample_id": "x", "conversation": conv}))
    report = import_file(tmp_store, path, format="locomo-turns")
    assert tmp_store.ids() == ["x:D1:1", "x:D1:2", "x:D2:1"]  # sessions in numeric order
    assert tmp_store.get("x:D1:2").content == "B: [shares a photo: a cat]"
    assert tmp_store.get("x:D2:1").links == ()  # chains do not cross sessions
    assert report.skipped == 1 and dict(report.reasons) == {"empty turn (no text, no photo caption)": 1}


# --- bad input: a clear error and nothing written ------------------------------------


def _assert_nothing_written(store: MemoryStore) -> None:
    assert len(store) == 0 and store.json_bytes() == 0 and store.stats().links == 0


BAD_JSONL = [
    ("malformed JSON", '{"id": "a", "content": "ok"}\n{"id": "b", "content": \n', ImportFormatError, 2, "malformed"),
    ("not an object", '{"id": "a", "content": "ok"}\n["b", "c"]\n', ImportFormatError, 2, "object"),
    ("links is a string", _line(id="a", content="x", links="b"), ImportFormatError, 1, "'links' must be a list"),
    ("metadata is a list", _line(id="a", content="x", metadata=[1]), ImportFormatError, 1, "'metadata'"),
    ("content is a number", _line(id="a", content=5), ImportFormatError, 1, "'content' must be a string"),
    ("id missing", _line(content="x"), ImportFormatError, 1, "missing 'id'"),
    ("unknown key", _line(id="a", content="x", timestamp="t"), ImportFormatError, 1, "'timestamp'"),
    ("empty content", _line(id="a", content="ok") + "\n" + _line(id="b", content="  "), InvalidEntryError, 2, "empty"),
    ("NUL", _line(id="a", content="a\x00b"), InvalidEntryError, 1, "NUL"),
    ("lone surrogate", '{"id": "a", "content": "\\ud800"}', InvalidEntryError, 1, "Unicode"),
    ("NaN metadata", '{"id": "a", "content": "x", "metadata": {"v": NaN}}', InvalidEntryError, 1, "JSON"),
]


@pytest.mark.parametrize("name,text,exc,line,match", BAD_JSONL, ids=[b[0] for b in BAD_JSONL])
def test_bad_jsonl(tmp_path, tmp_store, name, text, exc, line, match):
    path = _write(tmp_path, "bad.jsonl", text + "\n")
    with pytest.raises(exc, match=match) as info:
        import_file(tmp_store, path, format="jsonl")
    assert isinstance(info.value, MemRefineError)
    assert f"line {line}" in str(info.value)
    _assert_nothing_written(tmp_store)


def test_non_utf8(tmp_path, tmp_store):
    path = _write(tmp_path, "bad.jsonl", _line(id="a", content="ok").encode() + b'\n{"id": "b", "content": "caf\xe9"}\n')
    with pytest.raises(ImportFormatError, match="not valid UTF-8") as info:
        import_file(tmp_store, path, format="jsonl")
    assert info.value.line == 2
    path = _write(tmp_path, "bad.txt", b"fine\n\nalso fine\n\xff\xfe broken\n")
    with pytest.raises(ImportFormatError, match="line 4"):
        import_file(tmp_store, path, format="text")
    _assert_nothing_written(tmp_store)


def test_utf8_bom_is_not_content(tmp_path, tmp_store):
    path = _write(tmp_path, "bom.txt", "\ufeffhello\n".encode())
    import_file(tmp_store, path, format="text")
    assert tmp_store.get("bom:p1").content == "hello"


def test_nul_in_text_file(tmp_path, tmp_store):
    path = _write(tmp_path, "n.txt", b"ok\n\nnul\x00here\n")
    with pytest.raises(InvalidEntryError, match="line 3 .paragraph 2.*NUL"):
        import_file(tmp_store, path, format="text")
    _assert_nothing_written(tmp_store)


def test_ten_megabyte_entry(tmp_path, tmp_store):
    big = "x" * 10_000_000
    path = _write(tmp_path, "big.jsonl", _line(id="ok", content="fine") + "\n" + _line(id="big", content=big) + "\n")
    with pytest.raises(InvalidEntryError, match=f"line 2.*10,000,000 characters; the limit is {MAX_CONTENT_CHARS:,}"):
        import_file(tmp_store, path, format="jsonl")
    _assert_nothing_written(tmp_store)


def test_duplicate_ids_in_file(tmp_path, tmp_store):
    text = "\n".join(_line(id=i, content=f"c{n}") for n, i in enumerate(["a", "b", "a"]))
    with pytest.raises(DuplicateIdError, match="'a' appears twice.*records 1 and 3"):
        import_file(tmp_store, _write(tmp_path, "d.jsonl", text), format="jsonl")
    dup = [{"id": "m", "memory": "one"}, {"id": "m", "memory": "two"}]
    with pytest.raises(DuplicateIdError):
        import_file(tmp_store, _write(tmp_path, "d.json", json.dumps(dup)), format="mem0")
    _assert_nothing_written(tmp_store)


def test_duplicate_ids_against_store(tmp_path, tmp_store):
    import_file(tmp_store, FIX / "entries.jsonl", format="jsonl")
    before = (tmp_store.ids(), tmp_store.json_bytes(), tmp_store.disk_bytes())
    text = _line(id="new", content="n") + "\n" + _line(id="e2", content="again")
    with pytest.raises(DuplicateIdError, match="'e2' is already in the store"):
        import_file(tmp_store, _write(tmp_path, "d.jsonl", text), format="jsonl")
    assert (tmp_store.ids(), tmp_store.json_bytes(), tmp_store.disk_bytes()) == before


def test_unknown_links_jsonl(tmp_path, tmp_store):
    text = _line(id="a", content="x", links=["b", "nowhere"]) + "\n" + _line(id="b", content="y", links=["old"])
    path = _write(tmp_path, "u.jsonl", text)
    with pytest.raises(InvalidEntryError, match="unknown id 'nowhere'"):
        import_file(tmp_store, path, format="jsonl")
    _assert_nothing_written(tmp_store)
    tmp_store.add(Entry(id="old", content="already stored"))
    report = import_file(tmp_store, path, format="jsonl", drop_unknown_links=True)
    assert report.dropped_links == 1 and dict(report.reasons) == {"link to an unknown id": 1}
    assert tmp_store.get("a").links == ("b",)
    assert tmp_store.get("b").links == ("old",)  # a link into the existing store is kept


@pytest.mark.parametrize(
    "fmt,doc,match",
    [
        ("mem0", {"data": []}, "expected a mem0 export"),
        ("mem0", [["not", "an", "object"]], "record 1: a mem0 memory must be an object"),
        ("mem0", [{"id": "a", "memory": 3}], "'memory' must be a string"),
        ("mem0", [{"id": "a"}], "missing 'memory' or 'text'"),
        ("mem0", [{"memory": "m"}], "missing 'id'"),
        ("mem0", [{"id": "a", "memory": "m", "metadata": "x"}], "'metadata' must be an object"),
        ("mem0", [{"id": "a", "memory": "m", "created_at": 5}], "'created_at' must be a string"),
        ("amem", [{"id": "a", "content": "c", "links": "b"}], "'links' must be a list"),
        ("amem", [{"id": "a", "content": "c", "links": [1.5]}], "a link must be"),
        ("amem", [{"id": "a", "content": "c", "keywords": "k"}], "'keywords' must be a list"),
        ("amem", "just a string", "expected A-MEM notes"),
        ("locomo-turns", {"x": 1}, "expected a list of LoCoMo samples"),
        ("locomo-turns", [{"sample_id": "s", "conversation": {"session_1": "oops"}}], "must be a list of turns"),
        ("locomo-turns", [{"sample_id": "s", "conversation": {"session_1": [{"text": "t"}]}}], "needs string"),
        ("locomo-observations", [{"sample_id": "s", "conversation": {}}], "no 'observation'"),
        (
            "locomo-observations",
            [{"sample_id": "s", "conversation": {}, "observation": {"session_1_observation": {"A": [["f", 3]]}}}],
            "evidence must be",
        ),
    ],
)
def test_wrong_json_types(tmp_path, tmp_store, fmt, doc, match):
    with pytest.raises(ImportFormatError, match=match):
        import_file(tmp_store, _write(tmp_path, "w.json", json.dumps(doc)), format=fmt)
    _assert_nothing_written(tmp_store)


def test_empty_content_in_json_formats(tmp_path, tmp_store):
    with pytest.raises(InvalidEntryError, match="record 2.*empty"):
        import_file(tmp_store, _write(tmp_path, "e.json", json.dumps([{"id": "a", "memory": "m"}, {"id": "b", "memory": ""}])), format="mem0")
    _assert_nothing_written(tmp_store)


def test_invalid_json_document(tmp_path, tmp_store):
    with pytest.raises(ImportFormatError, match="line 3: w.json is not valid JSON"):
        import_file(tmp_store, _write(tmp_path, "w.json", '[\n{"id": "a", "memory": "m"},\n}'), format="mem0")


def test_unknown_format_and_misc(tmp_path, tmp_store):
    with pytest.raises(ImportFormatError, match="unknown format 'csv'"):
        import_file(tmp_store, FIX / "memories.txt", format="csv")
    with pytest.raises(ImportFormatError, match="--sample only applies"):
        import_file(tmp_store, FIX / "memories.txt", format="text", sample_id="conv-26")
    with pytest.raises(ImportFormatError, match="cannot read"):
        import_file(tmp_store, tmp_path / "missing.jsonl", format="jsonl")


class _FailingEncoder(HashEncoder):
    def embed_batch(self, texts):
        raise RuntimeError("encoder crashed")


def test_embed_failure_rolls_back_the_import(tmp_store):
    with pytest.raises(RuntimeError):
        import_file(tmp_store, FIX / "memories.txt", format="text", encoder=_FailingEncoder())
    _assert_nothing_written(tmp_store)
    report = import_file(tmp_store, FIX / "memories.txt", format="text", encoder=HashEncoder())
    assert report.embedded == 3 and tmp_store.stats().embedded == 3


# --- bundled sample ---------------------------------------------------------------------


def test_bundled_sample(tmp_store):
    assert sample_path().is_file()
    report = load_sample(tmp_store)
    entries = list(tmp_store.entries())
    assert 80 <= report.imported == len(entries) <= 120
    assert {e.metadata["speaker"] for e in entries} == {"Priya", "Tomás"}
    assert len({e.metadata["session"] for e in entries}) >= 4
    assert all(e.timestamps and e.provenance == (e.id,) for e in entries)
    # A chain per session: every entry but the first of its session links to its predecessor.
    firsts = [e for e in entries if not e.links]
    assert len(firsts) == len({e.metadata["session"] for e in entries})
    fillers = [e for e in entries if e.content.split(": ", 1)[1] in {"Thanks!", "Haha, nice", "Talk soon!", "Bye!"}]
    assert len(fillers) >= 8
    # The sample is ours, not LoCoMo's: no LoCoMo speaker names or dia_ids.
    assert not any(e.provenance[0].startswith("D") for e in entries)


# --- CLI ---------------------------------------------------------------------------------


@pytest.fixture
def run(monkeypatch):
    monkeypatch.delenv("MEMREFINE_DB", raising=False)
    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(cli, [str(a) for a in args], catch_exceptions=False)

    return invoke


def test_cli_import_stats_export(tmp_path, run):
    db = tmp_path / "m.db"
    res = run("import", "--format", "jsonl", sample_path(), "--db", db, "--json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["imported"] == data["entries"] and data["embedded"] == 0
    stats = json.loads(run("stats", "--db", db, "--json").stdout)
    for key in ("entries", "json_bytes", "disk_bytes", "embedding_bytes", "links"):
        assert isinstance(stats[key], int)
    assert stats["entries"] == data["imported"] and stats["embedding_bytes"] == 0  # import does not embed
    human = run("stats", "--db", db).stdout
    assert "json_bytes" in human and "disk_bytes" in human and "links" in human
    checked = json.loads(run("stats", "--db", db, "--recount", "--json").stdout)
    assert checked["recount"] == "totals equal a full recount" and checked["json_bytes"] == stats["json_bytes"]
    out = tmp_path / "out.jsonl"
    assert run("export", "--db", db, out).exit_code == 0
    assert out.read_text(encoding="utf-8") == sample_path().read_text(encoding="utf-8")
    stdout_export = run("export", "--db", db).stdout
    assert stdout_export == sample_path().read_text(encoding="utf-8")


def test_cli_format_list_matches_library():
    from memrefine_edge.cli import _store_cmds as store_cmds

    assert store_cmds._FORMATS == importers.FORMATS


def test_cli_errors(tmp_path, run):
    db = tmp_path / "m.db"
    res = run("stats", "--db", db)
    assert res.exit_code == 1 and "no memory store" in res.stderr and not db.exists()
    assert run("search", "x", "--db", db).exit_code == 1 and not db.exists()
    assert run("import", "--format", "jsonl", FIX / "entries.jsonl", "--db", db).exit_code == 0
    res = run("import", "--format", "jsonl", FIX / "entries.jsonl", "--db", db)
    assert res.exit_code == 1 and res.stderr.startswith("Error: id 'e1' is already in the store")
    assert run("import", "--format", "csv", FIX / "entries.jsonl", "--db", db).exit_code == 2
    fresh = tmp_path / "fresh.db"
    res = run("import", "--format", "mem0", FIX / "entries.jsonl", "--db", fresh)
    assert res.exit_code == 1 and res.stderr.startswith("Error: line 2: entries.jsonl is not valid JSON")
    assert not fresh.exists()  # a failed import into a new file leaves no empty store behind


def test_cli_search_with_fake_encoder(tmp_path, run):
    from memrefine_edge.testing import FakeBackends

    db = tmp_path / "m.db"
    run("import", "--format", "jsonl", sample_path(), "--db", db)
    res = CliRunner().invoke(cli, ["search", "half marathon finish time", "-k", "3", "--db", str(db), "--json"],
                             catch_exceptions=False, obj=FakeBackends())
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert len(data["results"]) == 3 and data["model"] == "hash-bow"
    assert [r["rank"] for r in data["results"]] == [1, 2, 3]
    assert data["results"][0]["score"] >= data["results"][-1]["score"]
    assert any("marathon" in r["content"].lower() for r in data["results"])


def test_cli_refuses_a_foreign_database_untouched(tmp_path, run):
    import sqlite3

    app = tmp_path / "app.db"
    with sqlite3.connect(app) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    conn.close()
    before = app.read_bytes()
    for args in (("stats",), ("export",), ("log",), ("import", "--format", "jsonl", FIX / "entries.jsonl")):
        res = run(*args, "--db", app)
        assert res.exit_code == 1 and "another application" in res.stderr, (args, res.output)
    empty = tmp_path / "empty.db"
    empty.touch()
    assert run("stats", "--db", empty).exit_code == 1 and empty.read_bytes() == b""
    assert app.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["app.db", "empty.db"]


def test_cli_read_only_commands_write_nothing(tmp_path, run):
    db = tmp_path / "m.db"
    assert run("import", "--format", "jsonl", FIX / "entries.jsonl", "--db", db).exit_code == 0
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    for args in (("stats",), ("export",), ("log",)):
        assert run(*args, "--db", db).exit_code == 0
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_a_failed_import_never_deletes_a_store_another_process_created(tmp_path):
    """Process A imports a large file that fails at its last line into a new path; meanwhile
    process B creates the store there and commits. A's failure must leave B's store whole."""
    import subprocess
    import sys
    import time

    bad = tmp_path / "bad.jsonl"
    with open(bad, "w") as fh:
        for i in range(150_000):
            fh.write(json.dumps({"id": f"t{i}", "content": f"note {i}"}) + "\n")
        fh.write(json.dumps({"id": "x", "content": 5}) + "\n")
    db = tmp_path / "new.db"
    cmd = [sys.executable, "-m", "memrefine_edge", "import", "--db", str(db), "--format", "jsonl"]
    a = subprocess.Popen([*cmd, str(bad)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while a.poll() is None and not any(p.name != "bad.jsonl" for p in tmp_path.iterdir()):
        assert time.monotonic() < deadline
        time.sleep(0.02)  # A has started writing (its file, or the store itself)
    b = subprocess.run([*cmd, str(FIX / "entries.jsonl"), "--json"], capture_output=True, text=True, timeout=120)
    assert b.returncode == 0, b.stderr
    _, a_err = a.communicate(timeout=300)
    assert a.returncode == 1 and "Error:" in a_err
    with MemoryStore(db, create=False) as store:
        assert len(store) == json.loads(b.stdout)["imported"] > 0
        assert "x" not in store and "t0" not in store
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".new.db")]  # A cleaned up its own file
