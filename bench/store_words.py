"""Experiment: guard the default judge's deletes with the whole store's words, and see what it costs.

    python bench/store_words.py                       # LoCoMo from ../shared/data/locomo, or MEMREFINE_LOCOMO
    python bench/store_words.py --variants p1,m1,msr5,msr15 --budgets 1.0,0.7,0.5

Without a store-wide check, the scorer deletes paraphrases even when their wording differs, and on the 7
dev conversations as turns answer *presence* (every gold answer word still somewhere in the store) fell
by ~4.7 points at 50%. The labelling rules call a delete fact-losing when it drops a fact "the store holds
nowhere else", so these variants check the whole store, not the pair: a delete of X is refused when X
holds at least ``n`` content keys (the fact extractor's words, names, numbers, dates) that neither the
kept entry nor any other live entry holds. A refused delete becomes ``preserve`` (variant ``pN``) or a
concat ``merge`` (variant ``mN``); ``psN`` / ``msN`` count only names, numbers, dates and the words of
sentences that state something (questions and small talk left out); ``msrK`` / ``psrK`` count, of those
words, only the ones outside the first K thousand frequency ranks of the encoder's vocabulary (at
least one such key refuses the delete). Word counts over the live entries are built before each
compression and follow every delete and merge.

``memrefine`` is the product's default, whose last-copy check (:mod:`memrefine_edge.text._lastcopy`) is
``msr10``; ``no-last-copy-check`` is the default judge without it (``compress --no-last-copy-check``);
``defer-last-copies`` refuses the same deletes but defers them (a preserve, the delete taken only when
the candidate pairs run out above budget; ``compress --defer-last-copies``). ``--variants ""`` runs just
those three.
Each variant runs ``memrefine eval locomo --store turns --no-qa --chain`` through the evaluation harness;
writes ``bench/results/store_words.json`` (pooled presence, answer recall@1000, budgets met, actions).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from memrefine_edge.core import Decision  # noqa: E402
from memrefine_edge.methods._memrefine import MemRefineMethod  # noqa: E402
from memrefine_edge.text._lastcopy import content_keys as keys  # noqa: E402  (names, numbers, dates, words)
from memrefine_edge.text._lastcopy import specific_keys_among, stated_keys  # noqa: E402

FIRST_WORD_ID = 1996  # the first whole word of BERT's vocabulary ("the"), as scripts/make_common_words.py


@lru_cache(maxsize=None)
def common_words_top(top: int) -> frozenset[str]:
    """The words among the first ``top`` frequency ranks of the encoder's vocabulary."""
    from memrefine_edge.backends import model_path

    vocab = json.loads(Path(model_path("tokenizer")).read_text(encoding="utf-8"))["model"]["vocab"]
    return frozenset(w for w, i in vocab.items() if FIRST_WORD_ID <= i < FIRST_WORD_ID + top)


@lru_cache(maxsize=20000)
def rare_stated_keys(text: str, top: int) -> frozenset[str]:
    """The product's specific keys (:mod:`memrefine_edge.text._lastcopy`), with the first ``top`` ranks as common words."""
    return specific_keys_among(text, common_words_top(top))


class StoreWordGuard(MemRefineMethod):
    """The default judge; a delete that would take the store's last copy of >= ``min_unique`` words is refused."""

    def __init__(self, *, judge: Any, name: str, fallback: str, min_unique: int, stated: bool = False,
                 rare_top: int | None = None) -> None:
        super().__init__(judge=judge, keep_last_copies=False)  # this class is the check
        self.name, self.fallback, self.min_unique = name, fallback, min_unique
        self.protected = stated_keys if stated else keys
        if rare_top is not None:
            self.protected = lambda text: rare_stated_keys(text, rare_top)
        self.counts: Counter[str] = Counter()

    def prepare(self, store: Any) -> None:
        self.counts = Counter()
        for entry in store.entries():
            self.counts.update(keys(entry.content))

    def decide(self, pair: Any) -> Decision:
        d = super().decide(pair)
        if d.action != "delete":
            return d
        gone, kept = (pair.a, pair.b) if d.target == "a" else (pair.b, pair.a)
        last = {w for w in self.protected(gone.content) - keys(kept.content) if self.counts[w] <= 1}
        if len(last) < self.min_unique:
            self.counts.subtract(keys(gone.content))
            return d
        why = f"store-wide: last copy of {sorted(last)}"
        if self.fallback == "merge":
            from memrefine_edge.judging import merge_instruction_for

            return Decision("merge", None, merge_instruction=merge_instruction_for(pair.a.content, pair.b.content),
                            reason=why, source="scorer")
        return Decision("preserve", None, reason=why, source="scorer")


def factory(encoder: Any):
    """The harness's method factory: the default pipeline, with the guard for the variant names."""
    from memrefine_edge.engine import PipelineConfig, build
    from memrefine_edge.judging import parse_judge_model

    def make(name: str, config: Any):
        off, defer = name == "no-last-copy-check", name == "defer-last-copies"
        options = {"keep_last_copies": False} if off else {"defer_last_copies": True} if defer else {}
        judge, judge_model = parse_judge_model(config.judge_model)  # the command line's --judge-model text
        parts = build(PipelineConfig(method="memrefine", judge=judge, judge_model=judge_model,
                                     method_options=options), encoder=encoder)
        if name in ("memrefine", "defer-last-copies") or off:
            return parts.method, parts.merger
        spec = name.removeprefix("guard-")
        rare_top = None
        if "r" in spec:  # msrK / psrK: one rare key, K thousand common ranks
            spec, rare_top = spec.split("r")[0] + "1", 1000 * int(spec.split("r")[1])
        method = StoreWordGuard(judge=parts.method.judge, name=name, fallback="merge" if spec[0] == "m" else "preserve",
                                min_unique=int(spec.lstrip("mps")), stated="s" in spec, rare_top=rare_top)
        inner = parts.merger.merge

        def merge(a: str, b: str, instruction: str):
            out = inner(a, b, instruction)
            method.counts.subtract(keys(a))
            method.counts.subtract(keys(b))
            method.counts.update(keys(out.content))
            return out

        parts.merger.merge = merge  # the counts follow what the merge really kept
        return method, parts.merger

    return make


SPLIT = {"tune": {"conv-26", "conv-30", "conv-41", "conv-42"}, "test": {"conv-43", "conv-44", "conv-47"}}


def pooled(results: dict) -> dict:
    """The harness's pooled numbers per method and budget (:func:`summarize`), with the actions taken."""
    from memrefine_edge.eval._report import summarize

    summary = summarize(results)
    rows = []
    for m, per in sorted(summary["methods"].items()):
        for bud, p in sorted(per.items()):
            actions: Counter[str] = Counter()
            for s in results["samples"].values():
                actions.update(s["methods"][m][bud]["actions"])
            rows.append({"method": m, "budget": float(bud), "presence": round(p["presence"], 3),
                         "answer_recall_1000": round(p["answer_recall@1000"], 3),
                         "budget_met": f"{p['budget_met']}/{p['samples']}", "ratio_mean": round(p["ratio_json"], 3),
                         "actions": {k: actions[k] for k in ("delete", "merge", "preserve")}})
    base = summary["base"]
    # The judge's labelling split (bench/judge_labels/README.md): nothing here is fitted on either part.
    splits = {}
    for part, convs in SPLIT.items():
        sub = summarize({**results, "samples": {k: v for k, v in results["samples"].items() if k in convs}})
        splits[part] = {"conversations": sorted(convs), "base_presence": round(sub["base"]["presence"], 3),
                        "presence_at_0.5": {m: round(per["0.5"]["presence"], 3)
                                            for m, per in sorted(sub["methods"].items()) if "0.5" in per},
                        "budget_met_at_0.5": {m: f"{per['0.5']['budget_met']}/{per['0.5']['samples']}"
                                              for m, per in sorted(sub["methods"].items()) if "0.5" in per}}
    return {"base": {"presence": round(base["presence"], 3),
                     "answer_recall_1000": round(base["answer_recall@1000"], 3)}, "rows": rows, "by_split": splits}


def main() -> None:
    from memrefine_edge.backends import OnnxEncoder
    from memrefine_edge.eval import EvalConfig, run_eval

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--variants", default="p1,m1,p2,m2,m3,ps1,ms1,ms2,msr5,msr15,psr10",
                    help="pN / mN: refuse at N last-copy words, then preserve / merge; psN / msN: count only "
                    "names, numbers, dates and the words of sentences that state something (no question, no "
                    "small talk); msrK / psrK: of those words only the ones outside the first K thousand "
                    "frequency ranks (one key refuses)")
    ap.add_argument("--budgets", default="1.0,0.7,0.5")
    ap.add_argument("--work", default=None, help="folder for the harness's stores (default: a temporary one)")
    ap.add_argument("--repool", default=None, metavar="RESULTS_JSON",
                    help="pool an earlier run's harness results.json (in its --work folder) again instead of running")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "store_words.json"))
    args = ap.parse_args()
    # The command as it decides the numbers (--work, --out and --repool only say where files are).
    command = f"python bench/store_words.py --variants {args.variants} --budgets {args.budgets}"
    if args.repool:
        earlier = json.loads(Path(args.out).read_text()) if Path(args.out).is_file() else {}
        results = json.loads(Path(args.repool).read_text())
        write(args.out, {"command": command, "store": "turns", "conversations": sorted(results["samples"]),
                         "seconds": earlier.get("seconds"), **pooled(results)})
        return
    from _locomo import dev_json  # bench/ is the script's folder, first on sys.path

    data = dev_json()
    import tempfile

    work = Path(args.work or tempfile.mkdtemp(prefix="memrefine-store-words-"))
    methods = ("memrefine", "no-last-copy-check", "defer-last-copies",
               *(f"guard-{v}" for v in args.variants.split(",") if v))
    config = EvalConfig(data=data, out=work, store="turns", methods=methods,
                        budgets=tuple(float(b) for b in args.budgets.split(",")), qa=False, chain=True,
                        context_bytes=(1000,))
    encoder = OnnxEncoder()
    t = time.perf_counter()
    results = run_eval(config, encoder=encoder, method_factory=factory(encoder), extra_methods=methods[1:])
    write(args.out, {"command": command, "store": "turns", "conversations": sorted(results["samples"]),
                     "seconds": round(time.perf_counter() - t, 1), **pooled(results)})


def write(path: str, out: dict) -> None:
    """Write the pooled JSON and print its rows."""
    Path(path).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out["base"]))
    for r in out["rows"]:
        print(r)
    print(json.dumps(out["by_split"]))


if __name__ == "__main__":
    main()
