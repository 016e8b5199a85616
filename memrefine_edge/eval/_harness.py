"""The LoCoMo evaluation harness: the paper's storage-utility table (Table 1), measured locally.

For each LoCoMo sample the harness builds the memory store once (cached in
``OUT/cache``, embeddings included), measures it uncompressed (the *base*),
then compresses a copy per method (the floors ``fifo`` and ``random`` of
:mod:`.floors` included) and budget and measures each copy:

* **storage**: entries, bytes in both metrics, realized ratios against the
  base, compression seconds and LLM calls (judge + merge);
* **utility within a context of C bytes** (no LLM; :mod:`.context`): the
  entries an assistant reading C bytes would see, ranked by cosine, and in
  them *evidence recall@C* and *answer recall@C*; and *answer presence*,
  whether the gold answer's words are anywhere in the store. These are the
  primary measures: they cannot be gamed by packing entries together;
* **evidence recall@k** (secondary: it favours packed entries): each question's top-k memories by cosine
  similarity (the store's default retriever; every question is embedded
  once per sample and scored in numpy against each copy's embedding
  matrix); recall is the share of the question's evidence ``dia_id``s found
  in the provenance of the retrieved entries. Stores without provenance
  (``text``) have no recall;
* **QA token F1 / EM**: an :class:`Answerer` answers from the top-k memories,
  scored with :func:`memrefine_edge.eval._metrics.score_qa` (``strict=False``).

``chain=True`` compresses one copy through the budgets in descending order
and measures it at each: the engine proposes the exact global argmax pair
from the live store and stops as soon as the size is within the target, so
the store at budget ``b`` is the one an independent run to ``b`` ends with
(up to LLM numerical noise), at a fraction of the cost.

When a method's recall at ``attribution_budget`` falls more than
``attribution_drop`` below base, :func:`attribute_loss` says where the
evidence went, from the store's audit log.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from memrefine_edge.core import BudgetError, EvalError
from memrefine_edge.store import copy_store

from ._answerer import Answerer, LlamaAnswerer
from ._context import StoreText, answer_presence, answer_tokens, score_context
from ._floors import FLOORS, evict_floor
from ._metrics import CATEGORY_NAMES, score_qa
from ._questions import Question, load_questions, load_samples, stratified_sample

if TYPE_CHECKING:  # pragma: no cover
    from memrefine_edge.backends import Encoder
    from memrefine_edge.engine import Backends, PipelineConfig
    from memrefine_edge.judging import Merger
    from memrefine_edge.methods import Method
    from memrefine_edge.store import DecisionRecord, MemoryStore

__all__ = [
    "EvalConfig", "STORE_KINDS", "top_k", "recall_of", "attribute_loss", "validate_config", "run_eval",
    "MethodFactory",
]

STORE_KINDS: Mapping[str, str] = {"turns": "locomo-turns", "observations": "locomo-observations", "text": "text"}
#: Built with (method name, config) -> (method, merger or None).
MethodFactory = Callable[[str, "EvalConfig"], "tuple[Method, Merger | None]"]


# --- configuration ----------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class EvalConfig:
    """Everything one evaluation run depends on (recorded in results.json)."""

    data: Path
    out: Path
    samples: tuple[str, ...] | None = None
    store: str = "turns"
    methods: tuple[str, ...] = ("memrefine", "rulesim", "rulepr", "fifo", "random")
    budgets: tuple[float, ...] = (1.0, 0.7, 0.5, 0.4, 0.3, 0.2)
    context_bytes: tuple[int, ...] = (1000, 2000)
    qa: bool = True
    qa_limit: int | None = None
    k: int = 10
    seed: int = 0
    threads: int = 1
    chain: bool = False
    metric: str = "json"
    mode: str = "live"
    merger: str = "concat"  # "concat" (deterministic, no LLM; the compress default) or "llm" (the judge model)
    judge_model: str | None = None  # as --judge-model: None/"none" (the redundancy scorer), "fact", "bundled" or a GGUF
    merge_min_similarity: float | None = None  # the judge's (methods that use one); None: the judge's default
    max_merged_bytes: int | None = None  # the compressor's cap on a merged text (None: the mode's; 0: none)
    #: Per method name, the options it declares (``{"rulesim": {"tau": 0.9}}``), checked from the registry.
    method_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    answer_model: str | None = None
    encoder_model: str | None = None
    text_dir: Path | None = None
    attribution_budget: float = 0.5
    attribution_drop: float = 0.02
    keep_stores: bool = False
    command: str = ""

    def pipeline_config(self, name: str) -> "PipelineConfig":
        """The :class:`~memrefine_edge.engine.PipelineConfig` that compresses with method ``name``.

        ``judge_model`` is read as the command line reads ``--judge-model``
        (:func:`~memrefine_edge.judging.parse_judge_model`); the judge's
        settings go to a method that decides with one; ``merger="llm"``
        merges with the judge's GGUF, or the bundled one.
        """
        from memrefine_edge.engine import PipelineConfig
        from memrefine_edge.judging import JudgeKind, parse_judge_model
        from memrefine_edge.methods import method_class

        kind, path = parse_judge_model(self.judge_model)
        merge_model = None
        if self.merger == "llm":
            # Merges written by the judge's GGUF; a judge without one (the scorer, the fact judge) uses the bundled.
            merge_model = str(path) if kind is JudgeKind.GGUF and path is not None else "bundled"
        uses_judge = method_class(name).uses_judge
        return PipelineConfig(method=name, method_options=dict(self.method_options.get(name, {})), judge=kind,
                              judge_model=path, merge_model=merge_model, threads=self.threads,
                              merge_min_similarity=self.merge_min_similarity if uses_judge else None)


def _methods_known(extra: Iterable[str]) -> list[str]:
    from memrefine_edge.methods import method_names

    return sorted(set(method_names()) | set(FLOORS) | set(extra))


def validate_config(config: EvalConfig, *, known_methods: Iterable[str] = ()) -> list[dict[str, Any]]:
    """Check the whole configuration before anything is written; returns the selected samples."""
    if config.store not in STORE_KINDS:
        raise EvalError(f"unknown store kind {config.store!r}; use one of {', '.join(STORE_KINDS)}")
    if not config.budgets:
        raise EvalError("give at least one budget")
    for b in config.budgets:
        if isinstance(b, bool) or not isinstance(b, (int, float)) or not 0 < b <= 1:
            raise EvalError(f"budget must be in (0, 1], got {b!r}")
    if not config.methods:
        raise EvalError("give at least one method")
    known = _methods_known(known_methods)
    for m in config.methods:
        if m not in known:
            raise EvalError(f"unknown method {m!r}; known: {', '.join(known)}")
    for m in config.method_options:
        if m not in config.methods or m in FLOORS:
            raise EvalError(f"options are given for {m!r}, which is not among the methods evaluated "
                            f"({', '.join(config.methods)}) or takes none")
    for m in config.methods:
        if m not in FLOORS and m not in set(known_methods):
            config.pipeline_config(m).validate()  # each method's options, from its declaration
    if not config.context_bytes or any(isinstance(c, bool) or not isinstance(c, int) or c < 1
                                       for c in config.context_bytes):
        raise EvalError(f"context sizes must be whole numbers of bytes >= 1, got {config.context_bytes!r}")
    if config.qa_limit is not None and config.qa_limit < 1:
        raise EvalError(f"--qa-limit must be at least 1, got {config.qa_limit}")
    if config.k < 1 or config.threads < 1 or config.merger not in ("llm", "concat"):
        raise EvalError(f"k and threads must be >= 1 and merger llm or concat (got {config.merger!r})")
    if config.out.exists() and not config.out.is_dir():
        raise EvalError(f"--out {config.out} is a file, not a directory")
    samples = load_samples(config.data)
    by_id = {s["sample_id"]: s for s in samples}
    wanted = config.samples or tuple(by_id)
    missing = [s for s in wanted if s not in by_id]
    if missing:
        raise EvalError(f"no sample {missing[0]!r} in {config.data.name} (it has: {', '.join(by_id)})")
    if config.store == "text":
        for sid in wanted:
            if not _text_path(config, sid).is_file():
                raise EvalError(f"the text store needs {_text_path(config, sid)} (set --text-dir)")
    return [by_id[s] for s in wanted]


def _text_path(config: EvalConfig, sample_id: str) -> Path:
    return (config.text_dir or config.data.parent / "mem0-style-stores") / f"{sample_id}.txt"


# --- stores -------------------------------------------------------------------------------------


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("memrefine-edge")
    except Exception:  # pragma: no cover - running from a source tree without metadata
        return "0+unknown"


def base_store(config: EvalConfig, sample_id: str, encoder: "Encoder", cache: Path) -> Path:
    """The cached, embedded base store of one sample (built once, atomically)."""
    from memrefine_edge.store import MemoryStore, import_file

    key = hashlib.sha256(f"{config.data.resolve()}|{config.data.stat().st_size}|{encoder.model_id}".encode())
    path = cache / f"{sample_id}-{config.store}-v{_version()}-{key.hexdigest()[:10]}.db"
    if path.exists():
        return path
    cache.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".building")
    tmp.unlink(missing_ok=True)
    with MemoryStore(tmp) as store:
        if config.store == "text":
            import_file(store, _text_path(config, sample_id), format="text")
        else:
            import_file(store, config.data, format=STORE_KINDS[config.store], sample_id=sample_id)
        store.ensure_embeddings(encoder)
    for suffix in ("-wal", "-shm"):
        Path(str(tmp) + suffix).unlink(missing_ok=True)
    os.replace(tmp, path)
    return path


# --- retrieval and recall -------------------------------------------------------------------------


def top_k(matrix: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    """Row indices of the ``k`` best entries per query: cosine, ties by insertion order (as ``store.search``)."""
    if matrix.shape[0] == 0:
        return np.zeros((queries.shape[0], 0), dtype=np.int64)
    scores = queries @ matrix.T
    return np.argsort(-scores, axis=1, kind="stable")[:, : min(k, matrix.shape[0])]


def recall_of(evidence: frozenset[str], provenance: Iterable[Iterable[str]]) -> float:
    """Share of ``evidence`` found in the union of the retrieved entries' provenance."""
    found = evidence & {p for prov in provenance for p in prov}
    return len(found) / len(evidence) if evidence else float("nan")


@dataclass
class _View:
    """One measured store: retrieval order and provenance, read once."""

    ids: list[str]
    contents: list[str]
    provenance: list[frozenset[str]]
    top: np.ndarray
    order: np.ndarray
    text: StoreText

    def found(self, qi: int, evidence: frozenset[str]) -> frozenset[str]:
        return evidence & frozenset().union(*(self.provenance[i] for i in self.top[qi]))


def _view(store: "MemoryStore", encoder: "Encoder", q_emb: np.ndarray, k: int) -> _View:
    store.ensure_embeddings(encoder)
    ids, matrix = store.embeddings(model_id=encoder.model_id)
    entries = {e.id: e for e in store.entries()}
    contents = [(f"[{entries[i].timestamp}] " if entries[i].timestamp else "") + entries[i].content for i in ids]
    provenance = [frozenset(entries[i].provenance) for i in ids]
    order = top_k(matrix, q_emb, len(ids))  # the whole ranking: contexts take as many as fit
    # The context holds the entries' content as stored (no timestamp prefix), measured in UTF-8 bytes.
    text = StoreText.of([entries[i].content for i in ids], provenance)
    return _View(ids, contents, provenance, order[:, :k], order, text)


def _recall(view: _View, questions: Sequence[Question],
            has_prov: bool) -> tuple[dict[str, Any] | None, list[frozenset[str]]]:
    found = [view.found(i, q.evidence) for i, q in enumerate(questions)]
    if not has_prov:
        return None, found
    sums: dict[int, float] = defaultdict(float)
    counts: Counter[int] = Counter()
    for q, f in zip(questions, found, strict=True):
        if q.evidence:
            sums[q.category] += len(f) / len(q.evidence)
            counts[q.category] += 1
    by_cat = {str(c): {"sum": sums[c], "n": counts[c]} for c in sorted(counts)}
    return {"sum": sum(sums.values()), "n": sum(counts.values()), "by_category": by_cat}, found


def _qa(view: _View, questions: Sequence[Question], chosen: Sequence[int], answerer: Answerer) -> dict[str, Any]:
    f1: dict[int, float] = defaultdict(float)
    em: Counter[int] = Counter()
    n: Counter[int] = Counter()
    for qi in chosen:
        q = questions[qi]
        pred = answerer.answer(q.text, [view.contents[i] for i in view.top[qi]])
        s = score_qa(q.record, pred, strict=False)
        f1[s.category] += s.f1
        em[s.category] += int(s.em)
        n[s.category] += 1
    by_cat = {str(c): {"f1_sum": f1[c], "em_sum": em[c], "n": n[c]} for c in sorted(n)}
    return {"f1_sum": sum(f1.values()), "em_sum": sum(em.values()), "n": sum(n.values()), "by_category": by_cat}


# --- evidence-loss attribution -----------------------------------------------------------------------


def attribute_loss(questions: Sequence[Question], base_found: Sequence[frozenset[str]],
                   found: Sequence[frozenset[str]], decisions: Sequence["DecisionRecord"],
                   base_provenance: Mapping[str, frozenset[str]], live_ids: Iterable[str]) -> dict[str, Any]:
    """Where evidence that base retrieved in the top-k went after compression.

    A question *lost* evidence when an id retrieved at base is not retrieved
    now. For each lost id the audit log is replayed (a merged entry's
    provenance is the union of its sources, as the engine builds it) and
    every decision that removed an entry carrying one is counted once by
    ``action/source``; each id's *fate* is ``deleted``/``evicted`` (no live entry
    carries it; the last removal's source), ``merged, outranked`` (a merged
    entry carries it but is not retrieved) or ``kept, outranked``.
    """
    lost_q = [(q, b - f) for q, b, f in zip(questions, base_found, found, strict=True) if b - f]
    lost_ids = {e for _, ids in lost_q for e in ids}
    prov = dict(base_provenance)
    made_by: dict[str, str] = {}
    touching: dict[tuple[str, int], str] = {}
    last_removal: dict[str, str] = {}
    for d in decisions:
        for rid in d.removed_ids:
            for e in prov.get(rid, frozenset()) & lost_ids:
                touching[(d.run_id, d.step)] = f"{d.action}/{d.source}"
                if d.action in ("delete", "evict"):
                    last_removal[e] = f"{'deleted' if d.action == 'delete' else 'evicted'} ({d.source})"
        if d.action == "merge":
            for cid in d.created_ids:
                prov[cid] = frozenset().union(*(prov.get(r, frozenset()) for r in d.removed_ids))
                made_by[cid] = d.source
    # A live original carrier means the entry was untouched and simply outranked;
    # otherwise a live merged carrier means the fact survived inside a merge.
    kept: set[str] = set()
    merged_into: dict[str, str] = {}
    for eid in live_ids:
        for e in prov.get(eid, frozenset()) & lost_ids:
            if eid in base_provenance:
                kept.add(e)
            else:
                merged_into.setdefault(e, made_by.get(eid, "?"))
    fate: dict[str, str] = {}
    for e in lost_ids:
        if e in kept:
            fate[e] = "kept, outranked"
        elif e in merged_into:
            fate[e] = f"merged ({merged_into[e]}), outranked"
        else:
            fate[e] = last_removal.get(e, "removed (unknown)")
    by_cat: dict[str, Counter[str]] = defaultdict(Counter)
    for q, ids in lost_q:
        by_cat[str(q.category)]["questions"] += 1
        for e in ids:  # per (question, lost id): a shared id counts for each question that needed it
            by_cat[str(q.category)][fate[e]] += 1
    return {
        "questions_lost": len(lost_q), "evidence_ids_lost": len(lost_ids),
        "fate": dict(Counter(fate[e] for e in lost_ids)),
        "by_decision": dict(Counter(touching.values())),
        "by_category": {c: dict(v) for c, v in sorted(by_cat.items())},
    }


# --- the run -----------------------------------------------------------------------------------------


def _default_factory(name: str, config: EvalConfig, *, encoder: "Encoder",
                     backends: "Backends | None" = None) -> "tuple[Method, Merger | None]":
    """The method and merger of one compression, from the pipeline (fresh state each time), built by
    ``backends`` (default: the real models)."""
    from memrefine_edge.engine import build

    # The run embeds with its own encoder (one per evaluation): the pipeline is built around it.
    parts = build(config.pipeline_config(name), backends=backends, encoder=encoder)
    return parts.method, parts.merger


@dataclass
class _Sample:
    """One conversation: its questions, the sampled QA questions, its base store and question vectors."""

    sid: str
    questions: list[Question]
    chosen_q: list[Question]
    chosen: list[int]
    base_path: Path
    q_emb: np.ndarray
    has_prov: bool
    #: Each question's gold answer tokens (empty for adversarial questions), computed once.
    gold: list[frozenset[str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.gold = [answer_tokens(dict(q.record)) for q in self.questions]


class _Run:
    """One evaluation in progress: shared models, results, and the clock for log lines."""

    def __init__(self, config: EvalConfig, encoder: "Encoder", answerer: Answerer | None,
                 factory: MethodFactory, log: Callable[[str], None]) -> None:
        self.config, self.encoder, self.answerer, self.factory, self.log = config, encoder, answerer, factory, log
        self.t0 = time.perf_counter()

    def say(self, message: str) -> None:
        self.log(f"[{time.perf_counter() - self.t0:7.1f}s] {message}")

    def sample(self, raw: dict[str, Any], cache: Path) -> _Sample:
        config, encoder = self.config, self.encoder
        sid = raw["sample_id"]
        questions = load_questions(raw)
        chosen_q = stratified_sample(questions, config.qa_limit, seed=config.seed, key=sid) if config.qa else []
        pos = {q.index: i for i, q in enumerate(questions)}
        self.say(f"{sid}: building/loading the {config.store} store")
        base_path = base_store(config, sid, encoder, cache)
        q_emb = encoder.embed([q.text for q in questions]) if questions else np.zeros((0, encoder.dim), np.float32)
        return _Sample(sid, questions, chosen_q, [pos[q.index] for q in chosen_q], base_path, q_emb,
                       config.store != "text")

    def measure(self, sample: _Sample, store: "MemoryStore",
                label: str) -> tuple[dict[str, Any], list[frozenset[str]], _View]:
        view = _view(store, self.encoder, sample.q_emb, self.config.k)
        recall, found = _recall(view, sample.questions, sample.has_prov)
        qa = None
        if self.config.qa and self.answerer is not None and sample.chosen:
            self.say(f"{sample.sid} {label}: answering {len(sample.chosen)} questions")
            qa = _qa(view, sample.questions, sample.chosen, self.answerer)
        sizes = {"entries": len(store), "json_bytes": store.json_bytes(), "disk_bytes": store.disk_bytes()}
        cats, gold = [q.category for q in sample.questions], sample.gold
        context = {str(c): score_context(view.text, view.order, cats, [q.evidence for q in sample.questions], gold, c,
                                         has_provenance=sample.has_prov).as_dict()
                   for c in self.config.context_bytes}
        presence = answer_presence(view.text, cats, gold)
        return {**sizes, "recall": recall, "qa": qa, "context": context, "presence": presence}, found, view

    def compress(self, sample: _Sample, name: str, budget: float, path: Path, method: "Method | None",
                 merger: "Merger | None", base: dict[str, Any], base_found: list[frozenset[str]],
                 base_prov: dict[str, frozenset[str]]) -> dict[str, Any]:
        """Compress the store at ``path`` to ``budget`` of the base size and measure it."""
        from memrefine_edge.engine import Compressor
        from memrefine_edge.store import MemoryStore

        config = self.config
        self.say(f"{sample.sid} {name} budget {budget:g}: compressing")
        last = [time.perf_counter()]

        def progress(p: Any) -> None:
            if time.perf_counter() - last[0] >= 30:
                last[0] = time.perf_counter()
                self.say(f"{sample.sid} {name} budget {budget:g}: step {p.step}, {p.size:,}/{p.target:,} B, "
                         f"{dict(p.counts)}")

        merge_calls = _model_calls(merger)
        target = max(1, int(base[f"{config.metric}_bytes"] * budget))
        with MemoryStore(path, create=False) as store:
            started = time.perf_counter()
            if name in FLOORS:
                rep = evict_floor(store, name, target_bytes=target, metric=config.metric, seed=config.seed)
                llm = 0
            else:
                assert method is not None  # only the floors run without a method
                comp = Compressor(store, encoder=self.encoder, method=method, merger=merger, metric=config.metric,
                                  mode=config.mode, progress=progress, max_merged_bytes=config.max_merged_bytes)
                try:
                    report = comp.run(budget_bytes=target)
                except BudgetError as exc:  # a store of a few huge (packed) entries cannot get there at all
                    rep = {"target_bytes": target, "budget_met": False, "stop_reason": f"refused: {exc}",
                           "actions": {}, "sources": {}}
                    llm = 0
                else:
                    llm = report.llm_calls + _model_calls(merger) - merge_calls
                    rep = {k: getattr(report, k) for k in ("target_bytes", "budget_met", "stop_reason", "actions",
                                                           "sources")}
            secs = time.perf_counter() - started
            m, found, view = self.measure(sample, store, f"{name} {budget:g}")
            m.update(budget=budget, ratio_json=m["json_bytes"] / base["json_bytes"],
                     ratio_disk=m["disk_bytes"] / base["disk_bytes"], target_bytes=rep["target_bytes"],
                     budget_met=rep["budget_met"], stop_reason=rep["stop_reason"], actions=rep["actions"],
                     sources=rep["sources"], seconds=round(secs, 3), llm_calls=llm)
            if sample.has_prov and abs(budget - config.attribution_budget) < 1e-9 and base["recall"]["n"]:
                drop = (base["recall"]["sum"] - m["recall"]["sum"]) / base["recall"]["n"]
                if drop > config.attribution_drop:
                    m["attribution"] = attribute_loss(sample.questions, base_found, found,
                                                      store.journal.decisions(), base_prov, view.ids)
        self.say(f"{sample.sid} {name} budget {budget:g}: ratio {m['ratio_json']:.3f}, {m['entries']} entries, "
                 f"{secs:.1f}s, {llm} LLM calls"
                 + (f", recall@{config.k} {m['recall']['sum'] / max(1, m['recall']['n']):.3f}"
                    if sample.has_prov else ""))
        return m


def _model_calls(merger: "Merger | None") -> int:
    """The merger's model calls so far (none without a merger)."""
    return int(merger.stats.get("llm_calls", 0)) if merger is not None else 0


def run_eval(config: EvalConfig, *, encoder: "Encoder | None" = None, method_factory: MethodFactory | None = None,
             backends: "Backends | None" = None, extra_methods: Iterable[str] = (), answerer: Answerer | None = None,
             log: Callable[[str], None] = lambda m: print(m, file=sys.stderr, flush=True)) -> dict[str, Any]:
    """Run the whole evaluation; write ``results.json``, ``report.md`` (and a PNG) into ``config.out``.

    ``encoder``, ``method_factory`` (plus the names it knows, ``extra_methods``)
    and ``answerer`` are injectable; the defaults are the bundled models. ``backends`` builds the
    pipeline's parts for the default method factory (:class:`memrefine_edge.engine._pipeline.Backends`; for
    example another judge), as ``compress`` would with them.
    Input is validated before anything is written. ``results.json`` and the
    report are rewritten after each measurement, so a stopped run keeps them.
    """
    from memrefine_edge.store import MemoryStore

    from ._report import machine_info, portable, write_json, write_report

    samples = validate_config(config, known_methods=extra_methods)
    budgets = sorted({float(b) for b in config.budgets if b < 1}, reverse=True)
    if encoder is None:
        from memrefine_edge.backends import OnnxEncoder

        encoder = OnnxEncoder(model_path=config.encoder_model, threads=config.threads)
    if config.qa and answerer is None:
        answerer = LlamaAnswerer(model_path=config.answer_model, n_threads=config.threads)
    if method_factory is not None and backends is not None:
        raise ValueError("give method_factory or backends, not both (backends feed the default factory)")
    run = _Run(config, encoder, answerer,
               method_factory or functools.partial(_default_factory, encoder=encoder, backends=backends), log)
    out = config.out
    cache, work = out / "cache", out / "work"
    work.mkdir(parents=True, exist_ok=True)
    cfg = {k: (portable(v) if isinstance(v, Path) else v) for k, v in asdict(config).items()}
    results: dict[str, Any] = {
        "config": cfg, "command": config.command, "machine": machine_info(_version()), "encoder": encoder.model_id,
        "answerer": answerer.describe() if (config.qa and answerer) else None, "budgets": budgets,
        "has_recall": config.store != "text", "category_names": {str(c): n for c, n in CATEGORY_NAMES.items()},
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "samples": {},
    }
    for raw in samples:
        sample = run.sample(raw, cache)
        with MemoryStore(sample.base_path, create=False) as store:
            base, base_found, _ = run.measure(sample, store, "base")
            base_prov = {e.id: frozenset(e.provenance) for e in store.entries()}
        srec: dict[str, Any] = {"questions": len(sample.questions),
                                "with_evidence": sum(bool(q.evidence) for q in sample.questions),
                                "qa_questions": [q.index for q in sample.chosen_q], "base": base, "methods": {}}
        results["samples"][sample.sid] = srec
        for name in config.methods:
            runs: dict[str, Any] = srec["methods"].setdefault(name, {})
            chain_path = work / f"{sample.sid}-{name}.db"
            cum_s, cum_llm = 0.0, 0
            for bi, b in enumerate(budgets):
                path = chain_path if config.chain else work / f"{sample.sid}-{name}-{b:g}.db"
                if bi == 0 or not config.chain:  # a fresh copy and fresh method state per compression
                    path.unlink(missing_ok=True)
                    copy_store(sample.base_path, path)
                    method, merger = (None, None) if name in FLOORS else run.factory(name, config)
                    cum_s, cum_llm = 0.0, 0
                m = run.compress(sample, name, b, path, method, merger, base, base_found, base_prov)
                cum_s, cum_llm = cum_s + m["seconds"], cum_llm + m["llm_calls"]
                m.update(seconds_cumulative=round(cum_s, 3), llm_calls_cumulative=cum_llm)
                runs[f"{b:g}"] = m
                if not config.chain and not config.keep_stores:
                    _cleanup(path)
                results["elapsed_s"] = round(time.perf_counter() - run.t0, 1)
                write_report(results, out, log=lambda _m: None)  # after every budget: a stopped run keeps it
                write_json(out / "results.json", results)
            if config.chain and not config.keep_stores:
                _cleanup(chain_path)
    results["elapsed_s"] = round(time.perf_counter() - run.t0, 1)
    results["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    write_report(results, out, log=log)
    write_json(out / "results.json", results)
    if not config.keep_stores:
        shutil.rmtree(work, ignore_errors=True)
    return results


def _cleanup(path: Path) -> None:
    for p in (path, *(Path(f"{path}{x}") for x in ("-wal", "-shm", ".lock"))):
        p.unlink(missing_ok=True)
