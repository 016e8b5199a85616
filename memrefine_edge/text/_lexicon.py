"""The package's list of common English words (``data/common_words.txt``), read once.

The whole words among the first 10,000 frequency ranks of the encoder's (BERT uncased) vocabulary, in
rank order, written by ``scripts/make_common_words.py``. The last-copy check
(:mod:`memrefine_edge.text._lastcopy`) treats them as too common to be facts; the small-talk classifier
(:mod:`memrefine_edge.text._smalltalk`) counts the words outside them and far down them.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

__all__ = ["common_word_ranks"]


@lru_cache(maxsize=1)
def common_word_ranks() -> dict[str, int]:
    """``{word: rank}`` (0 = most frequent), lower case."""
    text = resources.files("memrefine_edge").joinpath("data", "common_words.txt").read_text(encoding="utf-8")
    words = [line for line in text.splitlines() if line and not line.startswith("#")]
    return {w: i for i, w in enumerate(words)}
