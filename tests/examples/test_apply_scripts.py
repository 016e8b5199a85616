"""The scripts in examples/ that apply a change set to mem0 and to A-MEM notes, against fake clients with the
same public calls (no mem0 or A-MEM installed): a round trip, a dry run, and the refusals."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from memrefine_edge.core import Decision, Entry
from memrefine_edge.store import MemoryStore, describe_changes, export_file, import_file, parse_file
from tests.support.roundtrip import FakeAMem, FakeMem0, export_records
from tests.support.stores import OneShot, compressor

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
MERGE = Decision("merge", None, merge_instruction="keep all", reason="same facts", source="llm")
DELETE_B = Decision("delete", "b", reason="contained in the other", source="rule")


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


apply_mem0, apply_amem = load("apply_mem0"), load("apply_amem")

GET_ALL = {"results": [
    {"id": f"7d2e-{n}", "memory": text, "hash": f"h{n}", "metadata": {"source": "chat"}, "user_id": "alex",
     "created_at": f"2024-05-0{n}T08:00:00Z", "updated_at": None}
    for n, text in enumerate(["Alex likes green tea in the morning", "Alex likes green tea in the morning a lot",
                              "Alex is allergic to peanuts", "Alex is allergic to peanuts and carries an EpiPen",
                              "Alex works as a nurse in Porto"], 1)
]}

NOTES = {
    "n1": {"id": "n1", "content": "Sam started learning the cello in 2023.", "keywords": ["cello"],
           "links": ["n3"], "timestamp": "202403011200", "context": "hobbies", "tags": ["music"]},
    "n2": {"id": "n2", "content": "Sam started learning the cello in 2023!", "keywords": ["cello"],
           "links": ["n1"], "timestamp": "202403021200", "context": "hobbies", "tags": ["music"]},
    "n3": {"id": "n3", "content": "Sam plays in a community orchestra on Thursdays.", "keywords": [],
           "links": ["n2"], "timestamp": "202403031500", "category": "Personal"},
    "n4": {"id": "n4", "content": "Sam's sister lives in Oslo.", "keywords": ["family"], "links": [],
           "timestamp": "202403041500"},
}


def compressed(tmp_path: Path, data: dict, fmt: str, decision: Decision) -> tuple[Path, Path]:
    """Import ``data`` (a file in ``fmt``), compress it with ``decision`` for every near-duplicate pair;
    (export, change set)."""
    src, db = tmp_path / f"source.{fmt}.json", tmp_path / f"{fmt}.db"
    src.write_text(json.dumps(data), encoding="utf-8")
    with MemoryStore(db) as store:
        import_file(store, src, format=fmt)
        compressor(store, OneShot(decision), k=2, min_similarity=0.75).run(budget=0.6)
        export, changes = tmp_path / f"export.{fmt}.json", tmp_path / f"changes.{fmt}.jsonl"
        export_file(store, export, format=fmt)
        describe_changes(store, format=fmt).write(changes)
    return export, changes


# --- mem0 ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("takes_metadata", [True, False], ids=["update-with-metadata", "update-text-only"])
def test_mem0_through_the_change_set_ends_as_the_export(tmp_path, capsys, takes_metadata):
    export, changes = compressed(tmp_path, GET_ALL, "mem0", MERGE)
    memory = FakeMem0(GET_ALL["results"], takes_metadata=takes_metadata)
    assert apply_mem0.main([str(changes)], memory=memory) == 0
    got = {m["id"]: m for m in memory.get_all()["results"]}
    want = {r["id"]: r for r in json.loads(export.read_text())["results"]}
    assert set(got) == set(want) and len(got) < len(GET_ALL["results"])
    for memory_id, record in want.items():
        assert got[memory_id]["memory"] == record["memory"]
        assert got[memory_id]["hash"] == record["hash"]  # mem0's own hash of the merged text, as exported
        if takes_metadata:
            assert got[memory_id]["metadata"] == record["metadata"]
    out = capsys.readouterr().out
    assert "done   update" in out and "done   delete" in out and "skipped 0" in out
    # and the memories re-imported from the fake are those of the export
    again = tmp_path / "again.json"
    again.write_text(json.dumps(memory.get_all()), encoding="utf-8")
    assert [e.content for e in parse_file(again, format="mem0")[0]] == [
        e.content for e in sorted(parse_file(export, format="mem0")[0], key=lambda e: list(got).index(e.id))]


def test_mem0_dry_run_prints_what_it_would_do_and_changes_nothing(tmp_path, capsys):
    _, changes = compressed(tmp_path, GET_ALL, "mem0", MERGE)
    memory = FakeMem0(GET_ALL["results"])
    assert apply_mem0.main([str(changes), "--dry-run"], memory=memory) == 0
    assert memory.calls == [] and memory.get_all() == FakeMem0(GET_ALL["results"]).get_all()
    out = capsys.readouterr().out
    assert "would  update" in out and "would  delete" in out and "would apply" in out


def test_mem0_a_memory_changed_since_the_import_is_skipped_with_its_group(tmp_path, capsys):
    _, changes = compressed(tmp_path, GET_ALL, "mem0", MERGE)
    ops = [json.loads(line) for line in changes.read_text().splitlines()[1:]]
    victim = next(op for op in ops if op["op"] == "delete")
    results = [dict(r, memory="Alex changed this one by hand") if r["id"] == victim["id"] else r
               for r in GET_ALL["results"]]
    memory = FakeMem0(results)
    assert apply_mem0.main([str(changes)], memory=memory) == 0
    touched = {memory_id for _, memory_id in memory.calls}
    assert touched == {op["id"] for op in ops if op["group"] != victim["group"]} != set()  # the other merge only
    assert memory.get(victim["id"])["memory"] == "Alex changed this one by hand"
    assert f"skip   delete {victim['id']}" in capsys.readouterr().out


@pytest.mark.parametrize("case", ["another store", "applied twice", "wrong format", "not a change set"])
def test_mem0_bad_input_is_one_error_line_and_applies_nothing(tmp_path, capsys, case):
    _, changes = compressed(tmp_path, GET_ALL, "mem0", MERGE)
    memory = FakeMem0(GET_ALL["results"])
    if case == "another store":
        memory = FakeMem0([{"id": f"other-{n}", "memory": "another user's memory"} for n in range(3)])
    elif case == "applied twice":
        assert apply_mem0.main([str(changes)], memory=memory) == 0
    elif case == "wrong format":
        with MemoryStore(tmp_path / "mem0.db") as store:
            describe_changes(store, format="jsonl").write(changes)
    else:
        changes.write_text('{"id": "7d2e-1", "memory": "not a change set"}\n', encoding="utf-8")
    capsys.readouterr()
    before = memory.get_all()
    calls = list(memory.calls)
    assert apply_mem0.main([str(changes)], memory=memory) == 1
    err = capsys.readouterr().err
    assert err.startswith("Error: ") and err.count("\n") == 1
    assert memory.get_all() == before and memory.calls == calls


# --- A-MEM --------------------------------------------------------------------------------------


def _note(note) -> dict:
    fields = ("id", "content", "keywords", "links", "timestamp", "context", "tags", "category")
    got = {k: getattr(note, k) if not isinstance(note, dict) else note.get(k) for k in fields}
    return {k: v for k, v in got.items() if v not in (None, "", [])}


def test_amem_system_through_the_change_set_ends_as_the_export(tmp_path, capsys):
    export, changes = compressed(tmp_path, NOTES, "amem", MERGE)
    system = FakeAMem(list(NOTES.values()))
    assert apply_amem.apply(system, apply_amem.read_changes(changes)).skipped == []
    want = json.loads(export.read_text())
    assert {i: _note(n) for i, n in system.memories.items()} == {i: _note(n) for i, n in want.items()}
    assert len(system.memories) < len(NOTES)


def test_amem_notes_file_round_trips_and_keeps_its_shape(tmp_path, capsys):
    export, changes = compressed(tmp_path, NOTES, "amem", DELETE_B)
    notes = tmp_path / "notes.json"
    notes.write_text(json.dumps(NOTES), encoding="utf-8")
    assert apply_amem.main([str(changes), "--notes", str(notes), "--dry-run"]) == 0
    assert json.loads(notes.read_text()) == NOTES and "would  delete" in capsys.readouterr().out
    assert apply_amem.main([str(changes), "--notes", str(notes)]) == 0
    applied = json.loads(notes.read_text())
    assert set(applied) < set(NOTES) and all(applied[i]["id"] == i for i in applied)  # {id: note}, as it was
    assert parse_file(notes, format="amem")[0] == parse_file(export, format="amem")[0]


def test_amem_change_set_for_another_store_applies_nothing(tmp_path, capsys):
    _, changes = compressed(tmp_path, NOTES, "amem", MERGE)
    other = {"z": {"id": "z", "content": "Someone else's note", "links": []}}
    notes = tmp_path / "other.json"
    notes.write_text(json.dumps(other), encoding="utf-8")
    assert apply_amem.main([str(changes), "--notes", str(notes)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Error: ") and err.count("\n") == 1 and "another store" in err
    assert json.loads(notes.read_text()) == other


def test_a_change_set_reads_the_same_after_a_store_export(tmp_path):
    """The change set of the example stores names every id the user imported, none of the store's own."""
    with MemoryStore(tmp_path / "s.db") as store:
        store.add_many([Entry(id=i, content=n["content"]) for i, n in NOTES.items()])
        compressor(store, OneShot(MERGE), k=2).run(budget=0.6)
        ids = {c.id for c in describe_changes(store, format="amem").changes}
        assert ids and ids <= set(NOTES) and {r["id"] for r in export_records(store, "amem")} <= set(NOTES)
