"""Judge benchmarks: dev-set quality, latency, fast-path savings, merger validity.

    .venv/bin/python bench/judge.py devset   [--threads 1]   -> bench/results/judge_devset.{json,md}
    .venv/bin/python bench/judge.py latency  [--pairs 20] [--threads N]
                                     -> bench/results/judge_latency.json (N=1), judge_latency_Nthreads.json
    .venv/bin/python bench/judge.py fastpath [--top 300]     -> bench/results/judge_fastpath.json
    .venv/bin/python bench/judge.py merge                    -> bench/results/judge_merge.json

The dev set (bench/judge_devset.py) is rebuilt at run time from LoCoMo in
``$MEMREFINE_LOCOMO`` or ``../shared/data/locomo`` beside the repository.
Similarities come from the bundled MiniLM encoder. Timings are wall-clock on
a possibly shared machine where other processes may run at the same time, so
the load average at start and end is recorded with every result and absolute
numbers are noisy; compare rows within one run.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from judge_devset import DevPair, load_devset  # noqa: E402

from memrefine_edge.core import (
    Decision,
    JudgeOutputError,  # noqa: E402
)
from memrefine_edge.judging import FactJudge, GuardedJudge, Judge, LlamaJudge  # noqa: E402

RESULTS = ROOT / "bench" / "results"

NOTES = """## Notes and caveats

- Labels (ideal action, fact-losing actions) were written by one engineer; borderline pairs list two ideal
  actions (merge or preserve). A merge is counted fact-safe here; the merger is guarded separately.
- The guard's parameters (`min_word_cover=0.75`; `merge_min_similarity`, 0.75 until the LoCoMo budget runs
  showed that it stops every conversation at ~83% of its size, now 0.5 by default, both rows shown) and the
  filler lexicon were chosen while looking at this set, so the full-pipeline numbers are optimistic. The odd/even
  columns show how much they move between two halves (0.67 vs 0.71 at 0.5, 0.73 vs 0.82 at 0.75); there is no
  untouched test set.
- With the bundled SmolLM2-135M the zero-shot logit judge answers "delete a" for every pair (LLM-alone row), so
  the full pipeline equals fast path + fact guard: the "fact judge, no LLM" row gives identical decisions at no
  model cost. Few-shot prompting or generating JSON makes the model say "preserve" nearly always, which is safe
  but compresses little. The model's action scores carry no measurable signal here (AUC ~0.5 for
  merge-vs-preserve on complementary vs distinct pairs).
- The one fact-losing decision (jd-103) deletes "finishes writing her second screenplay" because the kept entry
  ("starts writing ...") covers 7 of its 8 content words: the soft word-coverage rule cannot see that the one
  missing verb is the event.
"""


def machine() -> dict[str, Any]:
    import llama_cpp

    from memrefine_edge.eval._report import cpu_model

    cpu = cpu_model()
    return {"platform": platform.platform(), "python": platform.python_version(), "cpu": cpu,
            "cpus": os.cpu_count(), "llama_cpp_python": llama_cpp.__version__, "loadavg": os.getloadavg()}


def act(d: Decision) -> str:
    return f"delete_{d.target}" if d.action == "delete" else d.action


def similarities(pairs: list[DevPair]) -> list[float]:
    from memrefine_edge.backends import OnnxEncoder

    enc = OnnxEncoder()
    va, vb = enc.embed([p.a for p in pairs]), enc.embed([p.b for p in pairs])
    return [max(-1.0, min(1.0, float((x * y).sum()))) for x, y in zip(va, vb)]


class AlwaysPreserve(Judge):
    def decide(self, a: str, b: str, similarity: float) -> Decision:
        return Decision("preserve", None, source="rule")


class SimThreshold(Judge):
    """RuleSim (paper App. C.1): delete the shorter entry at or above tau, merge below."""

    def __init__(self, tau: float) -> None:
        self.tau = tau

    def decide(self, a: str, b: str, similarity: float) -> Decision:
        if similarity >= self.tau:
            return Decision("delete", "a" if len(a) <= len(b) else "b", source="rule")
        return Decision("merge", None, source="rule")


def evaluate(name: str, judge: Judge, pairs: list[DevPair], sims: list[float]) -> dict[str, Any]:
    rows, lat = [], []
    invalid = 0
    for p, s in zip(pairs, sims):
        t0 = time.perf_counter()
        try:
            d = judge.decide(p.a, p.b, s)
        except JudgeOutputError:  # "LLM alone" rows: an invalid output is a preserve, counted
            invalid += 1
            d = Decision("preserve", None, source="fallback")
        lat.append(time.perf_counter() - t0)
        a = act(d)
        rows.append({"id": p.id, "category": p.category, "action": a, "source": d.source,
                     "ideal": a in p.ideal, "fact_losing": a in p.fact_losing})

    def score(sub: list[dict[str, Any]]) -> dict[str, float]:
        n = len(sub)
        return {"n": n, "accuracy": round(sum(r["ideal"] for r in sub) / n, 3),
                "fact_losing_rate": round(sum(r["fact_losing"] for r in sub) / n, 3)}

    by_cat = collections.defaultdict(list)
    for r in rows:
        by_cat[r["category"]].append(r)
    out = {"name": name, **score(rows), "invalid_outputs": invalid,
           "odd_ids": score(rows[0::2]), "even_ids": score(rows[1::2]),
           "by_category": {c: score(v) for c, v in sorted(by_cat.items())},
           "actions": dict(collections.Counter(r["action"] for r in rows)),
           "sources": dict(collections.Counter(r["source"] for r in rows)),
           "median_ms": round(statistics.median(lat) * 1000, 1),
           "losing_ids": [r["id"] for r in rows if r["fact_losing"]], "rows": rows}
    if isinstance(judge, GuardedJudge):
        out["stats"] = dict(judge.stats)
    return out


def cmd_devset(args: argparse.Namespace) -> None:
    from memrefine_edge.backends import OnnxEncoder

    pairs = load_devset()
    sims = similarities(pairs)
    info = machine()
    t = args.threads
    rows = [
        evaluate("LLM alone (logits, zero-shot)", LlamaJudge(n_threads=t), pairs, sims),
        evaluate("Full pipeline (fast path + LLM + guard)", GuardedJudge(LlamaJudge(n_threads=t)), pairs, sims),
        evaluate("Always preserve", AlwaysPreserve(), pairs, sims),
        evaluate("Similarity threshold (RuleSim, tau=0.8)", SimThreshold(0.8), pairs, sims),
        # extra rows: what each part contributes
        evaluate("Rules only (fast path, else preserve)", GuardedJudge(None), pairs, sims),
        evaluate("Fast path + fact judge, no LLM (GuardedJudge(FactJudge()))", GuardedJudge(FactJudge()), pairs, sims),
        evaluate("Full pipeline, guard merge threshold 0.75 (the former default)",
                 GuardedJudge(LlamaJudge(n_threads=t), merge_min_similarity=0.75), pairs, sims),
        evaluate("LLM alone (logits, few-shot)", LlamaJudge(n_threads=t, few_shot=True), pairs, sims),
        evaluate("Pipeline with few-shot LLM", GuardedJudge(LlamaJudge(n_threads=t, few_shot=True)), pairs, sims),
        evaluate("Similarity threshold (RuleSim, tau=0.7)", SimThreshold(0.7), pairs, sims),
        evaluate("Similarity threshold (RuleSim, tau=0.9)", SimThreshold(0.9), pairs, sims),
    ]
    if args.generate:
        rows.append(evaluate("LLM alone (generate, free JSON, few-shot)",
                             LlamaJudge(n_threads=t, mode="generate", few_shot=True), pairs, sims))
        rows.append(evaluate("Pipeline with generate (free JSON, few-shot)",
                             GuardedJudge(LlamaJudge(n_threads=t, mode="generate", few_shot=True)), pairs, sims))
    info["loadavg_end"] = os.getloadavg()
    result = {"command": "bench/judge.py devset" + (" --generate" if args.generate else ""),
              "pairs": len(pairs), "categories": dict(collections.Counter(p.category for p in pairs)),
              "similarity": f"cosine of the default encoder ({OnnxEncoder().model_id})", "machine": info, "results": rows}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "judge_devset.json").write_text(json.dumps(result, indent=1) + "\n")
    lines = ["# Judge dev set", "",
             f"`{result['command']}` -- {len(pairs)} labelled LoCoMo pairs "
             f"({', '.join(f'{k} {v}' for k, v in result['categories'].items())}), "
             "text rebuilt from `locomo-dev.json` at run time; default model SmolLM2-135M-Instruct Q4_1.",
             "", "| judge | ideal-action accuracy | fact-losing rate | odd ids acc / lose | even ids acc / lose |"
             " invalid | median ms |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['name']} | {r['accuracy']:.3f} | {r['fact_losing_rate']:.3f} | "
                     f"{r['odd_ids']['accuracy']:.3f} / {r['odd_ids']['fact_losing_rate']:.3f} | "
                     f"{r['even_ids']['accuracy']:.3f} / {r['even_ids']['fact_losing_rate']:.3f} | "
                     f"{r['invalid_outputs']} | {r['median_ms']} |")
    full = rows[1]
    lines += ["", "Full pipeline by category (accuracy / fact-losing):", ""]
    lines += [f"- {c}: {v['accuracy']:.3f} / {v['fact_losing_rate']:.3f} (n={v['n']})"
              for c, v in full["by_category"].items()]
    lines += ["", f"Full pipeline sources: {full['sources']}; stats: {full.get('stats')}",
              f"Fact-losing pairs (full pipeline): {full['losing_ids']}", "",
              f"Machine: {info['cpu']}, {info['cpus']} CPUs, threads={t}, load average start {info['loadavg']} "
              f"end {info['loadavg_end']} (shared machine).", "", NOTES]
    (RESULTS / "judge_devset.md").write_text("\n".join(lines))
    print("\n".join(lines))


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def cmd_latency(args: argparse.Namespace) -> None:
    from memrefine_edge.judging._fastpath import fast_path

    pairs = [p for p in load_devset() if fast_path(p.a, p.b) is None][: args.pairs]
    info = machine()
    configs: list[tuple[str, dict[str, Any]]] = [
        ("logits zero-shot, prefix reuse", {"mode": "logits", "few_shot": False, "reuse_prefix": True}),
        ("logits zero-shot, no reuse", {"mode": "logits", "few_shot": False, "reuse_prefix": False}),
        ("logits few-shot, prefix reuse", {"mode": "logits", "few_shot": True, "reuse_prefix": True}),
        ("logits few-shot, no reuse", {"mode": "logits", "few_shot": True, "reuse_prefix": False}),
        ("generate free JSON few-shot, prefix reuse", {"mode": "generate", "few_shot": True, "reuse_prefix": True}),
        ("generate free JSON few-shot, no reuse", {"mode": "generate", "few_shot": True, "reuse_prefix": False}),
        ("generate constrained JSON few-shot, prefix reuse",
         {"mode": "generate", "few_shot": True, "reuse_prefix": True, "constrained": True}),
        ("generate free JSON zero-shot, prefix reuse", {"mode": "generate", "few_shot": False, "reuse_prefix": True}),
    ]
    out = []
    for name, kw in configs:
        j = LlamaJudge(n_threads=args.threads, **kw)
        try:
            j.decide(pairs[0].a, pairs[0].b, 0.8)  # load + warm the shared prefix
        except JudgeOutputError:
            pass
        lat, toks, invalid = [], [], 0
        for p in pairs:
            t0 = time.perf_counter()
            try:
                j.decide(p.a, p.b, 0.8)
            except JudgeOutputError:
                invalid += 1
            dt = time.perf_counter() - t0
            lat.append(dt)
            toks.append((j.last_prompt_tokens, j.last_generated_tokens))
        tot = sum(lat)
        row = {"config": name, "pairs": len(pairs), "median_ms": round(statistics.median(lat) * 1000, 1),
               "p90_ms": round(_pct(lat, 0.9) * 1000, 1),
               "median_prompt_tokens": statistics.median(t[0] for t in toks),
               "median_generated_tokens": statistics.median(t[1] for t in toks),
               "prompt_plus_generated_tokens_per_s": round(sum(a + b for a, b in toks) / tot, 1),
               "generated_tokens_per_s": round(sum(b for _, b in toks) / tot, 1), "invalid_outputs": invalid}
        print(json.dumps(row))
        out.append(row)
    info["loadavg_end"] = os.getloadavg()
    result = {"command": f"bench/judge.py latency --pairs {args.pairs} --threads {args.threads}",
              "model": "SmolLM2-135M-Instruct Q4_1", "threads": args.threads, "machine": info,
              "note": "wall clock per pair after one warm-up call; shared machine (see loadavg)", "results": out}
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = "judge_latency.json" if args.threads == 1 else f"judge_latency_{args.threads}threads.json"
    (RESULTS / name).write_text(json.dumps(result, indent=1) + "\n")


def cmd_fastpath(args: argparse.Namespace) -> None:
    """Share of the most similar LoCoMo pairs the fast path decides (= LLM calls saved)."""
    import numpy as np
    from judge_devset import _samples

    from memrefine_edge.backends import OnnxEncoder
    from memrefine_edge.judging._fastpath import fast_path

    enc = OnnxEncoder()
    per: list[dict[str, Any]] = []
    for sid, s in sorted(_samples().items()):
        for kind in ("turns", "observations"):
            if kind == "turns":
                texts = [f"{t['speaker']}: {t['text']}" for k, v in s["conversation"].items()
                         if isinstance(v, list) for t in v]
            else:
                texts = [o[0] for sess in s["observation"].values() for items in sess.values() for o in items]
            v = enc.embed(texts)
            sim = v @ v.T
            iu = np.triu_indices(len(texts), 1)
            order = np.argsort(-sim[iu])[: args.top]
            reasons = collections.Counter()
            for k in order:
                i, j = iu[0][k], iu[1][k]
                hit = fast_path(texts[i], texts[j])
                reasons[hit.reason if hit else "to the LLM"] += 1
            per.append({"sample": sid, "kind": kind, "entries": len(texts), "pairs": len(order),
                        "rule_hits": len(order) - reasons["to the LLM"], "reasons": dict(reasons)})
            print(json.dumps(per[-1]))
    summary = {}
    for kind in ("turns", "observations"):
        rows = [r for r in per if r["kind"] == kind]
        summary[kind] = {"pairs": sum(r["pairs"] for r in rows), "rule_hits": sum(r["rule_hits"] for r in rows)}
        summary[kind]["llm_calls_saved_share"] = round(summary[kind]["rule_hits"] / summary[kind]["pairs"], 3)
    result = {"command": f"bench/judge.py fastpath --top {args.top}",
              "method": f"per LoCoMo sample and entry kind, the top {args.top} pairs by MiniLM cosine (each "
                        "judged once, as a first pass would), counted by the fast-path rule that decides them",
              "summary": summary, "per_sample": per}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "judge_fastpath.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(summary))


def cmd_merge(args: argparse.Namespace) -> None:
    from memrefine_edge.judging import GuardedMerger, LlamaMerger, merge_instruction_for

    pairs = [p for p in load_devset() if p.category == "complementary"][: args.pairs]
    out = []
    for name, inner in (("LlamaMerger (constrained JSON) + guard", LlamaMerger(n_threads=args.threads)),
                        ("concat only (GuardedMerger(None))", None)):
        m = GuardedMerger(inner)
        lat, ratio = [], []
        for p in pairs:
            t0 = time.perf_counter()
            r = m.merge(p.a, p.b, merge_instruction_for(p.a, p.b))
            lat.append(time.perf_counter() - t0)
            ratio.append(len(r.content) / (len(p.a) + len(p.b)))
        out.append({"merger": name, "pairs": len(pairs), "stats": dict(m.stats),
                    "median_ms": round(statistics.median(lat) * 1000, 1),
                    "median_length_ratio": round(statistics.median(ratio), 3)})
        print(json.dumps(out[-1]))
    result = {"command": f"bench/judge.py merge --pairs {args.pairs}", "machine": machine(), "results": out}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "judge_merge.json").write_text(json.dumps(result, indent=1) + "\n")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("devset")
    d.add_argument("--threads", type=int, default=1)
    d.add_argument("--generate", action="store_true", help="also the (slow) generate-mode rows")
    lt = sub.add_parser("latency")
    lt.add_argument("--pairs", type=int, default=20)
    lt.add_argument("--threads", type=int, default=1)
    fp = sub.add_parser("fastpath")
    fp.add_argument("--top", type=int, default=300)
    mg = sub.add_parser("merge")
    mg.add_argument("--pairs", type=int, default=10)
    mg.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    fn: Callable[[argparse.Namespace], None] = {"devset": cmd_devset, "latency": cmd_latency,
                                                "fastpath": cmd_fastpath, "merge": cmd_merge}[args.cmd]
    fn(args)


if __name__ == "__main__":
    main()
