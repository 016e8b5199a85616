"""The streaming evaluation, offline: a self-written conversation of eight sessions, the fake encoder and the
model-free judge; the same loop, keepers and measures as ``memrefine eval locomo --stream``."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from memrefine_edge.cli import cli
from memrefine_edge.core import Entry, EvalError
from memrefine_edge.eval import StreamConfig, UpkeepKeeper, replay, run_stream
from memrefine_edge.eval._questions import Question
from memrefine_edge.eval._sessions import AGE_BUCKETS, age_buckets, align_paragraphs, stream_conversation
from memrefine_edge.store import MemoryStore
from memrefine_edge.testing import FakeBackends, HashEncoder

_NAMES = ("Pixel", "Lisbon", "pottery", "violin", "Porto", "marathon", "Kyoto", "tulips")
_FILLER = ("Hi, how are you today?", "Good thanks, and you?", "I am fine, thanks for asking.", "Talk soon, bye!")


def _sample(sid: str = "conv-s1", sessions: int = 8) -> dict:
    """Eight sessions: each has small talk (said again every session) and two facts of its own."""
    conv: dict = {"speaker_a": "Ana", "speaker_b": "Ben"}
    qa = []
    for s in range(1, sessions + 1):
        word = _NAMES[(s - 1) % len(_NAMES)]
        turns = [("Ana", _FILLER[0]), ("Ben", _FILLER[1]),
                 ("Ana", f"In session {s} I told you about {word} number {s * 7} at the club."),
                 ("Ben", f"My cousin number {s} collects {word} stamps from {1990 + s}."),
                 ("Ana", _FILLER[2]), ("Ben", _FILLER[3])]
        conv[f"session_{s}_date_time"] = f"1:00 pm on {s} May, 2023"
        conv[f"session_{s}"] = [{"speaker": sp, "dia_id": f"D{s}:{i}", "text": t} for i, (sp, t) in enumerate(turns, 1)]
        qa.append({"question": f"What did Ana tell about {word} in session {s}?", "answer": f"{word} {s * 7}",
                   "evidence": [f"D{s}:3"], "category": 4})
        qa.append({"question": f"Which year are the {word} stamps of cousin {s} from?", "answer": str(1990 + s),
                   "evidence": [f"D{s}:4", f"D{max(1, s - 3)}:3"], "category": 1})
    qa.append({"question": "What colour is Ana's car?", "adversarial_answer": "red", "evidence": [], "category": 5})
    qa.append({"question": "Who won in session 40?", "answer": "nobody", "evidence": ["D40:1"], "category": 2})
    return {"sample_id": sid, "conversation": conv, "qa": qa}


@pytest.fixture
def data(tmp_path) -> Path:
    path = tmp_path / "locomo-stream.json"
    path.write_text(json.dumps([_sample()]), encoding="utf-8")
    return path


def _config(data: Path, out: Path, **kw) -> StreamConfig:
    return StreamConfig(data=data, out=out, **{"budgets": (0.5,), "context_bytes": (300,), "mode": "strict", **kw})


def _run(data: Path, out: Path, **kw) -> dict:
    return run_stream(_config(data, out, **kw), encoder=HashEncoder(), backends=FakeBackends(),
                      log=lambda _m: None)


def test_the_budget_holds_and_every_method_ends_at_the_same_size(data, tmp_path):
    out = tmp_path / "out"
    results = _run(data, out, budgets=(0.5, 0.3))
    sample = results["samples"]["conv-s1"]
    biggest = max(len(json.dumps(t)) for s in range(1, 9) for t in _sample()["conversation"][f"session_{s}"])
    for key in ("0.5", "0.3"):
        cell = sample["budgets"][key]
        up = cell["methods"]["upkeep"]
        assert cell["upkeep_finished"] and up["finished"] and up["adds"] == 48
        assert up["json_bytes"] <= cell["high_bytes"]  # at the end, and at every session's end
        assert up["overshoot_at_idle"]["max"] == 0 and up["overshoot_at_idle"]["points"] == 8
        assert up["passes"] >= 1 and up["decisions"] >= up["passes"]
        target = cell["target_bytes"]
        assert target == up["json_bytes"]
        for floor in ("fifo", "random"):
            size = cell["methods"][floor]["json_bytes"]
            assert target - 4 * biggest < size <= target, (key, floor, size, target)
        assert cell["methods"]["oneshot"]["budget_met"] and cell["methods"]["oneshot"]["json_bytes"] <= target
    assert sample["budgets"]["0.3"]["target_bytes"] < sample["budgets"]["0.5"]["target_bytes"]
    # fifo keeps the newest sessions only: the oldest quarter's answers are gone from its store.
    fifo = sample["budgets"]["0.3"]["methods"]["fifo"]
    assert fifo["presence_by_age"]["q1"]["present"] == 0 < fifo["presence_by_age"]["q4"]["present"]
    assert (out / "results.json").is_file() and (out / "report.md").is_file()
    assert not (out / "work").exists()
    report = (out / "report.md").read_text()
    assert "## Budget 30%" in report and "| upkeep |" in report and "| fifo |" in report


def test_age_buckets_partition_the_questions(data, tmp_path):
    results = _run(data, tmp_path / "out")
    sample = results["samples"]["conv-s1"]
    assert sum(sample["age_buckets"].values()) == sample["questions"] == 18
    # One question per session about that session, one whose oldest evidence is three sessions back.
    assert sample["age_buckets"] == {"q1": 2 + 5, "q2": 2 + 2, "q3": 2 + 1, "q4": 2, "none": 2}
    for m in sample["budgets"]["0.5"]["methods"].values():
        by_age = m["context_by_age"]["300"].values()
        assert sum(v["answer_n"] for v in by_age) == m["context"]["300"]["answer_n"] == 17
        assert sum(v["answer_sum"] for v in by_age) == pytest.approx(m["context"]["300"]["answer_sum"])
        assert sum(v["n"] for v in m["presence_by_age"].values()) == m["presence"]["n"]


def test_a_question_is_as_old_as_its_oldest_evidence():
    def q(*evidence: str) -> Question:
        return Question(0, "?", 1, frozenset(evidence), {})

    sessions = list(range(1, 9))
    got = age_buckets([q("D1:1"), q("D3:2"), q("D8:1", "D2:4"), q("D6:1"), q("D8:9"), q(), q("D40:1")], sessions)
    assert got == ["q1", "q2", "q1", "q3", "q4", "none", "none"]
    assert set(got) <= set(AGE_BUCKETS)


def test_text_paragraphs_are_placed_in_order_where_their_words_are():
    sessions = ["we talked about pottery and the kiln", "a trip to Lisbon by train", "the marathon in Porto"]
    paras = ["Ana loves pottery.", "The kiln broke.", "Ben took the train to Lisbon.", "Ben ran the Porto marathon."]
    assert align_paragraphs(paras, sessions) == [0, 0, 1, 2]
    # Order is kept when a later paragraph's words point back: the better-matched paragraph decides.
    assert align_paragraphs(["the Porto marathon", "the kiln"], sessions) == [2, 2]
    assert align_paragraphs(["the marathon", "pottery and its kiln"], sessions) == [0, 0]


def test_a_time_cap_records_a_replay_that_did_not_finish(data, tmp_path):
    results = _run(data, tmp_path / "out", max_seconds=1e-9)
    cell = results["samples"]["conv-s1"]["budgets"]["0.5"]
    up = cell["methods"]["upkeep"]
    assert not up["finished"] and up["adds"] < up["adds_total"] == 48
    assert not cell["upkeep_finished"] and cell["target_bytes"] == cell["high_bytes"]
    assert "context" not in up  # a partial store is not measured
    assert results["summary"]["budgets"]["0.5"]["upkeep_finished"] == 0
    assert cell["methods"]["fifo"]["json_bytes"] <= cell["high_bytes"]


class _WorkerUpkeep:
    """Stands in for an Upkeep whose refinement runs off the caller's path (it offers ``wait_idle``)."""

    def __init__(self) -> None:
        self.reports: list = []
        self.events: list[str] = []
        self.timeouts: list[float | None] = []

    def install(self) -> _WorkerUpkeep:
        self.events.append("install")
        return self

    def wait_idle(self, timeout: float | None = None) -> bool:
        self.events.append("wait")
        self.timeouts.append(timeout)
        return len(self.timeouts) != 2  # the second session end is not idle in time

    def close(self) -> None:
        self.events.append("close")


def test_the_stream_waits_for_a_worker_at_each_session_end(tmp_path):
    upkeep = _WorkerUpkeep()
    keeper = UpkeepKeeper(upkeep)  # type: ignore[arg-type]
    batches = [[Entry(id=f"s{s}-{i}", content=f"fact {s} {i}") for i in range(3)] for s in range(4)]
    with MemoryStore(tmp_path / "m.db") as store:
        stats = replay(store, batches, keeper, high_bytes=10**9, deadline=time.perf_counter() + 3600)
        keeper.close()
    assert keeper.waits and stats.finished and stats.adds == 12 and stats.batches == 4
    assert upkeep.events == ["install", "wait", "wait", "wait", "wait", "close"]
    assert all(t is not None and 0 < t <= 3600 for t in upkeep.timeouts)  # never past the replay's deadline
    assert stats.summary()["overshoot_at_idle"]["not_idle_by_deadline"] == 1


@pytest.mark.parametrize("change, message", [
    ({"store": "graph"}, "unknown store kind 'graph'"),
    ({"budgets": (0.0,)}, "in (0, 1), got 0.0"),
    ({"budgets": (1.0,)}, "in (0, 1), got 1.0"),
    ({"budgets": (1.5,)}, "in (0, 1), got 1.5"),
    ({"budgets": (True,)}, "in (0, 1), got True"),
    ({"max_seconds": 0}, "--max-seconds must be above 0"),
    ({"samples": ("conv-9",)}, "no sample 'conv-9'"),
    ({"store": "text"}, "the text store needs"),  # no SAMPLE.txt beside the data
    ({"context_bytes": (0,)}, "context sizes must be whole numbers of bytes >= 1"),
    ({"searches": -1}, "--searches must be a whole number >= 0"),
    ({"searches": 2.5}, "--searches must be a whole number >= 0"),
    ({"use_weight": -0.5}, "--use-weight must be a number in"),
    ({"use_weight": 11.0}, "--use-weight must be a number in"),
])
def test_bad_settings_are_one_clear_error_and_write_nothing(data, tmp_path, change, message):
    out = tmp_path / "out"
    with pytest.raises(EvalError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _run(data, out, **change)
    assert not out.exists()


def test_an_out_path_that_is_a_file_is_refused(data, tmp_path):
    out = tmp_path / "out"
    out.write_text("keep me", encoding="utf-8")
    with pytest.raises(EvalError, match="is a file, not a directory"):
        _run(data, out)
    assert out.read_text(encoding="utf-8") == "keep me"


@pytest.mark.parametrize("content", [
    [{"sample_id": "x", "dialogue": []}],  # no questions
    {"hello": "world"},
    [{"sample_id": "conv-1", "qa": [], "conversation": {"speaker_a": "A"}}],  # no sessions
])
def test_a_file_that_is_not_locomo_is_refused_before_anything_is_written(tmp_path, content):
    path = tmp_path / "not-locomo.json"
    path.write_text(json.dumps(content), encoding="utf-8")
    out = tmp_path / "out"
    with pytest.raises(EvalError, match="LoCoMo"):
        _run(path, out)
    assert not out.exists()


def _cli(*args: str):
    return CliRunner().invoke(cli, list(args), obj=FakeBackends(encoder=HashEncoder()))


def test_the_command_line_runs_the_stream_and_refuses_what_does_not_apply(data, tmp_path):
    out = tmp_path / "cli"
    ok = _cli("eval", "locomo", "--stream", "--data", str(data), "--budgets", "0.5", "--context-bytes", "300",
              "--mode", "strict", "--out", str(out), "--json")
    assert ok.exit_code == 0, ok.output
    summary = json.loads(ok.stdout)["summary"]
    assert set(summary["budgets"]) == {"0.5"} and summary["budgets"]["0.5"]["upkeep_finished"] == 1
    assert json.loads((out / "results.json").read_text())["config"]["mode"] == "strict"
    bad = _cli("eval", "locomo", "--stream", "--data", str(data), "--budgets", "1.5", "--out", str(tmp_path / "b"))
    assert bad.exit_code == 1 and bad.stderr.count("Error: ") == 1 and "Traceback" not in bad.output
    assert not (tmp_path / "b").exists()
    for extra in (["--chain"], ["--methods", "fifo"], ["--qa-limit", "3"]):
        refused = _cli("eval", "locomo", "--stream", *extra, "--data", str(data), "--out", str(tmp_path / "c"))
        assert refused.exit_code == 2 and "does not apply to --stream" in refused.output
    cap = _cli("eval", "locomo", "--max-seconds", "5", "--data", str(data), "--out", str(tmp_path / "d"))
    assert cap.exit_code == 2 and "--max-seconds applies to --stream" in cap.output
    for option, value in (("--searches", "3"), ("--use-weight", "0.2")):
        alone = _cli("eval", "locomo", option, value, "--data", str(data), "--out", str(tmp_path / "d"))
        assert alone.exit_code == 2 and f"{option} applies to --stream" in alone.output
    assert not (tmp_path / "c").exists() and not (tmp_path / "d").exists()


def test_every_dev_conversation_streams_in_sessions(locomo_dir):
    data = locomo_dir / "locomo-dev.json"
    samples = json.loads(data.read_text(encoding="utf-8"))
    for sample in samples:
        for kind in ("turns", "observations", "text"):
            conv = stream_conversation(data, sample, kind,
                                       text_path=locomo_dir / "mem0-style-stores" / f"{sample['sample_id']}.txt")
            assert len(conv.batches) == len(conv.sessions) >= 19 and conv.entries > 40
            buckets = age_buckets(conv.questions, conv.sessions)
            assert len(buckets) == len(sample["qa"]) and {"q1", "q4"} <= set(buckets)


def test_each_pass_is_credited_with_the_adds_before_its_start(tmp_path):
    from memrefine_edge.engine import Compressor
    from memrefine_edge.eval._replay import added_per_pass
    from tests.support.fakes import ConcatMerger, ScriptedMethod

    store = MemoryStore(tmp_path / "m.db")
    seqs: list[int] = []

    def add(n: int, start: int) -> None:
        for i in range(start, start + n):
            store.add(Entry(id=f"e{i}", content=f"Fact number {i}: person {i} likes thing {i * 7}."))
            seqs.append(store.max_seq())

    def a_pass():
        comp = Compressor(store, encoder=HashEncoder(), method=ScriptedMethod(policy="preserve"),
                          merger=ConcatMerger(), neighbours=2)
        return comp.run(budget_bytes=store.json_bytes() - 50)

    add(10, 0)
    first = a_pass()
    add(5, 10)
    second = a_pass()
    within = Compressor(store, encoder=HashEncoder(), method=ScriptedMethod(), merger=ConcatMerger()).run(
        budget_bytes=store.json_bytes() + 1000)
    assert first.run_id and second.run_id and within.run_id is None  # within budget: no run recorded
    # the first pass had the 10 adds before it; the second the 5 after the first started
    assert added_per_pass(store, [first, within, second], seqs) == [10, 0, 5]
    store.close()


def test_the_upkeep_replay_searches_before_each_add_and_the_store_records_the_uses(data, tmp_path, monkeypatch):
    import memrefine_edge.store as store_module

    seen: list[tuple[str, int]] = []
    uses: dict[str, tuple[int, int]] = {}

    class Recording(MemoryStore):  # what the replay's assistant asks, and how many entries the store held
        def search(self, query, k=10, *, encoder):
            seen.append((query, len(self)))
            return super().search(query, k, encoder=encoder)

        def close(self):
            if seen and not uses:
                uses.update(self.uses())
            super().close()

    monkeypatch.setattr(store_module, "MemoryStore", Recording)  # the stream opens its stores from there
    results = _run(data, tmp_path / "uses", searches=2)
    sessions = json.loads(data.read_text(encoding="utf-8"))[0]["conversation"]
    turns = [t["text"] for n in range(1, 9) for t in sessions[f"session_{n}"]]
    # One search per add of the upkeep replay, for the entry about to be added, and none elsewhere.
    assert [q.split(": ", 1)[-1] for q, _ in seen] == turns
    assert seen[0][1] == 0 and seen[1][1] == 1
    assert uses and all(hits >= 1 for hits, _last in uses.values())
    assert results["config"]["searches"] == 2
