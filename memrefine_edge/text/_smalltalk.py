"""Small talk the word lists miss: a tiny learned classifier of single sentences.

The fact extractor (:mod:`memrefine_edge.text._facts`) calls a sentence small talk
when every word of it is a greeting, thanks or praise word. Chat is full of
small talk made of ordinary words -- "It must feel great to be recognised.",
"Family is everything.", "Have a great hike." -- which the labelling rules
count as no fact, but which the word lists read as content. This module
decides those sentences: a logistic regression over the sentence's words and
a few shape features (length, pronouns, exclamation, words outside the
common-word list), trained on labelled sentences of chat memories
(``bench/smalltalk/train.py``; weights in ``data/smalltalk_weights.json``).

The extractor asks it only about sentences it cannot decide itself: not small
talk by the word lists, not a question, and without a name, number or date
(with one of those a sentence is a fact whatever its wording). It runs in
microseconds and is cached per sentence.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from ._lexicon import common_word_ranks

__all__ = ["SmallTalkModel", "sentence_features", "default_model", "is_small_talk", "small_talk_probability"]

_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_FIRST_SINGULAR = frozenset({"i", "i'm", "i've", "i'll", "i'd", "my", "me", "mine", "myself"})
_FIRST_PLURAL = frozenset({"we", "we're", "we've", "we'll", "we'd", "our", "us", "ours", "ourselves"})
_SECOND = frozenset({"you", "your", "you're", "you've", "you'll", "you'd", "yours", "yourself", "ya", "u"})
#: The shape features, in the order the weights file lists them.
DENSE = ("tokens", "first_singular", "first_plural", "second", "exclamation", "photo", "rare", "uncommon",
         "past")


def sentence_features(sentence: str) -> tuple[list[str], dict[str, float]]:
    """``(tokens, shape features)`` of one sentence: lower-cased word tokens and :data:`DENSE` values."""
    low = sentence.lower().replace("\u2019", "'")
    toks = _TOKEN.findall(low)
    n = len(toks) or 1
    ranks = common_word_ranks()
    rare = sum(1 for t in toks if t.isalpha() and t not in ranks)
    uncommon = sum(1 for t in toks if ranks.get(t, 0) >= 2000)
    dense = {
        "tokens": math.log1p(len(toks)),
        "first_singular": sum(t in _FIRST_SINGULAR for t in toks) / n,
        "first_plural": sum(t in _FIRST_PLURAL for t in toks) / n,
        "second": sum(t in _SECOND for t in toks) / n,
        "exclamation": float("!" in sentence),
        "photo": float(low.lstrip().startswith("[shares")),
        "rare": math.log1p(rare),
        "uncommon": math.log1p(uncommon),
        "past": math.log1p(sum(1 for t in toks if len(t) > 4 and t.endswith("ed"))),
    }
    return toks, dense


@dataclass(frozen=True)
class SmallTalkModel:
    """Weights of the classifier: per word, per first word, per shape feature (standardised), a bias."""

    words: dict[str, float]
    first: dict[str, float]
    dense: dict[str, float]
    mean: dict[str, float]
    scale: dict[str, float]
    bias: float
    #: The probability at and above which a sentence is small talk.
    threshold: float

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> SmallTalkModel:
        """The model a weights file (``bench/smalltalk/train.py``) describes."""
        return cls(words=dict(raw["words"]), first=dict(raw["first"]), dense=dict(raw["dense"]),
                   mean=dict(raw["mean"]), scale=dict(raw["scale"]), bias=float(raw["bias"]),
                   threshold=float(raw["threshold"]))

    def probability(self, sentence: str) -> float:
        """The probability that ``sentence`` is small talk."""
        toks, dense = sentence_features(sentence)
        z = self.bias + sum(self.words.get(t, 0.0) for t in set(toks))
        if toks:
            z += self.first.get(toks[0], 0.0)
        z += sum(w * (dense[k] - self.mean[k]) / self.scale[k] for k, w in self.dense.items())
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))


@lru_cache(maxsize=1)
def default_model() -> SmallTalkModel:
    """The packaged model (read once)."""
    raw = json.loads(resources.files("memrefine_edge").joinpath("data", "smalltalk_weights.json").read_text("utf-8"))
    return SmallTalkModel.from_dict(raw)


# Small: the extractor caches each text's and each sentence's result already, so a sentence reaches the
# classifier again only when both have forgotten it; a larger cache cost memory at 100k entries.
@lru_cache(maxsize=2048)
def small_talk_probability(sentence: str) -> float:
    """The packaged model's probability that ``sentence`` is small talk (cached per sentence)."""
    return default_model().probability(sentence)


def is_small_talk(sentence: str) -> bool:
    """Whether the packaged model calls ``sentence`` small talk."""
    return small_talk_probability(sentence) >= default_model().threshold
