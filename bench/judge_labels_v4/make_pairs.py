"""Judge pairs of the fourth label set, drawn from the synthetic stores in ``sources/`` and from ``swaps.jsonl``.

    python bench/judge_labels_v4/make_pairs.py           # writes bench/judge_labels_v4/pairs.jsonl
    python bench/judge_labels_v4/make_pairs.py --check   # fails if pairs.jsonl differs from what it would write

Store pairs are proposed the way the pair heap proposes them: each entry's 8 nearest neighbours under the
default encoder, sampled evenly over six similarity bands (``PER_BAND`` a band, seeded by the store's name),
as ``bench/judge_labels/pairs.py`` draws the first label set. Every pair of the candidates that the store's
own metadata marks as an update (``metadata.supersedes``: the newer entry replaces the older's value of the
same attribute; ``metadata.corrects``: it says the older was wrong) is added too, so that supersession can be
studied; ``drawn`` says which rule took a pair (``band`` or ``relation``), ``relation`` and ``newer`` name the
update where there is one. Swap pairs (``swaps.jsonl``, hand-written) are all taken. The side that comes
first is seeded.

The whole set is a ``test`` part: nothing may be fitted or chosen on it, and a judge is scored on it once.
The text is ours, so the pairs carry it.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench" / "judge_labels"))

import label_sets  # noqa: E402  (shared with the other synthetic set)

PAIRS = HERE / "pairs.jsonl"
SOURCES = HERE / "sources"
SWAPS = HERE / "swaps.jsonl"


def build() -> list[dict]:
    from memrefine_edge.backends import OnnxEncoder

    encoder = OnnxEncoder()
    rows = label_sets.store_pairs(SOURCES, "v4", lambda name: "test", encoder)
    generated = [json.loads(line) for line in SWAPS.read_text(encoding="utf-8").splitlines() if line.strip()]
    rng = random.Random("v4-swaps")
    for r in generated:  # which side comes first, seeded as for the stores
        if rng.random() < 0.5:
            r["a"], r["b"] = r["b"], r["a"]
    return rows + label_sets.swap_pairs(generated, lambda g: "test", encoder)


def main(argv: list[str]) -> int:
    code, rows = label_sets.write_pairs(build(), "v4", PAIRS, argv)
    if "--check" not in argv:
        print(f"wrote {len(rows)} pairs to {PAIRS.relative_to(REPO)}, all of them test")
    return code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
