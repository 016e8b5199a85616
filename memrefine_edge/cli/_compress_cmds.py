"""``memrefine compress|methods|demo|undo|log|purge-history``."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from memrefine_edge.core import Mode, StopReason, StoreExistsError, StoreNotFoundError
from memrefine_edge.store import copy_store

from ._app import (
    cli,
    current_backends,
    db_option,
    emit,
    json_option,
    judge_choice,
    log,
    open_store,
    resolve_db,
    store_settings,
)

if TYPE_CHECKING:  # pragma: no cover
    from memrefine_edge.engine import PipelineConfig


def _progress_printer(metric: str):
    last = [0.0]

    def show(p) -> None:
        now = time.monotonic()
        if now - last[0] < 0.5:
            return
        last[0] = now
        counts = " ".join(f"{k} {v}" for k, v in sorted(p.counts.items()))
        eta = f" | ETA {p.eta_s:.0f}s" if p.eta_s is not None else ""
        log(f"[{p.step}] {metric} {p.size:,} / {p.target:,} B | {counts} | {p.pairs_per_s:.2f} pairs/s{eta}")

    return show


def _embed_printer():
    last = [0.0]

    def show(done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] >= 0.5 or done == total:
            last[0] = now
            log(f"embedded {done:,}/{total:,} entries (saved as it goes)")

    return show


def _human(report: dict[str, Any]) -> str:
    b, a = report["before"], report["after"]
    metric = report["metric"]
    # Pairs the last-copy check preserved for now (source "deferred"), and how many of those deletes the
    # run took after all because the budget needed the bytes (counted with source "guard" above).
    n_deferred = report["sources"].get("deferred", 0)
    deferred = [f"  deferred    {n_deferred:,} last-copy delete(s) deferred, {report.get('deferred_taken', 0):,} "
                "taken to meet the budget"] if n_deferred else []
    lines = [
        f"run {report['run_id'] or '-'}: method {report['method']}, metric {metric}, mode {report['mode']}"
        + (" (dry run: the store was not changed)" if report.get("dry_run") else ""),
        f"  target      {report['target_bytes']:,} B ({metric})",
        f"  json size   {b['json_bytes']:,} -> {a['json_bytes']:,} B ({report['realized_ratio_json']:.1%})",
        f"  disk size   {b['disk_bytes']:,} -> {a['disk_bytes']:,} B ({report['realized_ratio_disk']:.1%})",
        f"  file        {b.get('file_bytes', 0):,} -> {a.get('file_bytes', 0):,} B in use (with the undo history; "
        "purge-history returns its share)",
        f"  entries     {b['entries']:,} -> {a['entries']:,}",
        "  actions     " + (", ".join(f"{k} {v}" for k, v in sorted(report["actions"].items())) or "none"),
        "  sources     " + (", ".join(f"{k} {v}" for k, v in sorted(report["sources"].items())) or "none"),
        *deferred,
        *_removed_line(report),
        f"  LLM calls   {report['llm_calls']}",
        "  seconds     " + ", ".join(f"{k} {v:.2f}" for k, v in sorted(report["seconds"].items())),
        f"  budget met  {'yes' if report['budget_met'] else 'NO'} ({report['stop_reason']})",
    ]
    if (not report["budget_met"] and report["mode"] == Mode.PAPER
            and StopReason.of(report["stop_reason"]).out_of_candidates):
        # Paper mode ends here by design: every pair left was judged to hold distinct facts.
        lines.append("  next        the judge kept what is left as distinct facts; --mode live (the default) evicts "
                     "down to the budget (each eviction audited, undo restores), or set a larger budget")
    return "\n".join(lines)


def _removed_line(report: dict[str, Any]) -> list[str]:
    """What the run removed by each route: the judge's deletes and merges, and eviction (none: no line)."""
    removed = report.get("removed_bytes") or {}
    if not removed:
        return []
    judged = removed.get("delete", 0) + removed.get("merge", 0)
    return [f"  removed     {judged:,} B by the judge's deletes and merges, {removed.get('evict', 0):,} B by "
            f"eviction ({report['metric']})"]


_DRY_PREFIX = "memrefine-dry-"


def _sweep_stale_dry_runs(tmp_root: Path) -> None:
    """Remove the copies of dry runs whose process is gone (killed with SIGKILL, say)."""
    for folder in tmp_root.glob(f"{_DRY_PREFIX}*"):
        try:
            pid = int(folder.name[len(_DRY_PREFIX):].split("-", 1)[0])
            if folder.stat().st_uid != os.getuid():
                continue
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except (ValueError, OSError):
            continue


@contextmanager
def _dry_run_copy(db: Path) -> Iterator[Path]:
    """A private copy of the store in the temp folder, removed on every way out.

    The folder is 0700 and the copy 0600. A normal end, an error, Ctrl-C,
    SIGTERM and SIGHUP remove it here; a copy left by a SIGKILL is removed by
    the next dry run (the folder names its process).
    """
    tmp_root = Path(tempfile.gettempdir())
    _sweep_stale_dry_runs(tmp_root)
    folder = Path(tempfile.mkdtemp(prefix=f"{_DRY_PREFIX}{os.getpid()}-"))

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)  # unwinds through the finally below

    previous = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            previous[sig] = signal.signal(sig, on_signal)
        except ValueError:  # not the main thread: the caller's handlers stay
            pass
    try:
        copy = folder / "copy.db"
        copy_store(db, copy)
        yield copy
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_compress(db: Path, *, config: "PipelineConfig", budget: float | None, budget_bytes: int | None,
                 metric: str | None, mode: str, resume: bool = False, max_decisions: int | None = None,
                 min_similarity: float | None = None, neighbours: int = 8, max_merged_bytes: int | None = None,
                 quiet: bool = False) -> dict[str, Any]:
    """Open, compress, close (:func:`memrefine_edge.engine.compress_store`); returns the end report as a dict."""
    from memrefine_edge.engine import compress_store

    done = compress_store(
        resolve_db(db), budget=budget, budget_bytes=budget_bytes, metric=metric, mode=mode, neighbours=neighbours,
        config=config, backends=current_backends(), resume=resume, max_decisions=max_decisions,
        min_similarity=min_similarity, max_merged_bytes=max_merged_bytes,
        progress=None if quiet else _progress_printer(metric or "json"),
        embed_progress=None if quiet else _embed_printer(), store_options=store_settings())
    if done.message:
        log(done.message)
    return done.report.as_dict()


#: The values of ``--judge``: :class:`~memrefine_edge.judging.JudgeKind`'s (not imported here: ``--help`` stays fast).
JUDGE_KINDS = ("scorer", "fact", "gguf")
#: The flags of options the built-in methods declare, by option name (any option: ``--method-option``).
_METHOD_FLAGS = {"tau": "--tau", "protect": "--protect", "keep_last_copies": "--no-last-copy-check",
                 "defer_last_copies": "--defer-last-copies"}


def pipeline_config(*, method: str, method_option: tuple[str, ...] = (), judge: str | None = None,
                    judge_model: str | None = None, merge_model: str | None = None, encoder_model: str | None = None,
                    threads: int | None = None, merge_min_similarity: float | None = None, tau: float | None = None,
                    protect: float | None = None, keep_last_copies: bool | None = None,
                    defer_last_copies: bool | None = None) -> "PipelineConfig":
    """The :class:`~memrefine_edge.engine.PipelineConfig` the compress flags stand for, checked.

    ``--method-option NAME=VALUE`` (any number) sets an option the method
    declares, read by the option's type; ``--tau``, ``--protect``,
    ``--no-last-copy-check`` and ``--defer-last-copies`` set the built-in
    methods' options of those names. The method (a plugin's is loaded here)
    and every option are checked before anything runs.
    """
    from memrefine_edge.engine import PipelineConfig
    from memrefine_edge.methods import method_class

    cls = method_class(method)
    options: dict[str, Any] = {}
    for item in method_option:
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise click.BadParameter(f"{item!r} is not NAME=VALUE", param_hint="'--method-option'")
        if name in options:
            raise click.BadParameter(f"{name} is given twice", param_hint="'--method-option'")
        options[name] = cls.options[name].parse(name, text) if name in cls.options else text
    flagged = {"tau": tau, "protect": protect, "keep_last_copies": keep_last_copies,
               "defer_last_copies": defer_last_copies}
    for name, value in flagged.items():
        if value is None:
            continue
        if name in options:
            raise click.UsageError(f"give {_METHOD_FLAGS[name]} or --method-option {name}=..., not both")
        options[name] = value
    kind, model = judge_choice(judge, judge_model)
    config = PipelineConfig(method=method, method_options=options, judge=kind, judge_model=model,
                            merge_model=merge_model, encoder_model=encoder_model, threads=threads,
                            merge_min_similarity=merge_min_similarity)
    config.validate()
    return config


_pipeline_options = [
    click.option("--method", default="memrefine", show_default=True,
                 help="Compression method: memrefine, rulesim, rulepr, or a plugin's (`memrefine methods` lists "
                      "them, with their options)."),
    click.option("--method-option", "method_option", multiple=True, metavar="NAME=VALUE",
                 help="An option the method declares (repeatable), e.g. --method-option tau=0.9. A value the "
                      "option does not take is an error (exit 1); a name the method does not declare is a usage "
                      "error (exit 2)."),
    click.option("--judge", type=click.Choice(JUDGE_KINDS), default=None,
                 help="The judge of memrefine: scorer (the default: the learned redundancy scorer, no LLM), fact "
                      "(word-coverage rules) or gguf (a GGUF model, the bundled SmolLM2-135M unless "
                      "--judge-model names one)."),
    click.option("--judge-model", type=click.Path(dir_okay=False), default=None,
                 help="A GGUF judge model file (implies --judge gguf). For compatibility it also takes the words "
                      "'none' (--judge scorer), 'fact' (--judge fact) and 'bundled' (--judge gguf)."),
    click.option("--merge-min-similarity", type=click.FloatRange(-1, 1), default=None,
                 help="memrefine: merge only at or above this cosine [default: the scorer's own decision; 0.5 "
                      "for 'fact' and GGUF judges, which merge distinct-fact pairs at or above it]."),
    click.option("--no-last-copy-check", "keep_last_copies", flag_value=False, default=None,
                 help="memrefine: let a delete take the store's last copy of a specific word (a rare word, name, "
                      "number or date) [default: such a delete becomes a merge that keeps both texts]."),
    click.option("--defer-last-copies", "defer_last_copies", flag_value=True, default=None,
                 help="memrefine: preserve a pair whose delete would take a last copy, and take the delete "
                      "only when no candidate pair is left above the budget (meets budgets more often, keeps "
                      "fewer words) [default: merge it]."),
    click.option("--merge-model", type=click.Path(dir_okay=False), default=None,
                 help="GGUF for merges, or 'bundled' [default: no LLM; a deterministic merge that keeps both "
                      "entries' facts]."),
    click.option("--encoder-model", type=click.Path(dir_okay=False), default=None, help="ONNX encoder file."),
    click.option("--threads", type=click.IntRange(1, 64), default=None,
                 help="CPU threads for the models [default: encoder min(2, cores), LLM 1]."),
    click.option("--tau", type=float, default=None,
                 help="rulesim/rulepr: similarity threshold for deletes (--method-option tau=...)."),
    click.option("--protect", type=float, default=None,
                 help="rulepr: PageRank percentile above which entries are never merge anchors "
                      "(--method-option protect=...)."),
]

_compress_options = [
    click.option("--budget", default=None, metavar="RATIO",
                 help="Budget as a ratio of the current size: more than 0 and at most 1 (0.5), or a percentage (50%)."),
    click.option("--budget-bytes", default=None, metavar="SIZE",
                 help="Budget as a size: a whole number of bytes (80000) or with a unit (80KB, 1.5MiB)."),
    click.option("--metric", type=click.Choice(["json", "disk"]), default=None,
                 help="Size metric the budget is measured in [default: the standing budget's, else json]."),
    click.option("--mode", type=click.Choice(["live", "paper", "strict"]), default="live", show_default=True,
                 help="live: judge only the entries new since the last live pass, each against its nearest "
                      "neighbours, then evict until the budget holds; paper: the paper's algorithm, every pair, "
                      "stops when no candidate is left (may end above the budget); strict: the paper's order, "
                      "then evict until the budget holds."),
    click.option("--neighbours", type=click.IntRange(1, 1024), default=8, show_default=True,
                 help="live mode: how many nearest live entries each new entry is judged against."),
    click.option("--max-merged-bytes", type=click.IntRange(0), default=None,
                 help="The longest merged text a merge may write; a longer merge keeps both entries (0: no "
                      "limit) [default: 1000 in live and strict mode, none in paper mode]."),
    *_pipeline_options,
    click.option("--min-similarity", type=click.FloatRange(-1, 1), default=None,
                 help="Stop proposing pairs below this cosine [default: none, as in the paper]."),
]


def _apply(options):
    def wrap(f):
        for opt in reversed(options):
            f = opt(f)
        return f

    return wrap


def pipeline_options(f):
    """The pipeline flags of `compress` (method, its options, judge, models, threads) on another command.

    The command gets them as keywords for :func:`pipeline_config` (``memrefine fleet compress`` uses them).
    """
    return _apply(_pipeline_options)(f)


@cli.command()
@db_option
@_apply(_compress_options)
@click.option("--resume", is_flag=True, help="Continue the interrupted run with its recorded settings.")
@click.option("--dry-run", is_flag=True, help="Run on a temporary copy and report; the store is not touched.")
@click.option("--max-decisions", type=click.IntRange(1), default=None, help="Stop after N decisions (resumable).")
@json_option
def compress(db_path, budget, budget_bytes, metric, mode, neighbours, max_merged_bytes, min_similarity, resume,
             dry_run, max_decisions, as_json, **choices) -> None:
    """Compress the store to its budget (continues an interrupted run).

    Without --budget/--budget-bytes the store's standing budget is used
    (`memrefine budget set`). A budget given here becomes the standing one;
    the same command given again finds the store within it and changes
    nothing, so it is safe in a cron job.
    """
    db = resolve_db(db_path)
    if not db.exists():
        raise StoreNotFoundError(f"no memory store at {db} (create one with `memrefine import`)")
    if budget is not None and budget_bytes is not None:
        raise click.UsageError("give --budget RATIO or --budget-bytes N, not both")
    from memrefine_edge.store import parse_ratio, parse_size

    budget = parse_ratio(budget) if budget is not None else None
    budget_bytes = parse_size(budget_bytes) if budget_bytes is not None else None
    config = pipeline_config(**choices)
    kwargs = dict(config=config, budget=budget, budget_bytes=budget_bytes, metric=metric, mode=mode, resume=resume,
                  max_decisions=max_decisions, min_similarity=min_similarity, neighbours=neighbours,
                  max_merged_bytes=max_merged_bytes)
    if dry_run:
        with _dry_run_copy(db) as copy:
            report = run_compress(copy, **kwargs)
        report["dry_run"] = True
    else:
        report = run_compress(db, **kwargs)
    emit(report, as_json, _human(report))


@cli.command("methods")
@json_option
def methods_cmd(as_json) -> None:
    """List the compression methods, built-in and from plugins, with the options each declares.

    A plugin is a distribution that names a Method class in the
    `memrefine_edge.methods` entry point group; it is loaded here and
    whenever `--method` names it. A plugin that fails to load is listed
    with its error (exit 1).
    """
    from memrefine_edge.core import PluginError
    from memrefine_edge.methods import method_class, method_names

    rows: list[dict[str, Any]] = []
    broken = []
    for name in method_names():
        try:
            cls = method_class(name)
        except PluginError as exc:
            rows.append({"name": name, "error": str(exc)})
            broken.append(str(exc))
            continue
        module = ".".join(part for part in cls.__module__.split(".") if not part.startswith("_"))
        rows.append({"name": name, "class": f"{module}.{cls.__qualname__}", "uses_judge": cls.uses_judge,
                     "options": [{"name": key, "type": opt.type.__name__, "default": opt.default, "help": opt.help,
                                  "accepts": opt.describe(), "flag": opt.flag} for key, opt in cls.options.items()]})
    lines = []
    for row in rows:
        if "error" in row:
            lines.append(f"{row['name']}  (failed to load: see the error below)")
            continue
        judge = "; decides with the judge (--judge, --judge-model)" if row["uses_judge"] else ""
        lines.append(f"{row['name']}  {row['class']}{judge}")
        for opt in row["options"]:
            flag = f"  ({opt['flag']})" if opt["flag"] else ""
            lines.append(f"  {opt['name']}: {opt['accepts']}{flag}")
            lines.append(f"      {opt['help']}")
    emit({"methods": rows}, as_json, "\n".join(lines))
    for message in broken:
        click.echo(f"Error: {message}", err=True)
    if broken:
        raise SystemExit(1)


@cli.command()
@click.option("--budget", default="0.75", show_default=True, metavar="RATIO",
              help="Budget ratio for the sample (0.75 or 75%).")
@click.option("--db", "db_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where to write the demo store [default: a temporary file].")
@click.option("--threads", type=click.IntRange(1, 64), default=None, help="CPU threads for the models.")
@json_option
def demo(budget, db_path, threads, as_json) -> None:
    """Import the bundled sample memory store and compress it with the default models."""
    from memrefine_edge.engine import PipelineConfig
    from memrefine_edge.store import MemoryStore, import_file, parse_ratio, sample_path

    budget = parse_ratio(budget)
    with tempfile.TemporaryDirectory(prefix="memrefine-demo-") as tmp:
        db = db_path or Path(tmp) / "demo.db"
        if db.exists():
            raise StoreExistsError(f"{db} exists; the demo writes a new store (pick another --db)")
        with MemoryStore(db) as store:
            imported = import_file(store, sample_path(), format="jsonl")
        log(f"imported the bundled sample ({imported.imported} entries) into {db}")
        report = run_compress(db, config=PipelineConfig(threads=threads), budget=budget, budget_bytes=None,
                              metric="json", mode="live")
        with MemoryStore(db, create=False) as store:
            decisions = store.journal.decisions(report["run_id"]) if report["run_id"] else []
    examples = [
        f"  {d.action:8} {d.source:6} sim={d.similarity:.2f}  {d.a_id} / {d.b_id}: {d.reason[:90]}"
        for d in decisions[:12]
    ]
    report["examples"] = [d.__dict__ for d in decisions[:12]]
    emit(report, as_json, _human(report) + "\nfirst decisions:\n" + "\n".join(examples))


@cli.command()
@db_option
@click.argument("run_id")
@json_option
def undo(db_path, run_id, as_json) -> None:
    """Restore the store exactly as it was before RUN_ID."""
    from memrefine_edge.store import RunLock

    db = resolve_db(db_path)
    with RunLock(db), open_store(db_path) as store:
        n = store.journal.undo(run_id)
        stats = store.stats().as_dict()
    emit({"run_id": run_id, "decisions_undone": n, "stats": stats}, as_json,
         f"undid {n} decisions of run {run_id}; the store has {stats['entries']} entries again")


@cli.command(name="log")
@db_option
@click.argument("run_id", required=False)
@json_option
def log_cmd(db_path, run_id, as_json) -> None:
    """List runs, or the decisions of one run."""
    with open_store(db_path, read_only=True) as store:
        if run_id is None:
            runs = store.journal.runs()
            data = {"runs": [r.__dict__ for r in runs]}
            human = "\n".join(
                f"{r.run_id}  {r.status:8} {r.method:10} decisions {r.cursor:5}  {_describe_params(r.params)}"
                for r in runs
            ) or "no runs yet"
        else:
            ds = store.journal.decisions(run_id)
            data = {"run_id": run_id, "decisions": [d.__dict__ for d in ds]}
            human = "\n".join(
                f"{d.step:5} {d.action:8} {d.source:8} "
                + (f"sim={d.similarity:.3f} " if d.similarity is not None else "")
                + f"{d.a_id} {d.b_id or ''} -> -{','.join(d.removed_ids)} +{','.join(d.created_ids)}"
                f"  {d.size_before:,}->{d.size_after:,}  {d.reason[:80]}"
                for d in ds
            ) or "no decisions"
    emit(data, as_json, human)


def _describe_params(p: dict[str, Any]) -> str:
    budget = f"budget {p.get('budget')}" if p.get("budget") is not None else f"budget {p.get('budget_bytes')} B"
    return f"{budget} {p.get('metric')} {p.get('mode')} target {p.get('target_bytes'):,} B"


@cli.command(name="purge-history")
@db_option
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@json_option
def purge_history(db_path, yes, as_json) -> None:
    """Drop the removed entries kept for undo and the audit log's free text; return the space.

    The audit rows of preserve decisions go too (the preserved pairs stay, never proposed
    again); every delete, merge and eviction stays in the log. Purged runs become final.
    An interrupted run keeps its history (resuming needs it).
    """
    from memrefine_edge.store import RunLock

    db = resolve_db(db_path)
    if not yes and not click.confirm(f"Purge the undo history of {db}? Removed entries will be gone for good."):
        raise SystemExit(1)
    with RunLock(db), open_store(db_path) as store:
        before = store.stats().file_bytes
        n = store.journal.purge_history()
        after = store.stats().file_bytes
    emit({"purged_entries": n, "file_bytes_before": before, "file_bytes_after": after}, as_json,
         f"purged {n} history entries; file {before:,} -> {after:,} B")
