"""Experiment: guard the default judge's deletes with the whole store's words, and see what it costs.

    python bench/store_words.py                       # LoCoMo from ../shared/data/locomo, or MEMREFINE_LOCOMO
    python bench/store_words.py --variants p1,m1,p2,m2,m3 --budgets 1.0,0.7,0.5

The default judge deletes paraphrases even when their wording differs, and on the 7 dev conversations
as turns answer *presence* (every gold answer word still somewhere in the store) falls by ~4.7 points
at 50%. The labelling rules call a delete fact-losing when it drops a fact "the store holds nowhere
else", so this experiment checks the whole store, not the pair: a delete of X is refused when X holds
at least ``n`` content words (the fact extractor's words, names, numbers, dates) that neither the kept
entry nor any other live entry holds. A refused delete becomes ``preserve`` (variant ``pN``) or a concat
``merge`` (variant ``mN``). Word counts over the live entries are built before each compression and kept
up to date from the deletes and merges (``memrefine`` is the unguarded default, for reference).

This is not a product feature: see the README in ``bench/judge_labels/`` for what it showed. Each
variant runs ``memrefine eval locomo --store turns --no-qa --chain`` through the evaluation harness;
writes ``bench/results/store_words.json`` (pooled presence, answer recall@1000, budgets met, actions).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from memrefine_edge.decision import Decision  # noqa: E402
from memrefine_edge.facts import extract  # noqa: E402
from memrefine_edge.methods.memrefine import MemRefineMethod  # noqa: E402


def keys(text: str) -> frozenset[str]:
    """The content keys of a text as the fact checks see them."""
    f = extract(text)
    return f.words | f.names | f.numbers | f.dates


def stated_keys(text: str) -> frozenset[str]:
    """Names, numbers, dates, and the words of the sentences that state something (no question, no small talk)."""
    from memrefine_edge.facts import fact_sentences, sentence_words

    f = extract(text)
    words = [sentence_words(s)[1] for s in fact_sentences(text) if not s.rstrip().endswith("?")]
    return f.names | f.numbers | f.dates | frozenset().union(*words)


class StoreWordGuard(MemRefineMethod):
    """The default judge; a delete that would take the store's last copy of >= ``min_unique`` words is refused."""

    def __init__(self, *, judge: Any, name: str, fallback: str, min_unique: int, stated: bool = False) -> None:
        super().__init__(judge=judge)
        self.name, self.fallback, self.min_unique = name, fallback, min_unique
        self.protected = stated_keys if stated else keys
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
            from memrefine_edge.judge import merge_instruction_for

            return Decision("merge", None, merge_instruction=merge_instruction_for(pair.a.content, pair.b.content),
                            reason=why, source="scorer")
        return Decision("preserve", None, reason=why, source="scorer")


def factory(encoder: Any):
    """The harness's method factory: the default pipeline, with the guard for the variant names."""
    from memrefine_edge.pipeline import PipelineConfig, build

    def make(name: str, config: Any):
        parts = build(PipelineConfig(method="memrefine", judge_model=config.judge_model), encoder=encoder)
        if name == "memrefine":
            return parts.method, parts.merger
        spec = name.removeprefix("guard-")
        method = StoreWordGuard(judge=parts.method.judge, name=name, fallback="merge" if spec[0] == "m" else "preserve",
                                min_unique=int(spec.lstrip("mps")), stated="s" in spec)
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


def pooled(results: dict) -> dict:
    """The harness's pooled numbers per method and budget (:func:`summarize`), with the actions taken."""
    from memrefine_edge.eval.report import summarize

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
    return {"base": {"presence": round(base["presence"], 3),
                     "answer_recall_1000": round(base["answer_recall@1000"], 3)}, "rows": rows}


def main() -> None:
    from memrefine_edge.backends.encoder import OnnxEncoder
    from memrefine_edge.eval.harness import EvalConfig, run_eval

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--variants", default="p1,m1,p2,m2,m3", help="pN / mN: refuse at N last-copy words, "
                    "then preserve / merge; psN / msN: count only names, numbers, dates and the words of "
                    "sentences that state something (no question, no small talk)")
    ap.add_argument("--budgets", default="1.0,0.7,0.5")
    ap.add_argument("--work", default=None, help="folder for the harness's stores (default: a temporary one)")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "store_words.json"))
    args = ap.parse_args()
    folder = Path(os.environ.get("MEMREFINE_LOCOMO") or REPO.parent / "shared" / "data" / "locomo")
    data = folder / "locomo-dev.json" if folder.is_dir() else folder
    if not data.is_file():
        sys.exit(f"LoCoMo not found at {data}; set MEMREFINE_LOCOMO")
    import tempfile

    work = Path(args.work or tempfile.mkdtemp(prefix="memrefine-store-words-"))
    methods = ("memrefine", *(f"guard-{v}" for v in args.variants.split(",")))
    config = EvalConfig(data=data, out=work, store="turns", methods=methods,
                        budgets=tuple(float(b) for b in args.budgets.split(",")), qa=False, chain=True,
                        context_bytes=(1000,))
    encoder = OnnxEncoder()
    t = time.perf_counter()
    results = run_eval(config, encoder=encoder, method_factory=factory(encoder), extra_methods=methods[1:])
    # The command as it decides the numbers (--work and --out only say where files go).
    command = f"python bench/store_words.py --variants {args.variants} --budgets {args.budgets}"
    out = {"command": command, "store": "turns",
           "conversations": sorted(results["samples"]), "seconds": round(time.perf_counter() - t, 1),
           **pooled(results)}
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out["base"]))
    for r in out["rows"]:
        print(r)


if __name__ == "__main__":
    main()
