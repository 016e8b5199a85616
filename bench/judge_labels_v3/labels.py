"""The third label set's two labelling passes: their agreement, and the final labels.

    python bench/judge_labels_v3/labels.py agree   # agreement of labels_a and labels_b, by part and kind
    python bench/judge_labels_v3/labels.py final   # labels.jsonl from labels_a, labels_b and settled

As for every synthetic set (``bench/judge_labels/label_sets.py``): ``agree`` measures the agreement as
for the first set and writes it to ``bench/results/judge_labels_v3_agreement.json``; ``final`` takes the
agreed label of each pair, or where the passes disagree the one ``settled.jsonl`` gives. Each pass was
made in two halves by two annotators (``labels_a.jsonl`` = A's halves, ``labels_b.jsonl`` = B's), none of
whom saw another pass.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE.parents[1] / "bench" / "judge_labels"))

import label_sets  # noqa: E402  (shared with the other synthetic sets)

if __name__ == "__main__":
    code = label_sets.test_set_labels_main(HERE, "v3", sys.argv[1:])
    if code == 2:
        print(__doc__)
    raise SystemExit(code)
