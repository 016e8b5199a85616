"""The word floor of the scorer's deletes, chosen on the first two label sets: accuracy and fact-losing by floor.

    MEMREFINE_LOCOMO=../shared/data/locomo python bench/judge_labels/word_floor.py   # about 2 minutes

The default judge (fast path, redundancy scorer, strict fact checks) with
``ScorerJudge(min_delete_word_cover=c)`` for each floor ``c``, on every labelled pair of the first set
(``bench/judge_labels/``, LoCoMo; both parts) and the second (``bench/judge_labels_v2/``; both parts): the
sets the scorer was fitted on, so the figures compare floors, they are not held-out accuracy. ``stated``
is the product's floor (the words of the sentences that state something: neither small talk nor a
question); ``every`` counts the words of every sentence but small talk (the guard's bag check,
``lost_facts``), the variant tried first. Writes ``bench/results/judge_word_floor.json``.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

from pairs import outcome, resolve  # noqa: E402

from memrefine_edge import __version__  # noqa: E402
from memrefine_edge.backends import OnnxEncoder  # noqa: E402
from memrefine_edge.eval._report import machine_info, write_json  # noqa: E402
from memrefine_edge.judging import _judge  # noqa: E402
from memrefine_edge.judging._choice import scorer_guard  # noqa: E402
from memrefine_edge.judging._judge import ScorerJudge  # noqa: E402
from memrefine_edge.text import lost_facts  # noqa: E402

FLOORS = (0.0, 0.25, 0.5, 0.75)


def _pairs(label_set: str, encoder: OnnxEncoder) -> list[tuple[str, str, float, dict]]:
    synthetic = label_set != "v1"
    folder = REPO / "bench" / "judge_labels_v2" if synthetic else HERE
    pairs = {r["id"]: r for r in map(json.loads, (folder / "pairs.jsonl").read_text(encoding="utf-8").splitlines())}
    out = []
    for lab in map(json.loads, (folder / "labels.jsonl").read_text(encoding="utf-8").splitlines()):
        p = pairs[lab["id"]]
        a, b = (p["a"], p["b"]) if synthetic else (resolve(p["a"]), resolve(p["b"]))
        va, vb = encoder.embed([a, b])
        out.append((a, b, max(-1.0, min(1.0, float(va @ vb))), lab))
    return out


def _score(rows: list[tuple[str, str, float, dict]], floor: float) -> dict:
    judge = scorer_guard(ScorerJudge(min_delete_word_cover=floor))
    total: Counter[str] = Counter()
    kinds: dict[str, Counter[str]] = {}
    for a, b, sim, lab in rows:
        d = judge.decide(a, b, sim)
        match, ok, lost = outcome(f"delete_{d.target}" if d.action == "delete" else d.action, lab)
        for c in (total, kinds.setdefault(lab.get("kind", "all"), Counter())):
            c.update(pairs=1, ideal=match, acceptable=ok, fact_losing=lost)
    rate = lambda c: {"pairs": c["pairs"], "ideal_accuracy": round(c["ideal"] / c["pairs"], 4),  # noqa: E731
                      "acceptable_rate": round(c["acceptable"] / c["pairs"], 4),
                      "fact_losing": c["fact_losing"], "fact_losing_rate": round(c["fact_losing"] / c["pairs"], 4)}
    return {**rate(total), "by_kind": {k: rate(c) for k, c in sorted(kinds.items())}}


def main() -> int:
    encoder = OnnxEncoder()
    sets = {name: _pairs(name, encoder) for name in ("v1", "v2")}
    rows = []
    stated = _judge._stated_words_lost
    for variant in ("stated", "every"):
        if variant == "every":  # the first variant tried: the guard's bag check over every stated sentence
            _judge._stated_words_lost = lambda gone, kept, cover: bool(lost_facts(gone, kept, min_word_cover=cover))
        for floor in FLOORS if variant == "stated" else FLOORS[1:]:
            row = {"variant": variant, "floor": floor, **{name: _score(r, floor) for name, r in sets.items()}}
            rows.append(row)
            print(f"{variant} {floor:.2f}: " + "; ".join(
                f"{n} ideal {row[n]['ideal_accuracy']:.3f}, fact-losing {row[n]['fact_losing_rate']:.3f}"
                for n in sets), flush=True)
    _judge._stated_words_lost = stated
    write_json(REPO / "bench" / "results" / "judge_word_floor.json",
               {"command": "python bench/judge_labels/word_floor.py", "machine": machine_info(__version__),
                "sets": {"v1": "bench/judge_labels (both parts)", "v2": "bench/judge_labels_v2 (both parts)"},
                "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
