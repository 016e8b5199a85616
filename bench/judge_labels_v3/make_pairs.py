"""Judge pairs of the third label set, drawn from the synthetic stores in ``sources/`` and from ``swaps.jsonl``.

    python bench/judge_labels_v3/make_pairs.py           # writes bench/judge_labels_v3/pairs.jsonl
    python bench/judge_labels_v3/make_pairs.py --check   # fails if pairs.jsonl differs from what it would write

Drawn as every synthetic set's pairs are (``bench/judge_labels/label_sets.py``: each entry's nearest
neighbours under the default encoder over six similarity bands, the pairs the stores' metadata marks as an
update, every hand-written swap; ``label_sets.test_set_pairs``). The whole set is a ``test`` part:
nothing may be fitted or chosen on it, and a judge is scored on it once. The text is ours, so the pairs
carry it.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE.parents[1] / "bench" / "judge_labels"))

import label_sets  # noqa: E402  (shared with the other synthetic sets)

if __name__ == "__main__":
    raise SystemExit(label_sets.test_set_pairs_main(HERE, "v3", sys.argv[1:]))
