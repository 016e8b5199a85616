"""The redundancy scorer: a small learned model that says what to do with a pair, in a fraction of a millisecond.

Cosine similarity proposes pairs; it cannot tell a paraphrase ("Sam appreciates
Evan's encouragement" / "Sam expressed appreciation towards Evan's support")
from two distinct facts about the same person. The scorer reads features the
fact extractor (:mod:`memrefine_edge.text._facts`) already gives -- similarity, how
much of each side's facts and words the other carries, names, numbers, dates
and negation on one side only, speakers, filler, lengths, word overlap -- and
outputs calibrated probabilities of the four actions ``delete_a``,
``delete_b``, ``merge`` and ``preserve`` with a multinomial logistic
regression (numpy only).

The weights are a small JSON file shipped with the package
(``data/scorer_weights.json``), trained by ``bench/judge_labels/train_scorer.py``
on the *tune* part of the labelled pairs only; the *test* part is never
fitted on. :class:`ScorerJudge` (in :mod:`memrefine_edge.judging._judge`) turns the
probabilities into a decision behind the hard fact checks.

Features are *ordered*: swapping ``a`` and ``b`` permutes them (see
:func:`swap_index`), and training sees every pair both ways, so the model's
``delete_a`` for ``(a, b)`` is its ``delete_b`` for ``(b, a)``.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from memrefine_edge.core import ConfigurationError
from memrefine_edge.text import (
    TEXT_CACHE,
    Facts,
    coverage_keys,
    extract,
    is_filler,
    missing_facts,
    normalise,
    sentence_scans,
    stated_words,
    strip_speaker,
)

__all__ = ["CLASSES", "FEATURES", "RedundancyScorer", "Scores", "pair_features", "swap_index"]

#: The scorer's output classes, in the order of its probability vector.
CLASSES: tuple[str, ...] = ("delete_a", "delete_b", "merge", "preserve")

# Ordered feature names: "_a"/"_b" pairs swap when the pair is swapped; the rest are symmetric.
FEATURES: tuple[str, ...] = (
    "sim", "sim2",
    "strict_extra_a", "strict_extra_b",      # names/numbers/dates/negation one side has and the other lacks
    "name_extra_a", "name_extra_b",
    "num_date_extra_a", "num_date_extra_b",
    "word_cover_a", "word_cover_b",          # share of a's content words that b carries (and back)
    "words_a", "words_b",                    # log(1 + content words)
    "filler_share_a", "filler_share_b",      # share of sentences that are small talk
    "question_share_a", "question_share_b",  # share of sentences that are questions
    "stated_words_a", "stated_words_b",      # log(1 + content words outside questions and small talk)
    "photo_a", "photo_b",                    # shares a photo (its caption is content)
    "sentences_a", "sentences_b",
    "log_len_ratio",                         # log(len a / len b): antisymmetric, sign flips on swap
    "same_speaker", "other_speaker",
    "fact_jaccard", "token_jaccard", "bigram_jaccard",
    "both_no_strict",
    "update_a", "update_b",                  # words that mark an update of an earlier value ("now", "moved")
    "shared_names",                          # names (not the speaker) both sides hold
    "shared_words",                          # log(1 + content words both sides hold)
    "replaced",                              # one side is the other with one short span replaced
)
_PAIRS = [(i, FEATURES.index(n[:-2] + "_b")) for i, n in enumerate(FEATURES) if n.endswith("_a")]
_ANTI = (FEATURES.index("log_len_ratio"),)


def swap_index() -> tuple[np.ndarray, np.ndarray]:
    """``(perm, sign)``: ``features(b, a) == features(a, b)[perm] * sign``."""
    perm = np.arange(len(FEATURES))
    for i, j in _PAIRS:
        perm[i], perm[j] = j, i
    sign = np.ones(len(FEATURES))
    sign[list(_ANTI)] = -1.0
    return perm, sign


_TOK = re.compile(r"[^\W_]+(?:'[^\W_]+)*")
#: Words that mark an entry as an update of an earlier value of the same thing.
_UPDATE = frozenset("now new newly moved switched changed changes anymore longer instead correction actually "
                    "since replaced upgraded downgraded updated became become becomes".split())


_PHOTO = re.compile(r"\[shares? (a )?(photo|picture|image)", re.IGNORECASE)


@dataclass(frozen=True)
class _Side:
    facts: Facts
    sentences: int
    filler_share: float
    question_share: float
    stated_words: int
    photo: bool
    tokens: tuple[str, ...]
    update: bool


@lru_cache(maxsize=TEXT_CACHE)
def _side(text: str) -> _Side:
    # The features read the word lists' small talk only (classify=False): the learned classifier
    # decides in the hard fact checks and the fast path, which gate the scorer's choice.
    facts = extract(text, classify=False)
    _, body = strip_speaker(text)
    # Sentences as the extractor splits them (line breaks too), so the shares below count the same ones.
    scans = sentence_scans(text, classify=False)
    sentences = [s for s, _, _ in scans]
    kept = sum(not filler for _, filler, _ in scans)
    filler_share = 1.0 - kept / len(sentences) if sentences else 1.0
    if is_filler(text, classify=False):
        filler_share = 1.0
    questions = sum(s.rstrip().endswith("?") for s in sentences)
    stated = stated_words(scans)
    tokens = tuple(_TOK.findall(normalise(body)))
    return _Side(facts, max(1, len(sentences)), filler_share, questions / len(sentences) if sentences else 0.0,
                 len(stated), bool(_PHOTO.search(text)), tokens, not _UPDATE.isdisjoint(tokens))


def _one_replaced(x: tuple[str, ...], y: tuple[str, ...]) -> bool:
    """``y`` is ``x`` with one span of at most three words replaced by another, the rest the same."""
    if x == y or not x or not y or abs(len(x) - len(y)) > 2 or len(set(x) ^ set(y)) > 6:
        return False  # cheap tests first: a replaced span of at most three words allows no more
    import difflib

    ops = [op for op in difflib.SequenceMatcher(None, x, y, autojunk=False).get_opcodes() if op[0] != "equal"]
    if len(ops) != 1 or ops[0][0] != "replace":
        return False
    _, i1, i2, j1, j2 = ops[0]
    equal = len(x) - (i2 - i1)
    return i2 - i1 <= 3 and j2 - j1 <= 3 and equal >= 2 and 2 * equal >= max(len(x), len(y))


def _jaccard(x: AbstractSet[Any], y: AbstractSet[Any]) -> float:
    return len(x & y) / len(x | y) if (x or y) else 1.0


def _extra(fx: Facts, fy: Facts) -> tuple[int, int, int]:
    """Strict facts of ``fx`` that ``fy`` lacks: all of them, the names, the numbers and dates."""
    lost = missing_facts(fx, fy, min_word_cover=0.0)  # 0.0: strict facts only, never content words
    return len(lost), sum(k in fx.names for k in lost), sum(k in fx.numbers or k in fx.dates for k in lost)


def pair_features(a: str, b: str, similarity: float) -> np.ndarray:
    """The ordered feature vector of the pair ``(a, b)`` (see :data:`FEATURES`)."""
    sa, sb = _side(a), _side(b)
    fa, fb, toks_a, toks_b = sa.facts, sb.facts, sa.tokens, sb.tokens
    have_a, have_b = coverage_keys(fa), coverage_keys(fb)
    ea, ea_names, ea_nums = _extra(fa, fb)
    eb, eb_names, eb_nums = _extra(fb, fa)
    cover_a = sum(w in have_b for w in fa.words) / len(fa.words) if fa.words else 1.0
    cover_b = sum(w in have_a for w in fb.words) / len(fb.words) if fb.words else 1.0
    same = fa.speaker is not None and fa.speaker == fb.speaker
    other = fa.speaker is not None and fb.speaker is not None and fa.speaker != fb.speaker
    ka = fa.keys() - ({fa.speaker} if fa.speaker else set())
    kb = fb.keys() - ({fb.speaker} if fb.speaker else set())
    sim = float(similarity)
    values = {
        "sim": sim, "sim2": sim * sim,
        "strict_extra_a": min(ea, 3) / 3, "strict_extra_b": min(eb, 3) / 3,
        "name_extra_a": float(ea_names > 0), "name_extra_b": float(eb_names > 0),
        "num_date_extra_a": float(ea_nums > 0), "num_date_extra_b": float(eb_nums > 0),
        "word_cover_a": cover_a, "word_cover_b": cover_b,
        "words_a": math.log1p(len(fa.words)), "words_b": math.log1p(len(fb.words)),
        "filler_share_a": sa.filler_share, "filler_share_b": sb.filler_share,
        "question_share_a": sa.question_share, "question_share_b": sb.question_share,
        "stated_words_a": math.log1p(sa.stated_words), "stated_words_b": math.log1p(sb.stated_words),
        "photo_a": float(sa.photo), "photo_b": float(sb.photo),
        "sentences_a": math.log(sa.sentences), "sentences_b": math.log(sb.sentences),
        "log_len_ratio": math.log((len(a) + 1) / (len(b) + 1)),
        "same_speaker": float(same), "other_speaker": float(other),
        "fact_jaccard": _jaccard(ka, kb),
        "token_jaccard": _jaccard(set(toks_a), set(toks_b)),
        "bigram_jaccard": _jaccard(set(zip(toks_a, toks_a[1:], strict=False)),
                                   set(zip(toks_b, toks_b[1:], strict=False))),
        "both_no_strict": float(not fa.strict - ({fa.speaker} if fa.speaker else set())
                                and not fb.strict - ({fb.speaker} if fb.speaker else set())),
        "update_a": float(sa.update), "update_b": float(sb.update),
        "shared_names": min(len((fa.names & fb.names) - {fa.speaker, fb.speaker}), 2) / 2,
        "shared_words": math.log1p(len(fa.words & fb.words)),
        "replaced": float(_one_replaced(toks_a, toks_b)),
    }
    return np.array([values[n] for n in FEATURES], dtype=np.float64)


@dataclass(frozen=True)
class Scores:
    """The scorer's probabilities for one ordered pair."""

    delete_a: float
    delete_b: float
    merge: float
    preserve: float

    def as_dict(self) -> dict[str, float]:
        """``{class: probability}`` in :data:`CLASSES` order."""
        return {c: getattr(self, c) for c in CLASSES}

    def ranked(self) -> list[tuple[str, float]]:
        """Classes from the most to the least probable (ties keep :data:`CLASSES` order)."""
        return sorted(self.as_dict().items(), key=lambda kv: -kv[1])


WEIGHTS_FILE = "scorer_weights.json"


class RedundancyScorer:
    """Multinomial logistic regression over :func:`pair_features`.

    ``weights`` is the parsed weights file (``{"features", "classes", "mean",
    "scale", "coef", "intercept", ...}``); by default the packaged one. The
    file names its features, and loading refuses a file made for other
    features, so weights never silently misalign with the code: a missing,
    unreadable or mismatched file is a
    :class:`~memrefine_edge.core._errors.ConfigurationError`.
    """

    def __init__(self, *, weights: dict[str, Any] | None = None,
                 path: str | os.PathLike[str] | None = None) -> None:
        if weights is None:
            try:
                if path is not None:
                    weights = json.loads(Path(path).read_text(encoding="utf-8"))
                else:
                    packaged = resources.files("memrefine_edge").joinpath("data", WEIGHTS_FILE)
                    weights = json.loads(packaged.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise ConfigurationError(f"cannot read scorer weights {path or WEIGHTS_FILE}: {exc}") from exc
        if not isinstance(weights, dict):
            raise ConfigurationError("scorer weights must be a JSON object")
        if tuple(weights.get("features", ())) != FEATURES or tuple(weights.get("classes", ())) != CLASSES:
            raise ConfigurationError("scorer weights were trained for other features or classes; retrain them with "
                                     "bench/judge_labels/train_scorer.py")
        self.meta = {k: v for k, v in weights.items() if k not in ("mean", "scale", "coef", "intercept")}
        try:
            self.mean = np.asarray(weights["mean"], dtype=np.float64)
            self.scale = np.asarray(weights["scale"], dtype=np.float64)
            self.coef = np.asarray(weights["coef"], dtype=np.float64)          # (classes, features)
            self.intercept = np.asarray(weights["intercept"], dtype=np.float64)  # (classes,)
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigurationError(f"scorer weights are incomplete or not numbers: {exc!r}") from exc
        f = len(FEATURES)
        if (self.coef.shape != (len(CLASSES), f) or self.intercept.shape != (len(CLASSES),)
                or self.mean.shape != (f,) or self.scale.shape != (f,) or not np.all(self.scale > 0)):
            raise ConfigurationError(f"scorer weights have shapes coef {self.coef.shape}, mean {self.mean.shape}, "
                                     f"scale {self.scale.shape}; expected {(len(CLASSES), f)}, ({f},), ({f},) "
                                     "with positive scales")

    def probabilities(self, features: np.ndarray) -> np.ndarray:
        """Class probabilities for a ``(n, features)`` (or one ``(features,)``) array."""
        x = (np.atleast_2d(features) - self.mean) / self.scale
        z = x @ self.coef.T + self.intercept
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        return p if np.ndim(features) == 2 else p[0]

    def score(self, a: str, b: str, similarity: float) -> Scores:
        """The probabilities of the four actions for ``(a, b)``."""
        p = self.probabilities(pair_features(a, b, similarity))
        return Scores(*(float(v) for v in p))
