"""The streaming evaluation: each conversation replayed session by session into a store held at a budget.

``memrefine eval locomo --stream`` answers what the one-shot evaluation cannot: does a store that an
assistant keeps writing to stay useful *and* within its budget? For every conversation (its entries as
the store kind holds them, :mod:`._sessions`) and every budget (a share of the json size of the whole
conversation's store):

* **upkeep**: a fresh store with :class:`~memrefine_edge.engine.Upkeep` installed as the docs show it
  (the default judge, the deterministic merge, the compressor's default mode unless one is given; high
  watermark the budget, low ``headroom`` below it), the entries added one at a time, the keeper let
  settle at each session's end (:mod:`._replay`);
* **fifo** and **random**, the floors, in the same loop: after each add above that size they remove
  the oldest, or random, entries until the store fits;
* **oneshot**: no upkeep; the whole conversation is added, then compressed once with the same method.

The floors are held at the size the upkeep store ended with, and the one-shot store is compressed to
it, so every method is measured at the same size (at the budget when the upkeep replay did not finish;
above it when upkeep did not hold it: the ratios say so). Each store is
then measured as the one-shot evaluation measures one (:mod:`._context`): answer and evidence recall
within a context of C bytes, and answer presence, over all questions and by the age of their evidence.
Entries are ranked by the cosine of the evaluation encoder's float32 vectors of their content (every
method alike). The upkeep replay also reports its add latency, its overshoot at each add's return and
at idle, its passes and decisions, and its file size against its json size.

``max_seconds`` caps each upkeep replay (checked between two adds): a replay that hits it is recorded as
not finished, with how far it got, and its conversation is left out of the pooled utility figures.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from memrefine_edge.core import EvalError

from ._context import StoreText, answer_presence, answer_tokens, score_context
from ._harness import STORE_KINDS, top_k
from ._questions import load_samples
from ._replay import FloorKeeper, NoKeeper, UpkeepKeeper, passes_summary, replay
from ._sessions import AGE_BUCKETS, StreamedConversation, age_buckets, stream_conversation

if TYPE_CHECKING:  # pragma: no cover
    from memrefine_edge.backends import Encoder
    from memrefine_edge.core import Entry
    from memrefine_edge.engine import Backends, Compressor
    from memrefine_edge.store import MemoryStore

__all__ = ["STREAM_METHODS", "StreamConfig", "run_stream", "validate_stream"]

#: The methods of a streaming evaluation, in the order they run for each conversation and budget.
STREAM_METHODS = ("upkeep", "fifo", "random", "oneshot")


@dataclass(frozen=True, kw_only=True)
class StreamConfig:
    """Everything one streaming evaluation depends on (recorded in results.json)."""

    data: Path
    out: Path
    samples: tuple[str, ...] | None = None
    store: str = "turns"
    budgets: tuple[float, ...] = (0.5, 0.3)
    context_bytes: tuple[int, ...] = (1000, 2000)
    headroom: float = 0.1
    mode: str | None = None  # None: the compressor's default mode
    judge_model: str | None = None
    encoder_model: str | None = None
    seed: int = 0
    threads: int = 1
    text_dir: Path | None = None
    max_seconds: float | None = None
    #: Before each add to the upkeep store, search it for the new entry's text and take this many
    #: results (0: no searches), so the store records uses as an assistant's would.
    searches: int = 5
    #: The upkeep compressor's ``use_weight`` (None: the compressor's default).
    use_weight: float | None = None
    command: str = ""


def _text_path(config: StreamConfig, sample_id: str) -> Path:
    return (config.text_dir or config.data.parent / "mem0-style-stores") / f"{sample_id}.txt"


def validate_stream(config: StreamConfig) -> list[StreamedConversation]:
    """Check the whole configuration and read every conversation before anything is written."""
    from memrefine_edge.engine import MODES

    if config.store not in STORE_KINDS:
        raise EvalError(f"unknown store kind {config.store!r}; use one of {', '.join(STORE_KINDS)}")
    if not config.budgets:
        raise EvalError("give at least one budget")
    for b in config.budgets:
        if isinstance(b, bool) or not isinstance(b, (int, float)) or not 0 < b < 1:
            raise EvalError(f"a streaming budget is a share of the conversation's size in (0, 1), got {b!r}")
    if not config.context_bytes or any(isinstance(c, bool) or not isinstance(c, int) or c < 1
                                       for c in config.context_bytes):
        raise EvalError(f"context sizes must be whole numbers of bytes >= 1, got {config.context_bytes!r}")
    if not 0 <= config.headroom < 1:
        raise EvalError(f"headroom must be in [0, 1), got {config.headroom!r}")
    if config.mode is not None and config.mode not in MODES:
        raise EvalError(f"unknown mode {config.mode!r}; use one of {', '.join(MODES)}")
    if config.max_seconds is not None and not config.max_seconds > 0:
        raise EvalError(f"--max-seconds must be above 0, got {config.max_seconds!r}")
    if config.threads < 1:
        raise EvalError(f"threads must be >= 1, got {config.threads}")
    if isinstance(config.searches, bool) or not isinstance(config.searches, int) or config.searches < 0:
        raise EvalError(f"--searches must be a whole number >= 0, got {config.searches!r}")
    if config.use_weight is not None and not (isinstance(config.use_weight, (int, float))
                                              and not isinstance(config.use_weight, bool)
                                              and 0 <= config.use_weight <= 10):
        raise EvalError(f"--use-weight must be a number in [0, 10], got {config.use_weight!r}")
    if config.out.exists() and not config.out.is_dir():
        raise EvalError(f"--out {config.out} is a file, not a directory")
    samples = load_samples(config.data)
    by_id = {s["sample_id"]: s for s in samples}
    wanted = config.samples or tuple(by_id)
    missing = [s for s in wanted if s not in by_id]
    if missing:
        raise EvalError(f"no sample {missing[0]!r} in {config.data.name} (it has: {', '.join(by_id)})")
    out = []
    for sid in wanted:
        text_path = None
        if config.store == "text":
            text_path = _text_path(config, sid)
            if not text_path.is_file():
                raise EvalError(f"the text store needs {text_path} (set --text-dir)")
        conv = stream_conversation(config.data, by_id[sid], config.store, text_path=text_path)
        if not conv.entries:
            raise EvalError(f"sample {sid!r} has no {config.store} entries to replay")
        out.append(conv)
    return out


class _Vectors:
    """Unit vectors of texts by the evaluation's encoder, each text embedded once per evaluation."""

    def __init__(self, encoder: Encoder) -> None:
        self.encoder = encoder
        self._cache: dict[str, np.ndarray] = {}

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        todo = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if todo:
            vecs = np.asarray(self.encoder.embed(todo), dtype=np.float32)
            norms = np.linalg.norm(vecs, axis=1, keepdims=True)
            vecs = (vecs / np.where(norms > 0, norms, 1.0)).astype(np.float32)
            self._cache.update(zip(todo, vecs, strict=True))
        if not texts:
            return np.zeros((0, self.encoder.dim), np.float32)
        return np.stack([self._cache[t] for t in texts])


@dataclass
class _Conv:
    """A conversation's questions as every measurement reads them (computed once)."""

    data: StreamedConversation
    q_emb: np.ndarray
    gold: list[frozenset[str]]
    buckets: list[str]
    has_prov: bool


def _measure(store: MemoryStore, conv: _Conv, vectors: _Vectors, sizes: Sequence[int]) -> dict[str, Any]:
    """Answer/evidence recall@C and presence of the live store, over all questions and by evidence age."""
    entries = list(store.entries())
    contents = [e.content for e in entries]
    text = StoreText.of(contents, [e.provenance for e in entries])
    order = top_k(vectors(contents), conv.q_emb, len(entries))
    qs = conv.data.questions
    cats = [q.category for q in qs]
    evidence = [q.evidence for q in qs]
    codes = [list(AGE_BUCKETS).index(b) for b in conv.buckets]
    names = list(AGE_BUCKETS)
    context, by_age = {}, {}
    for c in sizes:
        context[str(c)] = score_context(text, order, cats, evidence, conv.gold, c,
                                        has_provenance=conv.has_prov).as_dict()
        grouped = score_context(text, order, codes, evidence, conv.gold, c, has_provenance=conv.has_prov).as_dict()
        by_age[str(c)] = {names[int(k)]: v for k, v in cast(dict, grouped["by_category"]).items()}
    presence_age = cast(dict, answer_presence(text, codes, conv.gold)["by_category"])
    return {"entries": len(entries), "json_bytes": store.json_bytes(), "context": context, "context_by_age": by_age,
            "presence": answer_presence(text, cats, conv.gold),
            "presence_by_age": {names[int(k)]: v for k, v in presence_age.items()}}


def _files(store: MemoryStore, path: Path) -> dict[str, int]:
    on_disk = sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())
    return {"file_bytes": store.file_bytes(), "bytes_on_disk": on_disk}


def _fresh(path: Path) -> Path:
    for p in (path, *(Path(f"{path}{x}") for x in ("-wal", "-shm", ".lock"))):
        p.unlink(missing_ok=True)
    return path


class _Stream:
    """One streaming evaluation in progress: models, paths and the log clock."""

    def __init__(self, config: StreamConfig, encoder: Encoder, backends: Backends | None,
                 log: Callable[[str], None]) -> None:
        self.config, self.encoder, self.backends, self.log = config, encoder, backends, log
        self.vectors = _Vectors(encoder)
        self.work = config.out / "work"
        self.t0 = time.perf_counter()

    def say(self, message: str) -> None:
        self.log(f"[{time.perf_counter() - self.t0:7.1f}s] {message}")

    def compressor(self, store: MemoryStore) -> Compressor:
        """A compressor as the docs' Upkeep example builds one: the default judge, the deterministic merge."""
        from memrefine_edge.engine import Compressor, PipelineConfig, build
        from memrefine_edge.judging import parse_judge_model

        judge, judge_model = parse_judge_model(self.config.judge_model)  # read as --judge-model reads it
        parts = build(PipelineConfig(method="memrefine", judge=judge, judge_model=judge_model,
                                     threads=self.config.threads), backends=self.backends, encoder=self.encoder)
        options: dict[str, Any] = {}
        if self.config.mode is not None:  # else the compressor's default mode, as the docs' example leaves it
            options["mode"] = self.config.mode
        if self.config.use_weight is not None:
            options["use_weight"] = self.config.use_weight
        return Compressor(store, encoder=self.encoder, method=parts.method, merger=parts.merger, **options)

    def searcher(self, store: MemoryStore) -> Callable[[Entry], None] | None:
        """What the upkeep replay's assistant does before each add: search its memory for the new text."""
        k = self.config.searches
        if k <= 0:
            return None

        def search(entry: Entry) -> None:
            store.search(entry.content, k, encoder=self.encoder)

        return search

    def base(self, conv: _Conv) -> tuple[Path, dict[str, Any]]:
        """The whole conversation added without upkeep: its size, measures and add latency."""
        from memrefine_edge.store import MemoryStore

        path = _fresh(self.work / f"{conv.data.sample_id}-base.db")
        with MemoryStore(path) as store:
            stats = replay(store, conv.data.batches, NoKeeper(), high_bytes=sys.maxsize)
            rec = {"add_ms": stats.summary()["add_ms"], **_files(store, path),
                   **_measure(store, conv, self.vectors, self.config.context_bytes)}
        return path, rec

    def upkeep(self, conv: _Conv, budget: float, high: int, low: int) -> tuple[dict[str, Any], int | None]:
        """The upkeep replay; returns its record and its final size (None when it did not finish)."""
        from memrefine_edge.engine import Upkeep
        from memrefine_edge.store import MemoryStore

        path = _fresh(self.work / f"{conv.data.sample_id}-{budget:g}-upkeep.db")
        deadline = time.perf_counter() + self.config.max_seconds if self.config.max_seconds else None
        with MemoryStore(path) as store, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", RuntimeWarning)
            keeper = UpkeepKeeper(Upkeep(self.compressor(store), high_bytes=high, low_bytes=low))
            try:
                stats = replay(store, conv.data.batches, keeper, high_bytes=high, deadline=deadline,
                               before_add=self.searcher(store))
            finally:
                keeper.close()
            rec: dict[str, Any] = {**stats.summary(), "sessions_total": len(conv.data.batches),
                                   "adds_total": conv.data.entries, "waits_for_idle": keeper.waits,
                                   **passes_summary(keeper.passes(), stats.added_per_pass), **_files(store, path)}
            rec["warnings"] = sorted({str(w.message)[:200] for w in caught})
            if not stats.finished:
                rec.update(entries=len(store), json_bytes=store.json_bytes())
                return rec, None
            rec.update(_measure(store, conv, self.vectors, self.config.context_bytes))
            return rec, store.json_bytes()

    def floor(self, conv: _Conv, name: str, budget: float, target: int) -> dict[str, Any]:
        """A floor in the stream: after each add above ``target``, evict until the store fits; measured."""
        from memrefine_edge.store import MemoryStore

        path = _fresh(self.work / f"{conv.data.sample_id}-{budget:g}-{name}.db")
        with MemoryStore(path) as store:
            seed = f"{self.config.seed}:{conv.data.sample_id}:{budget:g}"
            keeper = FloorKeeper(store, name, high_bytes=target, seed=seed)
            try:
                stats = replay(store, conv.data.batches, keeper, high_bytes=target)
            finally:
                keeper.close()
            rec = {**stats.summary(), "removed": keeper.removed, **_files(store, path)}
            rec.update(_measure(store, conv, self.vectors, self.config.context_bytes))
        return rec

    def oneshot(self, conv: _Conv, base_path: Path, budget: float, target: int) -> dict[str, Any]:
        """The whole conversation, then one compression to ``target`` with the upkeep's method."""
        from memrefine_edge.core import BudgetError
        from memrefine_edge.store import MemoryStore, copy_store

        path = _fresh(self.work / f"{conv.data.sample_id}-{budget:g}-oneshot.db")
        copy_store(base_path, path)
        with MemoryStore(path, create=False) as store:
            started = time.perf_counter()
            try:
                report = self.compressor(store).run(budget_bytes=target)
            except BudgetError as exc:
                rec: dict[str, Any] = {"budget_met": False, "stop_reason": f"refused: {exc}", "actions": {}}
            else:
                rec = {"budget_met": report.budget_met, "stop_reason": report.stop_reason, "actions": report.actions,
                       "decisions": report.decisions, "mode": report.mode}
            rec["seconds"] = round(time.perf_counter() - started, 3)
            rec.update(_files(store, path))
            rec.update(_measure(store, conv, self.vectors, self.config.context_bytes))
        return rec

    def conversation(self, conv: _Conv) -> dict[str, Any]:
        sid = conv.data.sample_id
        self.say(f"{sid}: {conv.data.entries} {self.config.store} entries in {len(conv.data.sessions)} sessions")
        base_path, base = self.base(conv)
        full = base["json_bytes"]
        rec: dict[str, Any] = {"sessions": len(conv.data.sessions), "adds": conv.data.entries,
                               "questions": len(conv.data.questions),
                               "age_buckets": {b: conv.buckets.count(b) for b in AGE_BUCKETS},
                               "json_bytes": full, "base": base, "budgets": {}}
        for budget in self.config.budgets:
            high = max(1, int(full * budget))
            low = max(1, int(high * (1 - self.config.headroom)))
            cell: dict[str, Any] = {"high_bytes": high, "low_bytes": low, "methods": {}}
            rec["budgets"][f"{budget:g}"] = cell
            self.say(f"{sid} {budget:g}: upkeep replay, high {high:,} B, low {low:,} B")
            up, final = self.upkeep(conv, budget, high, low)
            cell["methods"]["upkeep"] = up
            target = final if final is not None else high
            cell["upkeep_finished"], cell["target_bytes"] = final is not None, target
            self.say(f"{sid} {budget:g}: upkeep {'finished' if final is not None else 'NOT FINISHED'} in "
                     f"{up['seconds']:.1f}s, {up['adds']} adds, add p99 {up['add_ms']['p99']} ms max "
                     f"{up['add_ms']['max']} ms, {up['passes']} passes, {up['decisions']} decisions")
            for name in ("fifo", "random"):  # held at the size upkeep ended with: the same size at the end
                cell["methods"][name] = self.floor(conv, name, budget, target)
            cell["methods"]["oneshot"] = self.oneshot(conv, base_path, budget, target)
            for m in cell["methods"].values():
                m["ratio_json"] = round(m["json_bytes"] / full, 4) if full else None
            c0 = str(self.config.context_bytes[0])
            self.say(f"{sid} {budget:g}: answer recall@{c0} " + ", ".join(
                f"{n} {_ratio(m['context'][c0]):.3f}" for n, m in cell["methods"].items() if "context" in m))
        return rec


def _package_version() -> str:
    try:
        from importlib.metadata import version

        return version("memrefine-edge")
    except Exception:  # pragma: no cover - a source tree without metadata
        return "0+unknown"


def _ratio(ctx: Mapping[str, Any]) -> float:
    return ctx["answer_sum"] / ctx["answer_n"] if ctx["answer_n"] else float("nan")


def run_stream(config: StreamConfig, *, encoder: Encoder | None = None, backends: Backends | None = None,
               log: Callable[[str], None] = lambda m: print(m, file=sys.stderr, flush=True)) -> dict[str, Any]:
    """Run the streaming evaluation; write ``results.json`` and ``report.md`` into ``config.out``.

    ``encoder`` and ``backends`` (the judge and merger of the upkeep and one-shot compressions, as
    :func:`memrefine_edge.engine.build` takes them) are injectable; the defaults are the bundled models.
    Everything is validated before anything is written; the results are rewritten after each
    conversation, so a stopped run keeps what it measured.
    """
    from ._report import machine_info, portable, write_json
    from ._stream_report import summarize_stream, write_stream_report

    convs = validate_stream(config)
    if encoder is None:  # the backends' encoder (the default: the bundled model)
        from memrefine_edge.engine import Backends, PipelineConfig

        encoder = (backends or Backends()).encoder(PipelineConfig(encoder_model=config.encoder_model,
                                                                  threads=config.threads))
    run = _Stream(config, encoder, backends, log)
    run.work.mkdir(parents=True, exist_ok=True)
    cfg = {k: (portable(v) if isinstance(v, Path) else v) for k, v in asdict(config).items()}
    results: dict[str, Any] = {
        "kind": "stream", "config": cfg, "command": config.command, "machine": machine_info(_package_version()),
        "load_start": list(os.getloadavg()), "encoder": encoder.model_id, "methods": list(STREAM_METHODS),
        "age_buckets": dict(AGE_BUCKETS), "has_provenance": config.store != "text",
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "samples": {},
    }
    try:
        for data in convs:
            qs = data.questions
            q_emb = run.vectors([q.text for q in qs]) if qs else np.zeros((0, encoder.dim), np.float32)
            conv = _Conv(data, q_emb, [answer_tokens(dict(q.record)) for q in qs], age_buckets(qs, data.sessions),
                         config.store != "text")
            results["samples"][data.sample_id] = run.conversation(conv)
            results["elapsed_s"] = round(time.perf_counter() - run.t0, 1)
            results["summary"] = summarize_stream(results)
            write_stream_report(results, config.out)
            write_json(config.out / "results.json", results)
        results["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        results["load_end"] = list(os.getloadavg())
        results["elapsed_s"] = round(time.perf_counter() - run.t0, 1)
        results["summary"] = summarize_stream(results)
        write_stream_report(results, config.out)
        write_json(config.out / "results.json", results)
    finally:
        shutil.rmtree(run.work, ignore_errors=True)
    return results
