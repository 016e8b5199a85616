"""memrefine judge commands: ``judge-pairs``."""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import click

from ._app import cli, current_backends, emit, json_option, judge_choice, log

__all__ = ["judge_pairs", "read_pairs"]


def read_pairs(path: Path) -> list[dict[str, Any]]:
    """Parse and validate every line of a pairs file before any pair is judged.

    Each non-blank line is ``{"id", "a", "b", "similarity"?}``; anything else
    raises :class:`ImportFormatError` naming the 1-based line.
    """
    from memrefine_edge.core import ImportFormatError
    from memrefine_edge.store import json_lines

    pairs: list[dict[str, Any]] = []
    seen: set[str] = set()
    for no, obj in json_lines(path):
        if not isinstance(obj, dict):
            raise ImportFormatError("expected a JSON object with id, a, b", line=no)
        pid = obj.get("id")
        if isinstance(pid, bool) or not isinstance(pid, (str, int)) or str(pid) == "":
            raise ImportFormatError("missing or invalid 'id' (a string or integer)", line=no)
        if str(pid) in seen:
            raise ImportFormatError(f"duplicate id {pid!r}", line=no)
        seen.add(str(pid))
        for key in ("a", "b"):
            if not isinstance(obj.get(key), str) or not obj[key].strip():
                raise ImportFormatError(f"'{key}' must be a non-empty string", line=no)
            try:
                obj[key].encode("utf-8")
            except UnicodeEncodeError as exc:  # "\ud800" escapes decode to lone surrogates
                raise ImportFormatError(f"'{key}' is not valid Unicode text: {exc.reason}", line=no) from exc
        sim = obj.get("similarity")
        if sim is not None:
            if isinstance(sim, bool) or not isinstance(sim, (int, float)) or math.isnan(sim) or not -1 <= sim <= 1:
                raise ImportFormatError("'similarity' must be a number in [-1, 1]", line=no)
        pairs.append({"id": pid, "a": obj["a"], "b": obj["b"], "similarity": sim})
    return pairs


def _fill_similarity(pairs: list[dict[str, Any]]) -> None:
    todo = [p for p in pairs if p["similarity"] is None]
    if not todo:
        return
    from memrefine_edge.engine import PipelineConfig

    enc = current_backends().encoder(PipelineConfig())
    va = enc.embed([p["a"] for p in todo])
    vb = enc.embed([p["b"] for p in todo])
    for p, x, y in zip(todo, va, vb, strict=True):
        p["similarity"] = max(-1.0, min(1.0, float((x * y).sum())))


@cli.command("judge-pairs")
@click.argument("in_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--judge", type=click.Choice(("scorer", "fact", "gguf")), default=None,
              help="scorer (the default: the learned redundancy scorer, no LLM), fact (word-coverage rules) or "
                   "gguf (a GGUF model: SmolLM2-135M-Instruct unless --judge-model names one).")
@click.option("--judge-model", type=click.Path(dir_okay=False), default=None,
              help="A GGUF judge model file (implies --judge gguf). For compatibility it also takes the words "
                   "'none' (--judge scorer), 'fact' (--judge fact) and 'bundled' (--judge gguf).")
@click.option("--threads", type=click.IntRange(min=1), default=1, show_default=True, help="llama.cpp threads.")
@click.option("--mode", type=click.Choice(["logits", "generate"]), default="logits", show_default=True,
              help="Score the three actions from logits, or generate the JSON decision.")
@click.option("--rules-only", is_flag=True, help="No model: fast-path rules, otherwise preserve.")
@click.option("--facts-only", is_flag=True, help="Same as --judge fact.")
@click.option("--out", "out_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the JSON lines here (atomically) instead of stdout.")
@json_option
def judge_pairs(in_file: Path, judge: str | None, judge_model: str | None, threads: int, mode: str, rules_only: bool,
                facts_only: bool, out_file: Path | None, as_json: bool) -> None:
    """Judge each pair of IN_FILE (JSON lines {id, a, b, similarity?}) with the product's judge.

    Prints one JSON line per pair: {id, action, target, merge_instruction,
    reason, source, latency_ms}. Pairs without a similarity are embedded
    with the bundled encoder. The whole file is validated first, so a
    malformed line stops the command before anything is written.
    """
    from memrefine_edge.judging import GuardedJudge, JudgeKind, default_judge

    if rules_only and (facts_only or judge is not None or judge_model is not None):
        raise click.UsageError("--rules-only excludes --facts-only, --judge and --judge-model")
    kind, model = judge_choice(judge, judge_model)
    if facts_only and kind not in (None, JudgeKind.FACT):
        raise click.UsageError("--facts-only is --judge fact; give one of them")
    if facts_only:
        kind = JudgeKind.FACT
    if mode != "logits" and kind is not JudgeKind.GGUF:
        raise click.UsageError("--mode applies to a GGUF judge (--judge gguf, --judge-model)")
    pairs = read_pairs(in_file)  # every value checked here: the judge is asked with valid arguments only
    _fill_similarity(pairs)
    the_judge = GuardedJudge(None) if rules_only else default_judge(kind, model_path=model, n_threads=threads,
                                                                    mode=mode)  # type: ignore[arg-type]
    rows = []
    for i, p in enumerate(pairs, 1):
        t0 = time.perf_counter()
        d = the_judge.decide(p["a"], p["b"], float(p["similarity"]))
        ms = (time.perf_counter() - t0) * 1000
        rows.append({"id": p["id"], **d.as_dict(), "latency_ms": round(ms, 1)})
        if i % 25 == 0:
            log(f"judged {i}/{len(pairs)}")
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    if out_file is None:
        sys.stdout.write(text)
    else:
        out_file.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=out_file.parent, prefix=f".{out_file.name}.", suffix=".part")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, out_file)
    log(f"{len(rows)} pairs judged; stats: " + json.dumps(the_judge.stats))
    if as_json and out_file is not None:
        emit({"pairs": len(rows), "out": str(out_file), "stats": the_judge.stats}, True)
