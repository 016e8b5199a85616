"""Choose strict-mode eviction's last-copy weight on the tune conversations; score it once on the test ones.

Strict mode evicts, after the judge has run out of candidate pairs, the entry with the highest
``cos(nearest live neighbour) + EVICT_SIZE_WEIGHT * ln(bytes) - EVICT_UNIQUE_WEIGHT * unique`` (``unique``:
the share of the entry's specific words no other live entry holds; :mod:`memrefine_edge.engine._eviction`). This
script compresses the LoCoMo dev conversations in strict mode, chained to 50% and 30%, as turns,
observations and mem0-style text, once per weight, and measures answer recall@1000 and answer presence.

* ``tune`` (default): conv-26, 30, 41, 42, every weight of ``--weights``. The rule: of the weights whose
  mean answer recall@1000 over the six cells (three store kinds, two budgets) is not below the weight 0's,
  the one with the most mean presence.
* ``--test``: conv-43, 44, 47, weight 0 and the packaged weight, once.
* ``--cap``: the packaged weight with and without ``EVICT_SIZE_CAPPED`` (an entry's bytes counted only up
  to the bytes the budget still needs), on tune and on test; the cap was added after the weight was chosen.
* ``--count``: ``EVICT_COUNT_WEIGHT`` (of ``ln(1 + the number of last-copy words)``, added after the two
  above) over ``--count-weights`` on tune (count weight 0: the order before the term), with what the tune
  rule would choose; then count weight 0 and the packaged one scored once on test. The packaged count weight
  is not the rule's choice but the size weight (the size term taken per word the eviction would lose, see
  :mod:`memrefine_edge.engine._eviction`): the runs say what it costs.

The weight and the cap are module constants of the product; the script sets them for each run (nothing
else changes).

    python bench/eviction_weights.py            # ~10 min; LoCoMo from ../shared/data/locomo or MEMREFINE_LOCOMO
    python bench/eviction_weights.py --test     # ~4 min
    python bench/eviction_weights.py --cap      # ~8 min
    python bench/eviction_weights.py --count    # ~14 min

Writes ``bench/results/eviction_weights.json`` (``tune`` or ``test`` part; numbers only).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _locomo import dev_json  # noqa: E402  (bench/ is the script's folder, first on sys.path)

from memrefine_edge import __version__  # noqa: E402
from memrefine_edge.engine import _eviction as eviction  # noqa: E402
from memrefine_edge.eval._report import machine_info, write_json  # noqa: E402

TUNE = ("conv-26", "conv-30", "conv-41", "conv-42")
TEST = ("conv-43", "conv-44", "conv-47")
STORES = ("turns", "observations", "text")
BUDGETS = ("0.5", "0.3")
OUT = ROOT / "bench" / "results" / "eviction_weights.json"
PACKAGED_COUNT = eviction.EVICT_COUNT_WEIGHT


def measure(samples: tuple[str, ...], weight: float, encoder: object, cache: Path, *, capped: bool = True,
            count: float | None = None) -> dict:
    """Strict runs of every store kind at one weight: ``{store: {budget: {...}}}``. ``count``: the count
    weight (None: the packaged one)."""
    from memrefine_edge.eval import EvalConfig, run_eval
    from memrefine_edge.eval._report import summarize

    eviction.EVICT_UNIQUE_WEIGHT = weight
    eviction.EVICT_SIZE_CAPPED = capped
    eviction.EVICT_COUNT_WEIGHT = PACKAGED_COUNT if count is None else count
    out: dict = {}
    for store in STORES:
        # One folder per store kind: its cache of base stores is reused by every weight.
        config = EvalConfig(data=dev_json(), out=cache / store, samples=samples, store=store, methods=("memrefine",),
                            budgets=(1.0, 0.5, 0.3), qa=False, chain=True, context_bytes=(1000,), mode="strict")
        per = summarize(run_eval(config, encoder=encoder, log=lambda m: None))["methods"]["memrefine"]
        out[store] = {b: {k: round(per[b][k], 4) for k in ("ratio_json", "budget_met", "answer_recall@1000",
                                                           "presence")} for b in BUDGETS}
    cells = [out[s][b] for s in STORES for b in BUDGETS]
    out["mean"] = {k: round(sum(c[k] for c in cells) / len(cells), 4) for k in ("answer_recall@1000", "presence")}
    mean = out["mean"]
    print(f"weight {weight:g}{'' if capped else ' (uncapped)'}"
          f"{'' if count is None else f', count weight {count:g}'}: mean answer recall@1000 "
          f"{mean['answer_recall@1000']:.4f}, presence {mean['presence']:.4f}", flush=True)
    return out


def _choose(runs: dict, weights: list[float]) -> float:
    """The tune rule: of the weights whose mean answer recall@1000 is not below weight 0's, the one with the
    most mean presence (ties: the smaller weight)."""
    floor = runs[f"{0.0:g}"]["mean"]["answer_recall@1000"] if 0.0 in weights else float("-inf")
    ok = [w for w in weights if runs[f"{w:g}"]["mean"]["answer_recall@1000"] >= floor]
    return max(ok, key=lambda w: (runs[f"{w:g}"]["mean"]["presence"], -w))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--weights", default="0,0.1,0.2,0.4", help="tune: the weights to try")
    ap.add_argument("--test", action="store_true", help="score weight 0 and the packaged weight on the test part")
    ap.add_argument("--cap", action="store_true", help="the packaged weight with and without the size cap")
    ap.add_argument("--count", action="store_true", help="choose the count weight on tune, score it once on test")
    ap.add_argument("--count-weights", default="0,0.05,0.1,0.2", help="--count: the count weights to try")
    args = ap.parse_args()
    from memrefine_edge.backends import OnnxEncoder

    packaged = eviction.EVICT_UNIQUE_WEIGHT
    encoder = OnnxEncoder()
    result = json.loads(OUT.read_text(encoding="utf-8")) if OUT.exists() else {}
    result.update({"machine": machine_info(__version__), "stores": list(STORES), "budgets": list(BUDGETS),
                   "mode": "strict", "context_bytes": 1000, "packaged_weight": packaged})
    with tempfile.TemporaryDirectory(prefix="memrefine-evict-") as work:
        if args.count:
            weights = [float(w) for w in args.count_weights.split(",")]
            runs = {f"{w:g}": measure(TUNE, packaged, encoder, Path(work) / "tune", count=w) for w in weights}
            chosen = _choose(runs, weights)
            print(f"the tune rule's count weight: {chosen:g} (packaged: {PACKAGED_COUNT:g})")
            test = {f"{w:g}": measure(TEST, packaged, encoder, Path(work) / "test", count=w)
                    for w in dict.fromkeys((0.0, PACKAGED_COUNT))}
            result["count"] = {"command": "python bench/eviction_weights.py --count --count-weights "
                                          + args.count_weights, "weight": packaged,
                               "packaged_count_weight": PACKAGED_COUNT, "machine": result["machine"],
                               "tune": {"samples": list(TUNE), "runs": runs, "rule_choice": chosen,
                                        "rule": "most mean presence among count weights whose mean answer "
                                                "recall@1000 is not below count weight 0's"},
                               "test": {"samples": list(TEST), "runs": test}}
        elif args.cap:
            result["cap"] = {"command": "python bench/eviction_weights.py --cap", "weight": packaged, **{
                part: {"samples": list(samples),
                       "uncapped": measure(samples, packaged, encoder, Path(work) / part, capped=False),
                       "capped": measure(samples, packaged, encoder, Path(work) / part)}
                for part, samples in (("tune", TUNE), ("test", TEST))}}
        elif args.test:
            runs = {f"{w:g}": measure(TEST, w, encoder, Path(work)) for w in (0.0, packaged)}
            result["test"] = {"command": "python bench/eviction_weights.py --test", "samples": list(TEST),
                              "runs": runs}
        else:
            weights = [float(w) for w in args.weights.split(",")]
            runs = {f"{w:g}": measure(TUNE, w, encoder, Path(work)) for w in weights}
            chosen = _choose(runs, weights)
            result["tune"] = {"command": "python bench/eviction_weights.py --weights " + args.weights,
                              "samples": list(TUNE), "runs": runs, "chosen": chosen,
                              "rule": "most mean presence among weights whose mean answer recall@1000 is not "
                                      "below weight 0's"}
            print(f"chosen: {chosen:g} (packaged: {packaged:g})")
    eviction.EVICT_UNIQUE_WEIGHT, eviction.EVICT_SIZE_CAPPED = packaged, True
    eviction.EVICT_COUNT_WEIGHT = PACKAGED_COUNT
    write_json(OUT, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
