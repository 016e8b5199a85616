"""What the fact guard's merge threshold costs: storage reached and evidence recall, per setting.

Run: ``.venv/bin/python bench/merge_threshold.py [--samples conv-26,...] [--thresholds 0.75,0.6,0.5]``
(about 1 minute per conversation on 2 cores). Writes ``bench/results/merge_threshold.{json,md}``.

The guard turns a refused delete into a merge when the pair's cosine is at or
above ``merge_min_similarity``, else into a preserve (distinct facts). The
bundled 135M judge answers "delete a" to every pair, so on the default model
the guard decides every pair the fast path does not; :class:`FactJudge` makes
the same decisions without the model (``bench/results/judge_devset.md``) and
is used here so the sweep takes minutes, not hours. Per threshold and
conversation (LoCoMo dev set as turns, read at run time; no text is written),
the store is compressed through the budgets 0.7..0.3 in one chain (paper mode,
deterministic merges) and measured with :mod:`memrefine_edge.eval._harness`:
realized json ratio and evidence recall@10. rulesim is the reference row.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memrefine_edge.backends import OnnxEncoder  # noqa: E402
from memrefine_edge.engine import PipelineConfig, build  # noqa: E402
from memrefine_edge.eval import EvalConfig, run_eval  # noqa: E402

#: The shared data folder sits beside the repository.
DATA = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev.json"
BUDGETS = (1.0, 0.7, 0.6, 0.5, 0.4, 0.3)


def _factory(name: str, _config: EvalConfig, *, encoder):
    """``guard@T``: memrefine with the fact judge at merge threshold T; else a method by name."""
    if name.startswith("guard@"):
        config = PipelineConfig(judge="fact", merge_min_similarity=float(name.split("@", 1)[1]))
    else:
        config = PipelineConfig(method=name)
    parts = build(config, encoder=encoder)  # the evaluation's encoder, shared by every compression
    return parts.method, parts.merger


def _shown(arg: str) -> str:
    """A command-line argument as the results record it: no machine path.

    A full path becomes relative to the repository root (``../shared/...`` for
    the data beside it), ``<tmp>/...`` in the temporary folder, else its file name.
    """
    opt, eq, value = arg.partition("=") if arg.startswith("--") else ("", "", arg)
    if not os.path.isabs(value):
        return arg
    path = os.path.realpath(value)
    bases = ((ROOT, ""), (Path(os.path.realpath(tempfile.gettempdir())), "<tmp>/"), (ROOT.parent, "../"))
    for base, prefix in bases:
        rel = os.path.relpath(path, base)
        if not rel.startswith(".."):
            value = prefix + Path(rel).as_posix()
            break
    else:
        value = Path(path).name
    return opt + eq + value


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DATA,
                    help="LoCoMo dev file [default: ../shared/data/locomo/locomo-dev.json from the repository root]")
    ap.add_argument("--samples", default="", help="comma-separated sample ids [default: all]")
    ap.add_argument("--thresholds", default="0.75,0.6,0.5")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    ap.add_argument("--work", type=Path, default=None,
                    help="folder for the compressed stores and caches [default: a new temporary folder, removed after]")
    args = ap.parse_args(argv)
    names = [f"guard@{float(t):g}" for t in args.thresholds.split(",")]
    work = args.work or Path(tempfile.mkdtemp(prefix="memrefine-bench-merge-threshold-"))
    shown = [_shown(a) for a in (sys.argv[1:] if argv is None else argv)]
    cfg = EvalConfig(data=args.data, out=work, samples=tuple(args.samples.split(",")) if args.samples else None,
                     store="turns", methods=(*names, "rulesim"), budgets=BUDGETS, qa=False, chain=True,
                     command=" ".join(["python bench/merge_threshold.py", *shown]))
    encoder = OnnxEncoder()
    try:
        res = run_eval(cfg, encoder=encoder, method_factory=functools.partial(_factory, encoder=encoder),
                       extra_methods=names, log=lambda m: print(m, file=sys.stderr, flush=True))
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    rows: dict[str, dict[str, dict[str, float]]] = {}
    for s in res["samples"].values():
        for m, runs in s["methods"].items():
            for b, r in runs.items():
                cell = rows.setdefault(m, {}).setdefault(b, {"ratio": 0.0, "rsum": 0.0, "rn": 0, "met": 0, "n": 0})
                cell["ratio"] += r["ratio_json"]
                cell["rsum"] += r["recall"]["sum"]
                cell["rn"] += r["recall"]["n"]
                cell["met"] += int(r["budget_met"])
                cell["n"] += 1
    base_sum = sum(s["base"]["recall"]["sum"] for s in res["samples"].values())
    base_n = sum(s["base"]["recall"]["n"] for s in res["samples"].values())
    out = {"command": cfg.command, "machine": res["machine"], "encoder": res["encoder"],
           "samples": sorted(res["samples"]),
           "base_recall": base_sum / base_n,
           "rows": {m: {b: {"mean_ratio_json": c["ratio"] / c["n"], "recall": c["rsum"] / c["rn"],
                            "budget_met": f"{c['met']}/{c['n']}"} for b, c in per.items()}
                    for m, per in rows.items()},
           "per_sample": {sid: {m: {b: [round(r["ratio_json"], 3), round(r["recall"]["sum"] / r["recall"]["n"], 3)]
                                    for b, r in runs.items()} for m, runs in s["methods"].items()}
                          for sid, s in res["samples"].items()}}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "merge_threshold.json").write_text(json.dumps(out, indent=1) + "\n")
    budgets = [f"{b:g}" for b in BUDGETS if b < 1]
    lines = ["# Merge threshold of the fact guard: storage reached and evidence recall@10", "",
             f"`{cfg.command}` -- {len(out['samples'])} LoCoMo dev conversations as turns, paper mode, one chain "
             f"through the budgets, deterministic merges; judge = fast path + FactJudge + guard (the decisions of "
             f"the bundled 135M judge, without the model). Encoder `{res['encoder']}`. "
             f"Machine: {res['machine'].get('cpu', '?')}.", "",
             "Cells: mean realized json ratio / evidence recall@10 (all questions with evidence), and how many "
             "conversations met the budget.", "",
             f"| setting | base | {' | '.join(budgets)} |", "|---|---|" + "---|" * len(budgets)]
    for m, per in out["rows"].items():
        cells = [f"{per[b]['mean_ratio_json']:.2f} / {per[b]['recall']:.3f} ({per[b]['budget_met']})" for b in budgets]
        lines.append(f"| {m} | 1.00 / {out['base_recall']:.3f} | {' | '.join(cells)} |")
    lines += ["", "Recall counts an evidence turn as found when it is in the provenance of a retrieved entry, so a "
                  "merged entry that carries more turns can raise it: read the recall columns as 'no evidence "
                  "lost', not as better retrieval."]
    (args.out / "merge_threshold.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
