"""Write memrefine_edge/data/common_words.txt: the most frequent English words, from the encoder's vocabulary.

    python scripts/make_common_words.py [--top 10000]

BERT's uncased WordPiece vocabulary (the tokenizer of all-MiniLM-L6-v2, Apache-2.0, fetched by
``memrefine models fetch``) lists its tokens, after the special and single-character ones (ids below
1996), in the order of their frequency in the corpus it was built from. The first ``--top`` of those
ranks that are whole lower-case words (not ``##`` pieces) are the package's common words: the last-copy
check (:mod:`memrefine_edge.text._lastcopy`) treats every other word as specific. The file is small (one word
a line) and committed, so the check needs no model file.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

FIRST_WORD_ID = 1996  # "the": everything before is [PAD], [unusedN], [CLS]... and single characters


def main() -> int:
    from memrefine_edge.backends import model_path

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=10_000, help="vocabulary ranks counted as common [10000]")
    ap.add_argument("--out", type=Path, default=REPO / "memrefine_edge" / "data" / "common_words.txt")
    args = ap.parse_args()
    vocab = json.loads(Path(model_path("tokenizer")).read_text(encoding="utf-8"))["model"]["vocab"]
    word = re.compile(r"[a-z][a-z']*")
    common = sorted((i, w) for w, i in vocab.items()
                    if FIRST_WORD_ID <= i < FIRST_WORD_ID + args.top and word.fullmatch(w))
    header = (f"# The whole words among the first {args.top} frequency ranks of BERT's uncased vocabulary "
              f"(ids {FIRST_WORD_ID}..), in rank order; written by scripts/make_common_words.py\n")
    args.out.write_text(header + "\n".join(w for _, w in common) + "\n", encoding="utf-8")
    print(f"wrote {len(common)} words to {args.out.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
