"""Judge pairs of the second label set, drawn from the synthetic stores in ``sources/`` and from ``swaps.py``.

    python bench/judge_labels_v2/make_pairs.py           # writes bench/judge_labels_v2/pairs.jsonl
    python bench/judge_labels_v2/make_pairs.py --check   # fails if pairs.jsonl differs from what it would write

Store pairs are proposed the way the pair heap proposes them: each entry's 8 nearest neighbours under the
default encoder, sampled evenly over six similarity bands (``PER_BAND`` a band, seeded by the store's name),
as ``bench/judge_labels/pairs.py`` draws the first label set. Every pair of the candidates that the store's
own metadata marks as an update (``metadata.supersedes``: the newer entry replaces the older's value of the
same attribute; ``metadata.corrects``: it says the older was wrong) is added too, so that supersession can be
studied; ``drawn`` says which rule took a pair (``band`` or ``relation``), ``relation`` and ``newer`` name the
update where there is one. Swap pairs (``swaps.py``) are all taken. The side that comes first is seeded.

Split by source: the stores in ``TUNE`` and the swap generators in ``TUNE_SWAPS`` are the ``tune`` part; the
rest is ``test``, on which nothing may be fitted or chosen. The text is ours, so the pairs carry it.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench" / "judge_labels"))
sys.path.insert(0, str(HERE))

import label_sets  # noqa: E402  (shared with the other synthetic set)
import swaps  # noqa: E402

PAIRS = HERE / "pairs.jsonl"
SOURCES = HERE / "sources"
TUNE = ("facts_lena", "facts_tomas", "notes_omar", "turns_nadia_kofi", "summaries_george")
TUNE_SWAPS = ("number", "name", "negation")


def build() -> list[dict]:
    from memrefine_edge.backends import OnnxEncoder

    encoder = OnnxEncoder()
    rows = label_sets.store_pairs(SOURCES, "v2", lambda name: "tune" if name in TUNE else "test", encoder)
    rows += label_sets.swap_pairs(swaps.pairs(), lambda g: "tune" if g in TUNE_SWAPS else "test", encoder)
    return rows


def main(argv: list[str]) -> int:
    code, rows = label_sets.write_pairs(build(), "v2", PAIRS, argv)
    if "--check" not in argv:
        split = {s: sum(r["split"] == s for r in rows) for s in ("tune", "test")}
        print(f"wrote {len(rows)} pairs to {PAIRS.relative_to(REPO)}: tune {split['tune']}, test {split['test']}")
    return code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
