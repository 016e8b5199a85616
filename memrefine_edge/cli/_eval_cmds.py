"""``memrefine eval locomo``: the paper's storage-utility table on LoCoMo, measured locally."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from ._app import cli, current_backends, emit, json_option, log

__all__ = ["eval_group", "eval_locomo"]


def _csv(value: str | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    items = tuple(v.strip() for v in value.split(",") if v.strip())
    return items or None


def _numbers(value: str, kind: type, what: str, hint: str) -> tuple:
    """Comma-separated numbers of ``kind``; a usage error naming the option otherwise."""
    try:
        return tuple(kind(v) for v in value.split(",") if v.strip())
    except ValueError:
        raise click.BadParameter(f"must be comma-separated {what}, got {value!r}", param_hint=hint) from None


def _budgets(value: str) -> tuple[float, ...]:
    return _numbers(value, float, "numbers in (0, 1]", "--budgets")


def _sizes(value: str) -> tuple[int, ...]:
    return _numbers(value, int, "whole numbers of bytes", "--context-bytes")


@cli.group(name="eval")
def eval_group() -> None:
    """Evaluate compression on benchmarks (utility vs storage budget)."""


@eval_group.command(name="locomo")
@click.option("--data", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="LoCoMo JSON file (e.g. locomo-dev.json).")
@click.option("--samples", default=None, help="Comma-separated sample ids [default: every sample in the file].")
@click.option("--store", "store_kind", type=click.Choice(["turns", "observations", "text"]), default="turns",
              show_default=True, help="Memory representation: one entry per turn, per observation, or per paragraph.")
@click.option("--text-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder of SAMPLE.txt files for --store text [default: mem0-style-stores beside --data].")
@click.option("--methods", default="memrefine,rulesim,rulepr,fifo,random", show_default=True,
              help="Comma-separated methods; fifo and random are the floors (evict oldest / random entries).")
@click.option("--budgets", default="1.0,0.7,0.5,0.4,0.3,0.2", show_default=True,
              help="Comma-separated budget ratios in (0, 1]; 1.0 is the uncompressed base.")
@click.option("--context-bytes", default="1000,2000", show_default=True,
              help="Comma-separated context sizes C (UTF-8 bytes) for answer and evidence recall@C.")
@click.option("--qa-limit", type=int, default=None,
              help="Answer at most N questions per sample (stratified by category, fixed seed); recall uses all.")
@click.option("--no-qa", is_flag=True, help="Skip question answering (recall and storage only; no answer LLM).")
@click.option("--answer-model", type=click.Path(dir_okay=False), default=None,
              help="GGUF answer model [default: the bundled SmolLM2-135M].")
@click.option("--judge-model", type=click.Path(dir_okay=False), default=None,
              help="Judge: 'none' (the default: the learned redundancy scorer, no LLM), 'fact', 'bundled' or a "
                   "GGUF path (also the merge model with --merger llm).")
@click.option("--merge-min-similarity", type=click.FloatRange(-1, 1), default=None,
              help="memrefine: merge only at or above this cosine [default: the scorer's decision; 0.5 for "
                   "'fact' and GGUF judges].")
@click.option("--max-merged-bytes", type=click.IntRange(0), default=None,
              help="The longest merged text a merge may write; a longer merge keeps both entries (0: no limit) "
                   "[default: 1000 in live and strict mode, none in paper mode].")
@click.option("--merger", type=click.Choice(["llm", "concat"]), default="concat", show_default=True,
              help="concat: deterministic, fact-keeping merge (as `memrefine compress` without --merge-model); "
                   "llm: merges written by the judge model, checked by the merge guard.")
@click.option("--chain", is_flag=True,
              help="Compress one copy through the budgets in descending order, measuring at each (far "
                   "cheaper; in paper and strict mode the same stores as independent runs, in live mode each "
                   "budget continues from the last one's store, as upkeep would).")
@click.option("--metric", type=click.Choice(["json", "disk"]), default="json", show_default=True,
              help="Size metric the budgets are measured in.")
@click.option("--mode", type=click.Choice(["live", "paper", "strict"]), default="live", show_default=True,
              help="Budget mode of the compressor (paper: the paper's algorithm and its tables).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the --qa-limit sampling.")
@click.option("--threads", type=click.IntRange(1, 64), default=1, show_default=True,
              help="CPU threads for the encoder and the LLMs.")
@click.option("--keep-stores", is_flag=True, help="Keep the compressed store copies in OUT/work.")
@click.option("--stream", is_flag=True,
              help="Streaming evaluation: replay each conversation session by session into a store held by Upkeep "
                   "at each budget (default budgets 0.5,0.3), against fifo, random and one compression at the end.")
@click.option("--max-seconds", type=float, default=None,
              help="With --stream: stop a conversation's upkeep replay after this many seconds (recorded as not "
                   "finished).")
@click.option("--searches", type=int, default=None,
              help="With --stream: before each add, the assistant searches the upkeep store for the new entry's "
                   "text and takes this many results, so the store records uses [default: 5; 0: no searches].")
@click.option("--use-weight", type=float, default=None,
              help="With --stream: eviction's weight of how often searches returned an entry [default: the "
                   "compressor's].")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Output folder: results.json, report.md, utility_vs_budget.png, cache/.")
@json_option
@click.pass_context
def eval_locomo(ctx, data, samples, store_kind, text_dir, methods, budgets, context_bytes, qa_limit, no_qa,
                answer_model, judge_model, merge_min_similarity, max_merged_bytes, merger, chain, metric, mode, seed,
                threads, keep_stores, stream, max_seconds, searches, use_weight, out, as_json) -> None:
    """Storage against utility on LoCoMo: answer and evidence recall within a context of C bytes, answer presence,
    evidence recall@10 and QA F1/EM, per method and budget; or, with --stream, a store kept by Upkeep."""
    from memrefine_edge.eval import EvalConfig, run_eval

    if stream or max_seconds is not None or searches is not None or use_weight is not None:
        _stream(ctx, data=data, samples=samples, store_kind=store_kind, text_dir=text_dir, budgets=budgets,
                context_bytes=context_bytes, judge_model=judge_model, mode=mode, seed=seed, threads=threads,
                max_seconds=max_seconds, searches=searches, use_weight=use_weight, out=out, as_json=as_json)
        return

    config = EvalConfig(
        data=data, out=out, samples=_csv(samples), store=store_kind, methods=_csv(methods) or (),
        budgets=_budgets(budgets), context_bytes=_sizes(context_bytes), qa=not no_qa, qa_limit=qa_limit, seed=seed,
        threads=threads, chain=chain,
        metric=metric, mode=mode, merger=merger, judge_model=judge_model, answer_model=answer_model,
        merge_min_similarity=merge_min_similarity, max_merged_bytes=max_merged_bytes,
        text_dir=text_dir, keep_stores=keep_stores,
        command="memrefine " + " ".join(shlex.quote(_shown(a)) for a in sys.argv[1:]),
    )
    results = run_eval(config, log=log)
    summary = results["summary"]
    data_out = {"out": str(out), "elapsed_s": results["elapsed_s"], "summary": summary}
    lines = [f"wrote {out / 'results.json'} and {out / 'report.md'} in {results['elapsed_s']:.0f} s"]
    base = summary["base"]
    c0 = config.context_bytes[0]
    key = f"answer_recall@{c0}"
    for name, per in summary["methods"].items():
        cells = " ".join(f"{k}:{v[key]:.3f}" for k, v in per.items() if v.get(key) is not None)
        if base.get(key) is not None:
            lines.append(f"  {name:10} answer recall@{c0} base {base[key]:.3f} {cells}")
    emit(data_out, as_json, "\n".join(lines))


#: One-shot options a streaming evaluation has no use for (given with --stream: a usage error).
_NOT_STREAMED = ("methods", "qa_limit", "answer_model", "merge_min_similarity", "max_merged_bytes", "merger",
                 "chain", "metric", "keep_stores")


def _stream(ctx: click.Context, *, data, samples, store_kind, text_dir, budgets, context_bytes, judge_model, mode,
            seed, threads, max_seconds, searches, use_weight, out, as_json) -> None:
    """``eval locomo --stream``: the streaming evaluation (memrefine_edge.eval.run_stream)."""
    from click.core import ParameterSource

    from memrefine_edge.core import OptionConflictError
    from memrefine_edge.eval import StreamConfig, run_stream

    def given(name: str) -> bool:
        return ctx.get_parameter_source(name) not in (ParameterSource.DEFAULT, None)

    if not ctx.params["stream"]:
        option = ("--max-seconds" if max_seconds is not None else "--searches" if searches is not None
                  else "--use-weight")
        raise OptionConflictError(f"{option} applies to --stream")
    for name in _NOT_STREAMED:
        if given(name):
            raise OptionConflictError(f"--{name.replace('_', '-')} does not apply to --stream")
    config = StreamConfig(
        data=data, out=out, samples=_csv(samples), store=store_kind, text_dir=text_dir,
        budgets=_budgets(budgets) if given("budgets") else StreamConfig.budgets,
        context_bytes=_sizes(context_bytes), judge_model=judge_model, mode=mode if given("mode") else None,
        seed=seed, threads=threads, max_seconds=max_seconds,
        searches=StreamConfig.searches if searches is None else searches, use_weight=use_weight,
        command="memrefine " + " ".join(shlex.quote(_shown(a)) for a in sys.argv[1:]),
    )
    results = run_stream(config, backends=current_backends(), log=log)
    c0 = config.context_bytes[0]
    key = f"answer_recall@{c0}"
    lines = [f"wrote {out / 'results.json'} and {out / 'report.md'} in {results['elapsed_s']:.0f} s"]
    for budget, cell in results["summary"]["budgets"].items():
        cells = " ".join(f"{m}:{p[key]:.3f}" for m, p in cell["methods"].items() if p.get(key) is not None)
        lines.append(f"  budget {budget}: upkeep finished {cell['upkeep_finished']}/{cell['conversations']}, "
                     f"answer recall@{c0} {cells}")
    emit({"out": str(out), "elapsed_s": results["elapsed_s"], "summary": results["summary"]}, as_json,
         "\n".join(lines))


def _shown(arg: str) -> str:
    """A command-line word as results record it: an existing absolute path made portable."""
    from memrefine_edge.eval import portable

    return portable(arg) if arg.startswith("/") and Path(arg).exists() else arg
