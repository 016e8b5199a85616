"""The fourth label set's two labelling passes: their agreement, and the final labels.

    python bench/judge_labels_v4/labels.py agree   # agreement of labels_a and labels_b, by part and kind
    python bench/judge_labels_v4/labels.py final   # labels.jsonl from labels_a, labels_b and settled

The agreement is measured as for the first set (``bench/judge_labels/pairs.py agree``): the ideal action;
the ideal with ``delete_a``/``delete_b``/``delete_any`` as one action; one pass's ideal acceptable to the
other. ``agree`` also writes it to ``bench/results/judge_labels_v4_agreement.json``.

``final`` takes, pair by pair, the agreed label (``acceptable``: what both accept, the ideal always;
``fact_losing``: what either calls fact-losing, the stricter reading) or, where the passes disagree, the
label ``settled.jsonl`` gives (settled by the labelling rules; the rule that decided is recorded).
``supersedes`` (``a``/``b``: the newer entry of an update, read from the text) is kept from either pass.

The scoring (``bench/judge_labels/pairs.py outcome``) reads ``delete_any`` in ``fact_losing`` as *both*
deletes losing a fact, so it is kept there only when both are. Each pass was made in two halves by two
annotators (``labels_a.jsonl`` = A's halves, ``labels_b.jsonl`` = B's), none of whom saw another pass.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE.parents[1] / "bench" / "judge_labels"))

import label_sets  # noqa: E402  (shared with the other synthetic set)


def agree() -> dict:
    return label_sets.agree(HERE, "v4", ())


def final() -> None:
    rows = label_sets.final(HERE)
    label_sets.print_ideals(rows, "kind")
    label_sets.print_ideals(rows, "split")


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "agree":
        agree()
    elif cmd == "final":
        final()
    else:
        print(__doc__)
        raise SystemExit(2)
