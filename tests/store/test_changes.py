"""Change sets: applied in order to the store as imported, they leave exactly what export writes after the runs;
an operation whose memory is missing or changed is skipped with its group; bad input is one clear error."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, event, given, settings

from memrefine_edge.cli import cli
from memrefine_edge.core import ChangeSetError, Decision, Entry, OptionConflictError, RunNotFoundError, content_hash
from memrefine_edge.store import (
    CHANGE_FORMATS,
    ChangeSet,
    MemoryStore,
    apply_to_records,
    describe_changes,
    import_file,
    parse_file,
    read_changes,
)
from memrefine_edge.testing import FakeBackends, HashEncoder
from tests.support.fakes import ConcatMerger, ScriptedMethod
from tests.support.roundtrip import FORMATS, by_id, entries, export_records, play, runs
from tests.support.stores import OneShot, compressor

MERGE = Decision("merge", None, merge_instruction="keep all", reason="same facts", source="llm")


def roundtrip(records: list[dict], changes: ChangeSet) -> list[dict]:
    """``changes`` applied to ``records``, through the file the change set is written to."""
    text = "".join(changes.lines())
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "changes.jsonl"
        path.write_text(text, encoding="utf-8")
        read = read_changes(path)
    assert read == changes
    return apply_to_records(records, read)[0]


# --- the property ---------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(batch=entries(), plans=runs)
def test_a_change_set_carries_the_import_to_the_compressed_export(batch, plans):
    with tempfile.TemporaryDirectory() as tmp, MemoryStore(Path(tmp) / "s.db") as store:
        store.add_many(batch)
        imported = {fmt: export_records(store, fmt) for fmt in FORMATS}
        history = play(store, plans)
        final = {fmt: export_records(store, fmt) for fmt in FORMATS}
        _events(store, history)
        for fmt in CHANGE_FORMATS:
            every = describe_changes(store, format=fmt)
            assert every.runs == tuple(history.runs)
            assert by_id(roundtrip(imported[fmt], every)) == by_id(final[fmt]), fmt
            for run_id in history.runs:  # each run alone, from the export before it to the one after it
                one = describe_changes(store, [run_id], format=fmt)
                after = roundtrip(history.before[run_id][fmt], one)
                assert by_id(after) == by_id(history.after[run_id][fmt]), (fmt, run_id)
            for run_id in history.undone:  # undone runs: no operations
                assert describe_changes(store, [run_id], format=fmt).changes == ()
        for change in every.changes:  # every operation says who decided what
            if change.action != "relink":
                assert change.run in history.runs and change.step is not None and change.source


def _events(store: MemoryStore, history) -> None:
    """What the generated history held (``--hypothesis-show-statistics``): merges, merges of merges, ..."""
    decisions = [d for d in store.journal.decisions() if d.run_id in history.runs]
    created = {c for d in decisions for c in d.created_ids}
    event(f"runs {len(history.runs)}, undone {len(history.undone)}")
    for action in ("delete", "merge", "evict"):
        event(f"{action}: {'yes' if any(d.action == action for d in decisions) else 'no'}")
    event(f"merge of a merge: {'yes' if any(d.a_id in created or d.b_id in created for d in decisions) else 'no'}")


# --- merges, chains, evictions, undo -------------------------------------------------------------------


def _store(path: Path) -> MemoryStore:
    store = MemoryStore(path)
    store.add_many([
        Entry(id="a", content="Ana likes green tea", metadata={"hash": "ha"}, timestamps=("t1",)),
        Entry(id="b", content="Ana likes green tea!", metadata={"hash": "hb"}, timestamps=("t2",)),
        Entry(id="c", content="Ana likes green tea and cake", metadata={"hash": "hc"}, timestamps=("t3",)),
        Entry(id="d", content="Ben plays the cello on Thursdays", links=("b",)),
    ])
    return store


def test_a_merge_is_an_update_of_its_first_source_and_deletes_of_the_others(tmp_path):
    with _store(tmp_path / "s.db") as store:
        compressor(store, OneShot(MERGE)).run(budget_bytes=store.min_entry_json_bytes())
        merges = [d for d in store.journal.decisions() if d.action == "merge"]
        changes = describe_changes(store, format="mem0")
    assert len(merges) >= 2  # merges of merges
    (carrier,) = [c for c in changes.changes if c.op == "update"]
    deleted = [c for c in changes.changes if c.op == "delete"]
    assert {carrier.id, *(c.id for c in deleted)} == {"a", "b", "c", "d"}
    assert all(c.into == carrier.id and c.action == "merge" for c in deleted)
    assert sorted(carrier.merged_from) == ["a", "b", "c", "d"]
    assert carrier.action == "merge" and carrier.source == "llm" and carrier.reason == "same facts"
    assert carrier.record["id"] == carrier.id and carrier.text == carrier.record["memory"]
    assert carrier.metadata == carrier.record["metadata"] and "hash" not in carrier.metadata
    texts = {"a": "Ana likes green tea", "b": "Ana likes green tea!", "c": "Ana likes green tea and cake",
             "d": "Ben plays the cello on Thursdays"}
    assert all(c.expect == content_hash(texts[c.id]) for c in changes.changes)  # the text at the import
    assert changes.changes[0] == carrier and len({c.group for c in changes.changes}) == 1  # applied together


def test_a_chained_merge_across_runs_resolves_to_the_ids_imported(tmp_path):
    with _store(tmp_path / "s.db") as store:
        imported = export_records(store, "jsonl")
        size = store.size("json")
        compressor(store, OneShot(MERGE)).run(budget_bytes=size - 20)  # one merge
        middle = export_records(store, "jsonl")
        compressor(store, OneShot(MERGE)).run(budget_bytes=store.min_entry_json_bytes())
        first, second = (r.run_id for r in store.journal.runs())
        both = describe_changes(store, format="jsonl")
        assert not any(c.id.startswith("m-") or (c.into or "").startswith("m-") for c in both.changes)
        assert by_id(roundtrip(imported, both)) == by_id(export_records(store, "jsonl"))
        later = describe_changes(store, since=second, format="jsonl")
        assert later.runs == (second,)
        assert by_id(roundtrip(middle, later)) == by_id(export_records(store, "jsonl"))
        assert describe_changes(store, [first, second]).changes == both.changes


def test_relinks_appear_only_in_formats_that_hold_links(tmp_path):
    with _store(tmp_path / "s.db") as store:
        compressor(store, OneShot(Decision("delete", "b", reason="contained", source="rule"))).run(
            budget_bytes=store.size("json") - 20)
        jsonl = describe_changes(store, format="jsonl")
        mem0 = describe_changes(store, format="mem0")
        assert [c.action for c in mem0.changes] == ["delete"]
        relinks = [c for c in jsonl.changes if c.action == "relink"]
        (delete,) = [c for c in jsonl.changes if c.op == "delete"]
        assert [c.id for c in relinks] == ["d"]  # d linked to b
        assert relinks[0].op == "update" and relinks[0].group != delete.group and relinks[0].record["links"] == []
        assert (relinks[0].run, relinks[0].step) == (delete.run, delete.step)  # the step that removed b
        assert delete.kept is not None and delete.kept[0] in "abc"  # the entry that holds its facts


def test_evictions_are_deletes_and_an_undone_run_adds_nothing(tmp_path):
    with _store(tmp_path / "s.db") as store:
        comp = compressor(store, ScriptedMethod(policy="preserve"), mode="strict")
        report = comp.run(budget=0.5)
        evicts = [d for d in store.journal.decisions() if d.action == "evict"]
        assert evicts
        changes = describe_changes(store, format="mem0")
        assert {c.id for c in changes.changes if c.action == "evict"} == {d.target for d in evicts}
        store.journal.undo(report.run_id)
        undone = describe_changes(store, [report.run_id], format="mem0")
        assert undone.changes == () and undone.undone == (report.run_id,) and undone.runs == ()
        assert describe_changes(store, format="mem0").changes == ()


# --- safety: a target that no longer matches ---------------------------------------------------------


def _two_merges(tmp_path: Path) -> tuple[list[dict], ChangeSet]:
    with MemoryStore(tmp_path / "s.db") as store:
        store.add_many([
            Entry(id="a", content="Ana likes green tea"), Entry(id="b", content="Ana likes green tea!"),
            Entry(id="x", content="Ben plays the cello on Thursdays"),
            Entry(id="y", content="Ben plays the cello on Thursdays!"),
        ])
        imported = export_records(store, "mem0")
        compressor(store, OneShot(MERGE), k=1).run(budget_bytes=store.size("json") - 100)
        changes = describe_changes(store, format="mem0")
    assert len({c.group for c in changes.changes}) == 2 and len(changes.changes) == 4
    return imported, changes


def test_an_operation_on_a_changed_or_missing_memory_is_skipped_with_its_group(tmp_path):
    imported, changes = _two_merges(tmp_path)
    group = changes.changes[0].group
    victim = next(c for c in changes.changes if c.group == group and c.op == "delete")
    edited = [dict(r, memory="edited since the import") if r["id"] == victim.id else r for r in imported]
    after, plan = apply_to_records(edited, changes)
    assert {c.group for c, _ in plan.skipped} == {group} and "changed since the import" in plan.skipped[0][1]
    assert all(c.group != group for c in plan.apply) and plan.apply
    assert by_id(after)[victim.id]["memory"] == "edited since the import"  # never applied to that memory
    missing = [r for r in imported if r["id"] != victim.id]
    after, plan = apply_to_records(missing, changes)
    assert {c.group for c, _ in plan.skipped} == {group} and "not in the target" in plan.skipped[0][1]
    kept_ids = {c.id for c in changes.changes if c.group == group} - {victim.id}
    assert kept_ids <= set(by_id(after))  # the group's other memories untouched


def test_a_target_where_every_group_has_a_changed_memory_gets_nothing_but_reports(tmp_path):
    imported, changes = _two_merges(tmp_path)
    victims = {next(c.id for c in changes.changes if c.group == g and c.op == "delete")
               for g in {c.group for c in changes.changes}}
    edited = [dict(r, memory="edited") if r["id"] in victims else r for r in imported]
    after, plan = apply_to_records(edited, changes)
    assert plan.apply == [] and len(plan.skipped) == len(changes.changes) and after == edited


def test_a_change_set_for_another_store_or_applied_twice_applies_nothing(tmp_path):
    imported, changes = _two_merges(tmp_path)
    other = [{"id": r["id"], "memory": "someone else's memory"} for r in imported]
    with pytest.raises(ChangeSetError, match="another store"):
        apply_to_records(other, changes)
    once, _ = apply_to_records(imported, changes)
    with pytest.raises(ChangeSetError, match="applied already"):
        apply_to_records(once, changes)


def test_a_delete_whose_kept_memory_changed_is_skipped(tmp_path):
    with MemoryStore(tmp_path / "s.db") as store:
        store.add_many([Entry(id="a", content="Ana likes green tea"), Entry(id="b", content="Ana likes green tea!"),
                        Entry(id="x", content="Ben plays the cello"), Entry(id="y", content="Ben plays the cello!")])
        imported = export_records(store, "mem0")
        compressor(store, OneShot(Decision("delete", "b", reason="contained", source="rule")), k=1).run(
            budget_bytes=store.size("json") - 150)
        changes = describe_changes(store, format="mem0")
    deletes = [c for c in changes.changes if c.op == "delete"]
    assert len(deletes) == 2 and all(c.kept for c in deletes)
    target = deletes[0]
    edited = [dict(r, memory="rewritten") if r["id"] == target.kept[0] else r for r in imported]
    after, plan = apply_to_records(edited, changes)
    assert [c for c, _ in plan.skipped] == [target] and "holds the facts of" in plan.skipped[0][1]
    assert target.id in by_id(after)


# --- bad input ------------------------------------------------------------------------------------------


def test_bad_run_selections_are_refused(tmp_path):
    with _store(tmp_path / "s.db") as store:
        for _ in range(3):
            compressor(store, OneShot(MERGE)).run(budget_bytes=store.size("json") - 10)
        first, second, third = (r.run_id for r in store.journal.runs())
        with pytest.raises(RunNotFoundError):
            describe_changes(store, ["20990101-000000-abcdef"])
        with pytest.raises(ChangeSetError, match=f"not consecutive: run {second}"):
            describe_changes(store, [first, third])
        with pytest.raises(OptionConflictError):
            describe_changes(store, [first], since=second)
        with pytest.raises(ChangeSetError, match="unknown change set format"):
            describe_changes(store, format="text")


def test_a_purged_history_says_what_it_can_no_longer_describe(tmp_path):
    with _store(tmp_path / "s.db") as store:
        compressor(store, OneShot(MERGE)).run(budget_bytes=store.size("json") - 10)
        store.journal.purge_history()
        compressor(store, OneShot(MERGE)).run(budget_bytes=store.min_entry_json_bytes())
        first, second = (r.run_id for r in store.journal.runs())
        with pytest.raises(ChangeSetError, match=f"undo history of run {first} was purged.*describe"):
            describe_changes(store)
        with pytest.raises(ChangeSetError, match=f"run {first} was purged"):
            describe_changes(store, [first])
        assert describe_changes(store, [second]).runs == (second,)  # the runs after it still can be


@pytest.mark.parametrize("text, message", [
    ("", "not a memrefine change set"),
    ('{"id": "a"}\n', "not a memrefine change set"),
    ('{"memrefine_changes": 1, "application_id": 7, "format": "mem0", "runs": [], "operations": 0}\n',
     "not written for a memrefine store"),
    ('{"memrefine_changes": 1, "application_id": 1297237318, "format": "mem0", "runs": [], "operations": 2}\n',
     "cut short"),
    ('{"memrefine_changes": 1, "application_id": 1297237318, "format": "mem0", "runs": [], "operations": 1}\n'
     '{"op": "rename", "id": "a"}\n', "unknown operation"),
    ('{"memrefine_changes": 1, "application_id": 1297237318, "format": "mem0", "runs": [], "operations": 1}\n'
     '{"op": "delete", "id": "a", "expect": "x", "group": 1}\n', "SHA-256"),
    ("{not json\n", "not valid JSON"),
])
def test_a_file_that_is_not_a_change_set_is_refused(tmp_path, text, message):
    path = tmp_path / "c.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ChangeSetError, match=message):
        read_changes(path)


# --- the command line, and a mem0 get_all() file end to end ----------------------------------------


MEM0 = {"results": [
    {"id": f"0b1c-{n}", "memory": text, "hash": f"h{n}", "metadata": {"source": "chat"}, "user_id": "alex",
     "created_at": f"2024-03-0{n}T10:00:00Z", "updated_at": None, "categories": ["food"] if n % 2 else []}
    for n, text in enumerate([
        "Alex likes green tea in the morning", "Alex likes green tea in the morning a lot",
        "Alex is allergic to peanuts", "Alex is allergic to peanuts and carries an EpiPen",
        "Alex works as a nurse in Porto", "Alex plays the cello on Thursdays"], 1)
]}


def invoke(*args: str, method=None):
    backends = FakeBackends(encoder=HashEncoder(), method=method or ScriptedMethod(), merger=ConcatMerger())
    return CliRunner().invoke(cli, list(args), obj=backends)


def test_a_mem0_file_round_trips_through_export_and_through_the_change_set(tmp_path):
    src, db = tmp_path / "get_all.json", tmp_path / "s.db"
    src.write_text(json.dumps(MEM0), encoding="utf-8")
    assert invoke("import", "--format", "mem0", str(src), "--db", str(db)).exit_code == 0
    result = invoke("compress", "--db", str(db), "--budget", "0.6", method=OneShot(MERGE))
    assert result.exit_code == 0, result.output
    export, changes = tmp_path / "export.json", tmp_path / "changes.jsonl"
    assert invoke("export", "--format", "mem0", str(export), "--db", str(db)).exit_code == 0
    result = invoke("changes", "--format", "mem0", "--output", str(changes), "--db", str(db), "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["update"] >= 1 and summary["delete"] >= 1 and summary["format"] == "mem0"
    exported = json.loads(export.read_text())["results"]
    assert {r["id"] for r in exported} < {r["id"] for r in MEM0["results"]}  # the user's ids, fewer of them
    after, plan = apply_to_records(MEM0["results"], read_changes(changes))
    assert not plan.skipped
    applied = tmp_path / "applied.json"
    applied.write_text(json.dumps({"results": after}), encoding="utf-8")
    assert by_entry(parse_file(applied, format="mem0")[0]) == by_entry(parse_file(export, format="mem0")[0])
    with MemoryStore(tmp_path / "again.db") as again, MemoryStore(db) as store:  # re-import of the export
        import_file(again, export, format="mem0")
        assert [e.content for e in again.entries()] == [e.content for e in store.entries()]


def by_entry(entries: list[Entry]) -> dict[str, Entry]:
    return {e.id: e for e in entries}


def test_cli_changes_prints_a_change_set_on_stdout(tmp_path):
    db = tmp_path / "s.db"
    _store(db).close()
    invoke("compress", "--db", str(db), "--budget", "0.7", method=OneShot(MERGE))
    result = invoke("changes", "--db", str(db))
    assert result.exit_code == 0, result.output
    header, *ops = (json.loads(line) for line in result.stdout.splitlines())
    assert header["memrefine_changes"] == 1 and header["operations"] == len(ops) > 0
    assert "updates and" in result.stderr


@pytest.mark.parametrize("args, message", [
    (("20990101-000000-abcdef",), "no run '20990101-000000-abcdef'"),
    (("--format", "mem0", "--purged"), "was purged"),
])
def test_cli_changes_bad_input_is_one_error_line(tmp_path, args, message):
    db = tmp_path / "s.db"
    _store(db).close()
    invoke("compress", "--db", str(db), "--budget", "0.7", method=OneShot(MERGE))
    if "--purged" in args:
        assert invoke("purge-history", "--db", str(db), "--yes").exit_code == 0
        args = tuple(a for a in args if a != "--purged")
    out = tmp_path / "c.jsonl"
    result = invoke("changes", *args, "--output", str(out), "--db", str(db))
    assert result.exit_code == 1 and result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1
    assert message in result.stderr and not out.exists()


def test_cli_changes_with_run_ids_and_since_is_a_usage_error(tmp_path):
    db = tmp_path / "s.db"
    _store(db).close()
    invoke("compress", "--db", str(db), "--budget", "0.7", method=OneShot(MERGE))
    with MemoryStore(db) as store:
        run_id = store.journal.runs()[0].run_id
    result = invoke("changes", run_id, "--since", run_id, "--db", str(db))
    assert result.exit_code == 2 and "not both" in result.output
