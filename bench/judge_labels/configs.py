"""Every judge configuration on the labelled test pairs: accuracy, fact-losing, AUC, milliseconds per pair.

    python bench/judge_labels/configs.py                  # uses the LLM scores already measured
    python bench/judge_labels/configs.py --run-llm-judge  # also runs the bundled GGUF through the product's
                                                          # LlamaJudge behind the guard (about 2 s a pair here)

Configurations (each behind the fast path):

- ``scorer``: the default judge, the learned redundancy scorer with its hard fact checks;
- ``fact``: the word-coverage FactJudge behind the guard (the previous default without a model);
- ``llm-judge <model>``: the product's LlamaJudge (3-way logits) behind the word-coverage guard, run here
  with ``--run-llm-judge`` (decisions cached in ``bench/results/judge_llm/pipeline-<model>.jsonl``);
- ``llm-alone <model> <form>``: the yes/no next-token scores of ``llm_scores.py`` turned into a decision
  (``same``: P(yes) >= t deletes the side the fact checks allow, shorter first; ``adds``: neither adds ->
  delete the shorter, one adds -> delete the other, both -> preserve), t chosen on tune;
- ``scorer+llm <model>``: the scorer, with the LLM's ``same`` score consulted only when the scorer's top
  probability is below u: P(yes) >= t deletes (the side the scorer prefers, if the fact checks allow), else
  preserve. u and t are chosen on tune (scorer weights were fitted there too, so tune numbers flatter it).

Milliseconds: the scorer's and the fact judge's are timed here; an LLM's are the per-pair times recorded when
its scores were measured (other work was running: see those files' load averages). Writes
``bench/results/judge_configs.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

from pairs import auc, outcome  # noqa: E402
from train_scorer import load  # noqa: E402

from memrefine_edge import __version__  # noqa: E402
from memrefine_edge.eval._report import machine_info, write_json  # noqa: E402
from memrefine_edge.judging import ScorerJudge, default_judge  # noqa: E402
from memrefine_edge.judging._fastpath import fast_path  # noqa: E402
from memrefine_edge.text import missing_facts  # noqa: E402

LLM_DIR = REPO / "bench" / "results" / "judge_llm"
OUT = REPO / "bench" / "results" / "judge_configs"
BAND = (0.4, 0.5, 0.6, 0.7)
THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)


def _action(d: Any) -> str:
    return f"delete_{d.target}" if d.action == "delete" else d.action


def metrics(acts: dict[str, str], rows: list[dict], score: dict[str, float] | None = None) -> dict[str, Any]:
    """Ideal accuracy, acceptable rate, fact-losing rate, and the AUC of ``score`` for 'ideal is a delete'."""
    hits, ok, losing = (sum(flags) for flags in zip(*(outcome(acts[r["id"]], r) for r in rows), strict=True))
    n = len(rows)
    out: dict[str, Any] = {"pairs": n, "ideal_accuracy": round(hits / n, 4), "acceptable_rate": round(ok / n, 4),
                           "fact_losing_rate": round(losing / n, 4)}
    if score is not None:
        out["auc_delete"] = auc([score[r["id"]] for r in rows], [r["ideal"].startswith("delete") for r in rows])
    return out


def _safe_delete(r: dict, prefer: list[str]) -> str | None:
    for side in prefer:
        gone, kept = (r["a"], r["b"]) if side == "a" else (r["b"], r["a"])
        if not missing_facts(gone, kept, min_word_cover=0.0):
            return f"delete_{side}"
    return None


def _shorter_first(r: dict) -> list[str]:
    return ["a", "b"] if len(r["a"]) <= len(r["b"]) else ["b", "a"]


def _llm_rows(model: str) -> dict[tuple[str, str], dict]:
    path = LLM_DIR / f"{model}.jsonl"
    if not path.is_file():
        return {}
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    return {(x["id"], x["form"]): x for x in rows}


def _run_llm_judge(model_file: str, name: str, rows: list[dict]) -> dict[str, dict]:
    """The product's LlamaJudge behind the guard, cached per pair (numbers only)."""
    path = LLM_DIR / f"pipeline-{name}.jsonl"
    done = {json.loads(x)["id"]: json.loads(x) for x in path.read_text().splitlines()} if path.is_file() else {}
    judge = default_judge("gguf", model_path=REPO / "models" / model_file, n_threads=1)
    with path.open("a", encoding="utf-8") as fh:
        for i, r in enumerate(rows, 1):
            if r["id"] in done:
                continue
            t0 = time.perf_counter()
            d = judge.decide(r["a"], r["b"], r["sim"])
            rec = {"id": r["id"], "action": _action(d), "source": d.source,
                   "ms": round((time.perf_counter() - t0) * 1000, 1)}
            fh.write(json.dumps(rec) + "\n")
            fh.flush()
            done[r["id"]] = rec
            if i % 25 == 0:
                print(f"llm-judge {name}: {i}/{len(rows)}", file=sys.stderr)
    return done


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run-llm-judge", action="store_true")
    args = ap.parse_args()
    rows = load(None)
    by_split = {s: [r for r in rows if r["split"] == s] for s in ("tune", "test")}
    table: dict[str, dict[str, Any]] = {}

    # The scorer (the default) and the fact judge, timed here.
    scorer_judge, fact = ScorerJudge(), default_judge("fact")
    s_act: dict[str, str] = {}
    p_del: dict[str, float] = {}
    top: dict[str, float] = {}
    prefer: dict[str, list[str]] = {}
    f_act: dict[str, str] = {}
    t_s = t_f = 0.0
    for r in rows:
        t0 = time.perf_counter()
        hit = fast_path(r["a"], r["b"])
        d = hit or scorer_judge.decide(r["a"], r["b"], r["sim"])
        t_s += time.perf_counter() - t0
        s_act[r["id"]] = _action(d)
        sc = scorer_judge.scorer.score(r["a"], r["b"], r["sim"])
        p_del[r["id"]] = sc.delete_a + sc.delete_b
        top[r["id"]] = 1.0 if hit else max(sc.as_dict().values())
        prefer[r["id"]] = ["a", "b"] if sc.delete_a >= sc.delete_b else ["b", "a"]
        t0 = time.perf_counter()
        f_act[r["id"]] = _action(fact.decide(r["a"], r["b"], r["sim"]))
        t_f += time.perf_counter() - t0
    ms_s, ms_f = 1000 * t_s / len(rows), 1000 * t_f / len(rows)
    cos = {r["id"]: r["sim"] for r in rows}
    table["scorer (default)"] = {s: {**metrics(s_act, by_split[s], p_del), "ms_per_pair": round(ms_s, 3)}
                                 for s in by_split}
    table["fact judge"] = {s: {**metrics(f_act, by_split[s], cos), "ms_per_pair": round(ms_f, 3)} for s in by_split}

    if args.run_llm_judge:
        recs = _run_llm_judge("SmolLM2-135M-Instruct.Q4_1.gguf", "smollm-135m", by_split["test"])
        acts = {k: v["action"] for k, v in recs.items()}
        ms = sum(v["ms"] for v in recs.values()) / max(1, len(recs))
        table["llm-judge smollm-135m (bundled, behind the guard)"] = {
            "test": {**metrics(acts, by_split["test"]), "ms_per_pair": round(ms, 1)}}
    elif (LLM_DIR / "pipeline-smollm-135m.jsonl").is_file():
        recs = {json.loads(x)["id"]: json.loads(x)
                for x in (LLM_DIR / "pipeline-smollm-135m.jsonl").read_text().splitlines()}
        test = [r for r in by_split["test"] if r["id"] in recs]
        if len(test) == len(by_split["test"]):
            ms = sum(recs[r["id"]]["ms"] for r in test) / len(test)
            table["llm-judge smollm-135m (bundled, behind the guard)"] = {
                "test": {**metrics({k: v["action"] for k, v in recs.items()}, test), "ms_per_pair": round(ms, 1)}}

    for model in ("smollm-135m", "qwen-0.5b", "qwen-1.5b"):
        llm = _llm_rows(model)
        if not llm:
            continue
        have = {s: [r for r in by_split[s] if (r["id"], "same") in llm] for s in by_split}
        if not have["test"]:
            continue
        same = {r["id"]: llm[(r["id"], "same")]["p_yes_ab"] for s in have for r in have[s]}
        ms_same = {r["id"]: llm[(r["id"], "same")]["ms"] + llm.get((r["id"], "adds"), {}).get("ms", 0.0)
                   for s in have for r in have[s]}

        def alone(rs: list[dict], t: float, same: dict[str, float] = same) -> dict[str, str]:
            out = {}
            for r in rs:
                hit = fast_path(r["a"], r["b"])
                if hit is not None:
                    out[r["id"]] = _action(hit)
                    continue
                d = _safe_delete(r, _shorter_first(r)) if same[r["id"]] >= t else None
                out[r["id"]] = d or "preserve"
            return out

        def combo(rs: list[dict], u: float, t: float, same: dict[str, float] = same) -> tuple[dict[str, str], int]:
            out, asked = {}, 0
            for r in rs:
                if top[r["id"]] >= u:
                    out[r["id"]] = s_act[r["id"]]
                    continue
                asked += 1
                d = _safe_delete(r, prefer[r["id"]]) if same[r["id"]] >= t else None
                out[r["id"]] = d or "preserve"
            return out, asked

        if have["tune"]:
            t_best = max(THRESHOLDS, key=lambda t: metrics(alone(have["tune"], t), have["tune"])["ideal_accuracy"])
            u_best, t2 = max(((u, t) for u in BAND for t in THRESHOLDS),
                             key=lambda ut: metrics(combo(have["tune"], *ut)[0], have["tune"])["ideal_accuracy"])
        else:
            t_best, (u_best, t2) = 0.5, (0.5, 0.5)
        test = have["test"]
        ms_llm = sum(ms_same[r["id"]] for r in test) / len(test)
        table[f"llm-alone {model} same (t={t_best:g} on tune)"] = {
            "test": {**metrics(alone(test, t_best), test, same), "ms_per_pair": round(ms_llm, 1)},
            "tune_pairs_with_scores": len(have["tune"])}
        acts, asked = combo(test, u_best, t2)
        table[f"scorer+llm {model} (u={u_best:g}, t={t2:g} on tune)"] = {
            "test": {**metrics(acts, test, p_del), "consulted": asked,
                     "ms_per_pair": round(ms_s + ms_llm * asked / len(test), 1)},
            "tune_pairs_with_scores": len(have["tune"])}
        table[f"scorer on the same {len(test)} pairs (for {model})"] = {
            "test": {**metrics(s_act, test, p_del), "ms_per_pair": round(ms_s, 3)}}

    out = {"table": table, "pairs": {s: len(v) for s, v in by_split.items()}, "machine": machine_info(__version__),
           "command": "python bench/judge_labels/configs.py" + (" --run-llm-judge" if args.run_llm_judge else "")}
    write_json(OUT.with_suffix(".json"), out)
    lines = ["# Judge configurations on the labelled pairs", "",
             "Produced by `" + out["command"] + "` (see the script's docstring for each configuration). "
             "Test split: conv-43, conv-44, conv-47 (313 pairs), nothing fitted on it. Machine: "
             f"{out['machine'].get('cpu', '?')}, {out['machine'].get('cores', '?')} cores, other work running.", "",
             "| configuration | pairs | ideal accuracy | acceptable | fact-losing | AUC delete | ms / pair |",
             "|---|---|---|---|---|---|---|"]
    for name, res in table.items():
        m = res["test"]
        auc = "-" if m.get("auc_delete") is None else f"{m['auc_delete']:.3f}"
        lines.append(f"| {name} | {m['pairs']} | {m['ideal_accuracy']:.3f} | {m['acceptable_rate']:.3f} | "
                     f"{m['fact_losing_rate']:.3f} | {auc} | {m['ms_per_pair']} |")
    lines += ["", "AUC delete: the configuration's score for 'the ideal action is a delete' (scorer: P(delete_a) + "
              "P(delete_b); fact judge: cosine; LLM: P(yes) of the `same` question)."]
    OUT.with_suffix(".md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
