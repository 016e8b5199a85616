"""What a fleet job reads (paths, a glob, a manifest, lazily) and what it writes (rows, a summary); no Ray needed."""

from __future__ import annotations

import json

import pytest

from memrefine_edge.core import ExportError, ImportFormatError
from memrefine_edge.fleet import (
    Outcome,
    ResultWriter,
    StoreResult,
    count_manifest,
    glob_stores,
    read_manifest,
    read_results,
    summarize,
)


def test_a_manifest_reads_paths_and_json_lines_relative_to_its_folder(tmp_path):
    manifest = tmp_path / "jobs" / "list.txt"
    manifest.parent.mkdir()
    manifest.write_text("# nightly\n\na.db\n/abs/b.db\n"
                        '{"path": "c.db", "budget": "50%"}\n{"path": "d.db", "budget": 0.25}\n'
                        '{"path": "e.db", "budget": 80000}\n{"path": "f.db"}\n', encoding="utf-8")
    jobs = list(read_manifest(manifest))
    base = manifest.parent
    assert [(j.path, j.budget, j.problem) for j in jobs] == [
        (str(base / "a.db"), None, None), ("/abs/b.db", None, None), (str(base / "c.db"), "50%", None),
        (str(base / "d.db"), "0.25", None), (str(base / "e.db"), "80000", None), (str(base / "f.db"), None, None)]
    assert jobs[0].source == "list.txt:3"
    assert count_manifest(manifest) == 6


@pytest.mark.parametrize(("line", "says"), [
    ("{not json", "not a JSON object"),
    ('{"budget": "50%"}', 'needs a "path"'),
    ('{"path": "x.db", "owner": "ana"}', "unknown field(s) owner"),
    ('{"path": "x.db", "budget": true}', '"budget" must be text'),
    ('{"path": "  "}', 'needs a "path"'),
    ('{"path": 3}', 'needs a "path"'),
])
def test_a_manifest_line_that_names_no_store_becomes_a_job_that_says_why(tmp_path, line, says):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(f"a.db\n{line}\nb.db\n", encoding="utf-8")
    jobs = list(read_manifest(manifest))
    assert [j.problem is None for j in jobs] == [True, False, True]  # the lines around it go on
    assert jobs[1].problem.startswith("m.jsonl:2: ") and says in jobs[1].problem


def test_a_manifest_is_read_a_line_at_a_time(tmp_path):
    manifest = tmp_path / "big.txt"
    with open(manifest, "w", encoding="utf-8") as fh:
        for i in range(50_000):
            fh.write(f"stores/u{i}.db\n")
    jobs = read_manifest(manifest)
    first = next(jobs)  # a generator: the file is not read whole before the first job
    assert first.path.endswith("stores/u0.db")
    assert sum(1 for _ in jobs) == 49_999


def test_a_glob_names_store_files_and_leaves_out_their_side_files(tmp_path):
    for name in ("a.db", "a.db-wal", "a.db-shm", "a.db.lock", "sub/b.db"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("")
    (tmp_path / "dir.db").mkdir()
    found = sorted(j.path for j in glob_stores(str(tmp_path / "**" / "*.db*")))
    assert found == [str(tmp_path / "a.db"), str(tmp_path / "sub" / "b.db")]


def _row(path: str, outcome: Outcome = Outcome.DONE, before: int = 1000, after: int = 500, seconds: float = 1.0,
         **kw) -> StoreResult:
    return StoreResult(path=path, outcome=outcome, before_bytes=before, after_bytes=after, seconds=seconds,
                       budget_met=kw.pop("budget_met", True), decisions=kw.pop("decisions", 3), finished_at=100.0,
                       **kw)


def test_rows_round_trip_through_the_result_file_and_the_summary_counts_them(tmp_path):
    rows = [_row(f"s{i}.db", after=100 * (i + 1), seconds=float(i + 1)) for i in range(10)]
    rows += [_row("x.db", Outcome.FAILED, before=None, after=None, error="NotAStoreError: x.db is ..."),
             _row("y.db", Outcome.SKIPPED, before=None, after=None, error="another compression is running"),
             _row("z.db", budget_met=False, resumed=True)]
    path = tmp_path / "r.jsonl"
    with ResultWriter(path) as writer:
        for row in rows:
            writer.write(row)
    back = list(read_results(path))
    assert back == rows
    s = summarize(back)
    assert s.stores == 13 and s.outcomes == {"done": 11, "failed": 1, "skipped": 1}
    assert (s.budget_met, s.budget_not_met, s.resumed) == (10, 1, 1)
    assert s.before_bytes == 11_000 and s.after_bytes == sum(100 * (i + 1) for i in range(10)) + 500
    assert s.saved_bytes == s.before_bytes - s.after_bytes and s.decisions == 33
    assert s.ratio["min"] == 0.1 and s.ratio["max"] == 1.0 and s.ratio["p50"] == 0.5
    assert s.seconds["max"] == 10.0
    assert [p["path"] for p in s.problems] == ["x.db", "y.db"]
    text = s.text()
    assert "done 11, failed 1, skipped 1" in text and "NotAStoreError" in text


def test_a_result_file_is_never_overwritten(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text("kept\n")
    with pytest.raises(ExportError, match="never overwritten"):
        ResultWriter(path)
    assert path.read_text() == "kept\n"
    with pytest.raises(ExportError, match="cannot write"):
        ResultWriter(tmp_path / "no" / "such" / "r.jsonl")


@pytest.mark.parametrize("text", ['{"path": "a.db"}\n', "[1]\n", "not json\n",
                                  '{"path": "a.db", "outcome": "exploded"}\n'])
def test_a_file_that_is_not_a_result_file_is_refused_with_its_line(tmp_path, text):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(_row("ok.db").as_dict()) + "\n" + text, encoding="utf-8")
    with pytest.raises(ImportFormatError, match="line 2: .* is not a fleet result file"):
        list(read_results(path))

