"""Score a judge on the labelled pairs: ideal-action accuracy, acceptable, fact-losing, cosine AUC.

    python bench/judge_labels/score.py [--split test|tune|all]

The judge is the product's model-free judge (fast path, fact judge, fact guard: the pipeline's decisions
with the bundled 135M model equal these). A decision is ``delete_a``/``delete_b``/``merge``/``preserve``;
it matches an ideal ``delete_any`` when it deletes either side. Writes
bench/results/judge_labels_<split>.json.
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

from pairs import PAIRS, auc, outcome, resolve  # noqa: E402

from memrefine_edge import __version__  # noqa: E402
from memrefine_edge.backends import OnnxEncoder  # noqa: E402
from memrefine_edge.eval._report import machine_info, write_json  # noqa: E402
from memrefine_edge.judging import default_judge  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", choices=("test", "tune", "all"), default="test")
    ap.add_argument("--judge", choices=("scorer", "fact"), default="scorer",
                    help="scorer: the learned redundancy scorer behind the fact checks; fact: the word-coverage "
                         "fact judge and guard")
    ap.add_argument("--merge-min-similarity", type=float, default=None,
                    help="the guard's merge threshold [default: the product's]; tune it on --split tune only")
    args = ap.parse_args()
    pairs = {r["id"]: r for r in map(json.loads, PAIRS.read_text().splitlines())}
    labels = [r for r in map(json.loads, (HERE / "labels.jsonl").read_text().splitlines())
              if args.split == "all" or r["split"] == args.split]
    encoder = OnnxEncoder()
    # The judge names are the product's own (``--judge-model scorer|fact``): the same pipelines compress uses.
    judge = default_judge(args.judge, merge_min_similarity=args.merge_min_similarity)

    hits = ok = losing = 0
    by_ideal: Counter[str] = Counter()
    confusion: Counter[tuple[str, str]] = Counter()
    redundant, distinct = [], []
    for lab in labels:
        a, b = resolve(pairs[lab["id"]]["a"]), resolve(pairs[lab["id"]]["b"])
        va, vb = encoder.embed([a, b])
        sim = max(-1.0, min(1.0, float(va @ vb)))
        d = judge.judge(a, b, sim)
        action = f"delete_{d.target}" if d.action == "delete" else d.action
        ideal = lab["ideal"]
        match, acceptable, lost = outcome(action, lab)
        hits += match
        ok += acceptable
        losing += lost
        by_ideal[ideal] += 1
        confusion[(ideal, action)] += 1
        (redundant if ideal.startswith("delete") else distinct).append(sim)
    n = len(labels)
    cosine_auc = auc(redundant + distinct, [True] * len(redundant) + [False] * len(distinct))
    out = {"split": args.split, "pairs": n, "judge": judge.describe(), "encoder": encoder.model_id,
           "ideal_accuracy": round(hits / n, 4), "acceptable_rate": round(ok / n, 4),
           "fact_losing_rate": round(losing / n, 4), "cosine_auc_redundant_vs_not": cosine_auc,
           "ideal_counts": dict(by_ideal), "confusion": {f"{i} -> {a}": c for (i, a), c in sorted(confusion.items())},
           "machine": machine_info(__version__), "command": "python bench/judge_labels/score.py"
           + f" --judge {args.judge} --split {args.split}"
           + (f" --merge-min-similarity {args.merge_min_similarity}" if args.merge_min_similarity is not None else "")}
    print(json.dumps({k: out[k] for k in ("split", "pairs", "ideal_accuracy", "acceptable_rate", "fact_losing_rate",
                                          "cosine_auc_redundant_vs_not")}))
    for k, c in out["confusion"].items():
        print(f"  {k}: {c}")
    suffix = f"_mms{args.merge_min_similarity:g}" if args.merge_min_similarity is not None else ""
    write_json(REPO / "bench" / "results" / f"judge_labels_{args.judge}_{args.split}{suffix}.json", out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
