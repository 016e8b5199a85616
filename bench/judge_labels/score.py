"""Score a judge on the labelled pairs: ideal-action accuracy, acceptable, fact-losing, cosine AUC.

    python bench/judge_labels/score.py [--split test|tune|all]
    python bench/judge_labels/score.py --set v2 --split tune   # the second set (bench/judge_labels_v2/)
    python bench/judge_labels/score.py --set v3                # the third set, all test (bench/judge_labels_v3/)
    python bench/judge_labels/score.py --set v4                # the fourth set, all test (bench/judge_labels_v4/)

The judge is the product's default judge (``--judge scorer``: fast path, redundancy scorer, fact checks)
or the word-coverage fact judge (``--judge fact``). A decision is ``delete_a``/``delete_b``/``merge``/
``preserve``; it matches an ideal ``delete_any`` when it deletes either side. Writes
bench/results/judge_labels_<judge>_<split>.json, for the second set
bench/results/judge_labels_v2_<split>.json (the scorer) or judge_labels_v2_<judge>_<split>.json, for the
third and fourth bench/results/judge_labels_v3_test.json and _v4_test.json with each pair's decision. The
second set's test part is scored once per judge decided on without it; its default split is tune. The third
and fourth sets are test parts only, never trained or chosen on: score each once per judge.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

from pairs import auc, outcome, resolve  # noqa: E402

from memrefine_edge import __version__  # noqa: E402
from memrefine_edge.backends import OnnxEncoder  # noqa: E402
from memrefine_edge.eval._report import machine_info, write_json  # noqa: E402
from memrefine_edge.judging import default_judge  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", choices=("v1", "v2", "v3", "v4"), default="v1", dest="label_set",
                    help="v1: bench/judge_labels (LoCoMo pairs); v2, v3, v4: bench/judge_labels_v2, _v3, _v4 "
                         "(synthetic stores, swaps)")
    ap.add_argument("--split", choices=("test", "tune", "all"), default=None,
                    help="default: test for v1, v3 and v4, tune for v2")
    ap.add_argument("--judge", choices=("scorer", "fact"), default="scorer",
                    help="scorer: the learned redundancy scorer behind the fact checks; fact: the word-coverage "
                         "fact judge and guard")
    ap.add_argument("--merge-min-similarity", type=float, default=None,
                    help="the guard's merge threshold [default: the product's]; tune it on --split tune only")
    args = ap.parse_args()
    v2 = args.label_set in ("v2", "v3", "v4")  # the synthetic sets: the pairs carry their text
    if args.split is None:
        args.split = "tune" if args.label_set == "v2" else "test"
    folder = REPO / "bench" / f"judge_labels_{args.label_set}" if v2 else HERE
    pairs = {r["id"]: r for r in map(json.loads, (folder / "pairs.jsonl").read_text(encoding="utf-8").splitlines())}
    labels = [r for r in map(json.loads, (folder / "labels.jsonl").read_text(encoding="utf-8").splitlines())
              if args.split == "all" or r["split"] == args.split]
    text = (lambda pair, side: pair[side]) if v2 else (lambda pair, side: resolve(pair[side]))  # noqa: E731
    encoder = OnnxEncoder()
    # The judge names are the product's own (``--judge-model scorer|fact``): the same pipelines compress uses.
    judge = default_judge(args.judge, merge_min_similarity=args.merge_min_similarity)

    hits = ok = losing = 0
    by_kind: dict[str, Counter[str]] = {}
    by_ideal: Counter[str] = Counter()
    confusion: Counter[tuple[str, str]] = Counter()
    redundant, distinct = [], []
    decided = []
    for lab in labels:
        a, b = text(pairs[lab["id"]], "a"), text(pairs[lab["id"]], "b")
        va, vb = encoder.embed([a, b])
        sim = max(-1.0, min(1.0, float(va @ vb)))
        d = judge.decide(a, b, sim)
        action = f"delete_{d.target}" if d.action == "delete" else d.action
        ideal = lab["ideal"]
        match, acceptable, lost = outcome(action, lab)
        decided.append({"id": lab["id"], "action": action, "source": d.source, "ideal": ideal,
                        "acceptable": bool(acceptable), "fact_losing": bool(lost)})
        hits += match
        ok += acceptable
        losing += lost
        by_ideal[ideal] += 1
        confusion[(ideal, action)] += 1
        groups = [lab["kind"]] + (["updates"] if lab.get("supersedes") else [])
        for g in groups:
            tally = by_kind.setdefault(g, Counter())
            tally.update(pairs=1, ideal=match, acceptable=acceptable, fact_losing=lost)
        (redundant if ideal.startswith("delete") else distinct).append(sim)
    n = len(labels)
    cosine_auc = auc(redundant + distinct, [True] * len(redundant) + [False] * len(distinct))
    out = {"split": args.split, "pairs": n, "judge": judge.describe(), "encoder": encoder.model_id,
           "ideal_accuracy": round(hits / n, 4), "acceptable_rate": round(ok / n, 4),
           "fact_losing_rate": round(losing / n, 4), "cosine_auc_redundant_vs_not": cosine_auc,
           "by_kind": {k: {"pairs": c["pairs"], "ideal_accuracy": round(c["ideal"] / c["pairs"], 4),
                           "acceptable_rate": round(c["acceptable"] / c["pairs"], 4),
                           "fact_losing_rate": round(c["fact_losing"] / c["pairs"], 4)} for k, c in by_kind.items()},
           "ideal_counts": dict(by_ideal), "confusion": {f"{i} -> {a}": c for (i, a), c in sorted(confusion.items())},
           "machine": machine_info(__version__), "command": "python bench/judge_labels/score.py"
           + (f" --set {args.label_set}" if v2 else "") + f" --judge {args.judge} --split {args.split}"
           + (f" --merge-min-similarity {args.merge_min_similarity}" if args.merge_min_similarity is not None else "")}
    print(json.dumps({k: out[k] for k in ("split", "pairs", "ideal_accuracy", "acceptable_rate", "fact_losing_rate",
                                          "cosine_auc_redundant_vs_not")}))
    for k, c in out["by_kind"].items():
        print(f"  {k}: {c}")
    for k, c in out["confusion"].items():
        print(f"  {k}: {c}")
    suffix = f"_mms{args.merge_min_similarity:g}" if args.merge_min_similarity is not None else ""
    if args.label_set in ("v3", "v4"):
        out["decisions"] = decided
    if v2:
        name = (f"judge_labels_{args.label_set}_{args.split}" if args.judge == "scorer"
                else f"judge_labels_{args.label_set}_{args.judge}_{args.split}")
    else:
        name = f"judge_labels_{args.judge}_{args.split}"
    write_json(REPO / "bench" / "results" / f"{name}{suffix}.json", out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
