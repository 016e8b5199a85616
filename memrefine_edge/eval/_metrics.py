"""LoCoMo question-answering scores, reimplemented from the official scorer.

This module reproduces ``eval_question_answering`` and the helpers it uses from
``task_eval/evaluation.py`` in the official LoCoMo repository
(snap-research/locomo), without its heavy imports (``regex``, ``nltk``,
``bert_score``). Every number it returns equals the official one.

Category ids
------------
The integer ``category`` of a LoCoMo question does **not** follow the order in
which the LoCoMo paper (and the MemRefine paper) list the five question types.
The official scorer and the data fix the mapping as:

* ``1`` -- **multi-hop**: multi-answer F1 (:func:`multi_answer_f1`).
* ``2`` -- **temporal**: token F1.
* ``3`` -- **open-domain** ("open-ended" in the MemRefine paper): token F1
  against the gold answer cut at its first ``;``.
* ``4`` -- **single-hop**: token F1.
* ``5`` -- **adversarial** ("counterfactual" in the MemRefine paper): 1 if
  the prediction declines to answer, else 0.

Evidence: the scorer's branches (only category 1 gets the comma-split
multi-answer F1 meant for list answers; category 5 is graded on declining);
the data (every category-2 question asks "when", category-3 questions ask what
someone "would likely" do, category 4 is the largest bucket of one-evidence
look-ups, category 5 carries ``adversarial_answer``); and the official summary
script, which prints categories in the order 4, 1, 2, 3, 5 -- the paper's table
order single-hop, multi-hop, temporal, open-domain, adversarial.

The protocol
------------
* :func:`normalize_answer` -- drop commas, lowercase, delete every ASCII
  punctuation character (``string.punctuation``; curly quotes and other
  Unicode punctuation stay), replace the whole words ``a``, ``an``, ``the``
  **and ``and``** with a space, collapse whitespace. Punctuation goes *before*
  the article rule, so ``"U.S.A."`` becomes ``"usa"`` and ``"She's"`` becomes
  ``"shes"``. No Unicode folding: ``"café"`` does not match ``"cafe"``.
* :func:`f1_score` -- token F1 over the normalised answers split on
  whitespace, each token Porter-stemmed exactly as NLTK's default
  ``PorterStemmer`` does (:mod:`memrefine_edge.eval._stemmer`). Token multiplicity
  counts; no overlap (including an empty side) scores 0.
* :func:`multi_answer_f1` (category 1) -- the *raw* prediction and gold are
  split on ``","``; each gold part takes its best :func:`f1_score` over the
  prediction parts, and the parts are averaged (``numpy.mean``, as upstream).
  A prediction that lists items with "and" instead of commas is one part.
* Category 3 scores against ``gold.split(";")[0].strip()`` only.
* Category 5 scores 1 when the lowercased prediction contains
  ``"no information available"`` or ``"not mentioned"`` (plain substrings,
  so ``"It is not mentioned"`` counts) and 0 otherwise. The gold answer is
  never compared.
* :func:`exact_match` -- the official ``exact_match_score``: the *sets* of
  normalised, unstemmed tokens are equal (order and repeats ignored). The
  official QA loop never calls it; :func:`score_qa` reports it alongside.

The gold answer and the missing-``answer`` case
-----------------------------------------------
Upstream reads ``question["answer"]`` and converts it with ``str()`` (some
answers are integers, e.g. a year) *before* it looks at the category, and it
never reads ``adversarial_answer``. LoCoMo's released data stores the
adversarial decoy of most category-5 questions under ``adversarial_answer``
with no ``answer`` key, so the official scorer stops with ``KeyError:
'answer'`` on them. :func:`score_qa` does the same by default
(``strict=True``). With ``strict=False`` a category-5 question without an
``answer`` is graded by the declining rule alone -- the score the official
code gives whatever the ``answer`` value is; other categories still need
``answer``. Neither mode reads ``adversarial_answer``.

Questions carrying ``"metric": "bertscore"`` (an upstream branch that no
LoCoMo question uses) are refused rather than scored differently.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from ._stemmer import stem

__all__ = [
    "ABSTENTION_MARKERS",
    "CATEGORY_NAMES",
    "CATEGORY_REPORT_ORDER",
    "CategorySummary",
    "QAScore",
    "ScoreSummary",
    "aggregate",
    "declines",
    "stemmed_tokens",
    "exact_match",
    "f1_score",
    "gold_answer",
    "multi_answer_f1",
    "normalize_answer",
    "score_qa",
]

CATEGORY_NAMES: Mapping[int, str] = MappingProxyType(
    {
        1: "multi-hop",
        2: "temporal",
        3: "open-domain",
        4: "single-hop",
        5: "adversarial",
    }
)
"""LoCoMo ``category`` id -> question type, as the official scorer uses them."""

CATEGORY_REPORT_ORDER: tuple[int, ...] = (4, 1, 2, 3, 5)
"""The official summary's order: single-hop, multi-hop, temporal, open-domain,
adversarial (the order of the LoCoMo paper's tables)."""

ABSTENTION_MARKERS: tuple[str, ...] = ("no information available", "not mentioned")
"""Lowercase substrings that make a category-5 prediction score 1."""

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = ("a", "an", "the", "and")  # the upstream alternation, in its order

# Characters the third-party ``regex`` module (used upstream) treats as word
# characters beyond what general categories give: ``Other_Alphabetic`` symbols.
_EXTRA_WORD_RANGES = (
    (0x24B6, 0x24E9),  # circled Latin letters
    (0x1F130, 0x1F149),  # squared Latin capital letters
    (0x1F150, 0x1F169),  # negative circled Latin capital letters
    (0x1F170, 0x1F189),  # negative squared Latin capital letters
)


def _is_word_char(char: str) -> bool:
    """Whether upstream's ``\\b`` (``regex`` module) sees a word character.

    ``regex`` defines a word character as Alphabetic, a mark, a decimal digit,
    connector punctuation or a joiner. That differs from the standard
    library's ``re`` for combining marks (word in ``regex``, not in ``re``),
    ``No`` digits such as ``"²"`` (the reverse) and a few letter symbols.
    """
    if char.isascii():
        return char.isalnum() or char == "_"
    category = unicodedata.category(char)
    if category[0] in "LM" or category in ("Nd", "Nl", "Pc"):
        return True
    if char in "\u200c\u200d":
        return True
    code = ord(char)
    return any(low <= code <= high for low, high in _EXTRA_WORD_RANGES)


_ASCII_ARTICLES = re.compile(r"\b(?:a|an|the|and)\b")


def _remove_articles(text: str) -> str:
    """Replace each whole word a / an / the / and with a single space.

    Equivalent to ``regex.sub(r"\\b(a|an|the|and)\\b", " ", text)``.
    """
    if text.isascii():  # ``re`` and ``regex`` agree on ASCII word characters
        return _ASCII_ARTICLES.sub(" ", text)
    pieces: list[str] = []
    copied_up_to = 0
    index = 0
    length = len(text)
    while index < length:
        if text[index] in "at" and (index == 0 or not _is_word_char(text[index - 1])):
            for article in _ARTICLES:
                end = index + len(article)
                if text.startswith(article, index) and (
                    end == length or not _is_word_char(text[end])
                ):
                    pieces.append(text[copied_up_to:index])
                    pieces.append(" ")
                    copied_up_to = index = end
                    break
            else:
                index += 1
        else:
            index += 1
    pieces.append(text[copied_up_to:])
    return "".join(pieces)


def normalize_answer(s: str) -> str:
    """Normalise an answer string as the official LoCoMo scorer does.

    >>> normalize_answer("The Sunday before 25 May, 2023!")
    'sunday before 25 may 2023'
    >>> normalize_answer("Painting and swimming")
    'painting swimming'
    """
    s = s.replace(",", "").lower()
    s = "".join(char for char in s if char not in _PUNCTUATION)
    return " ".join(_remove_articles(s).split())


def stemmed_tokens(s: str) -> list[str]:
    """The scorer's tokens of a text: :func:`normalize_answer`, split, Porter-stemmed."""
    return [stem(token) for token in normalize_answer(s).split()]


_stemmed_tokens = stemmed_tokens


def f1_score(prediction: str, ground_truth: str) -> float:
    """Token-level F1 of two answers after normalisation and Porter stemming.

    >>> f1_score("running", "runs")
    1.0
    """
    prediction_tokens = _stemmed_tokens(prediction)
    truth_tokens = _stemmed_tokens(ground_truth)
    truth_counts: dict[str, int] = {}
    for token in truth_tokens:
        truth_counts[token] = truth_counts.get(token, 0) + 1
    num_same = 0
    for token in prediction_tokens:
        remaining = truth_counts.get(token, 0)
        if remaining:
            truth_counts[token] = remaining - 1
            num_same += 1
    if num_same == 0:
        return 0.0
    # Same operations, in the same order, as upstream: identical floats.
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(truth_tokens)
    return (2 * precision * recall) / (precision + recall)


def multi_answer_f1(prediction: str, ground_truth: str) -> float:
    """Category-1 F1: mean over comma-separated gold parts of the best part F1.

    >>> multi_answer_f1("camping, painting", "Pottery, camping, painting, swimming")
    0.5
    """
    predictions = [part.strip() for part in prediction.split(",")]
    truths = [part.strip() for part in ground_truth.split(",")]
    best = [max(f1_score(part, truth) for part in predictions) for truth in truths]
    return float(np.mean(best))


def exact_match(prediction: str, ground_truth: str) -> bool:
    """Official ``exact_match_score``: equal *sets* of normalised tokens.

    >>> exact_match("May 7, 2023", "7 May 2023")
    True
    """
    return set(normalize_answer(prediction).split()) == set(
        normalize_answer(ground_truth).split()
    )


def declines(prediction: str) -> bool:
    """Category-5 rule: the prediction says the answer is not available."""
    lowered = prediction.lower()
    return any(marker in lowered for marker in ABSTENTION_MARKERS)


def gold_answer(question: Mapping[str, Any]) -> str:
    """The gold string the official scorer compares against.

    ``str(question["answer"])``, cut at the first ``;`` for category 3.
    Raises ``KeyError('answer')`` when the key is missing, as upstream does.
    """
    answer = str(question["answer"])
    if question["category"] == 3:
        answer = answer.split(";")[0].strip()
    return answer


@dataclass(frozen=True, slots=True)
class QAScore:
    """The score of one answered LoCoMo question.

    ``f1`` is the official per-question score (for category 5 it is the 0/1
    declining rule). ``em`` is :func:`exact_match` against the same gold
    (for category 5, the declining rule again).
    """

    f1: float
    em: bool
    category: int

    @property
    def category_name(self) -> str:
        """Human name of :attr:`category` (see :data:`CATEGORY_NAMES`)."""
        return CATEGORY_NAMES[self.category]


def score_qa(
    question: Mapping[str, Any], prediction: str, *, strict: bool = True
) -> QAScore:
    """Score one prediction for one LoCoMo question, like the official scorer.

    ``question`` is a LoCoMo ``qa`` record (``category`` and, normally,
    ``answer``). With ``strict=True`` (default) a missing ``answer`` raises
    ``KeyError('answer')`` exactly where upstream does, including for
    category 5; ``strict=False`` lets category-5 records without ``answer``
    be graded by the declining rule. An unknown category raises
    ``ValueError`` (after the ``answer`` lookup, in upstream's order).
    """
    if not isinstance(prediction, str):
        raise TypeError(f"prediction must be a str, not {type(prediction).__name__}")
    answer: str | None = None
    if strict or "answer" in question or question["category"] != 5:
        answer = gold_answer(question)  # KeyError('answer') first, as upstream
    category = question["category"]
    if question.get("metric") == "bertscore":
        raise ValueError("questions graded with BERTScore are not supported")
    if category not in CATEGORY_NAMES:
        raise ValueError(f"unknown LoCoMo category {category!r}; expected 1-5")
    category = int(category)
    if category == 5:
        declined = declines(prediction)
        return QAScore(f1=1.0 if declined else 0.0, em=declined, category=5)
    assert answer is not None
    if category == 1:
        f1 = multi_answer_f1(prediction, answer)
    else:
        f1 = f1_score(prediction, answer)
    return QAScore(f1=f1, em=exact_match(prediction, answer), category=category)


@dataclass(frozen=True, slots=True)
class CategorySummary:
    """Mean scores over the questions of one category (or of all of them)."""

    count: int
    f1: float
    em: float


@dataclass(frozen=True, slots=True)
class ScoreSummary:
    """Overall and per-category means, as the official summary reports them.

    ``overall`` is the micro-average over every scored question (category 5
    included, as upstream). ``by_category`` holds only categories that occur,
    keyed by id in :data:`CATEGORY_REPORT_ORDER`.
    """

    overall: CategorySummary
    by_category: Mapping[int, CategorySummary] = field(default_factory=dict)


def aggregate(scores: Iterable[QAScore]) -> ScoreSummary:
    """Average :class:`QAScore` values overall and per category.

    Sums run in input order within a category and then across categories in
    :data:`CATEGORY_REPORT_ORDER`, as the official summary script does.
    An empty input gives zero counts and NaN means.
    """
    f1_sums: dict[int, float] = {}
    em_sums: dict[int, int] = {}
    counts: dict[int, int] = {}
    for score in scores:
        key = score.category
        f1_sums[key] = f1_sums.get(key, 0) + score.f1
        em_sums[key] = em_sums.get(key, 0) + int(score.em)
        counts[key] = counts.get(key, 0) + 1

    order = [c for c in CATEGORY_REPORT_ORDER if c in counts]
    order += sorted(c for c in counts if c not in CATEGORY_REPORT_ORDER)
    by_category = {
        c: CategorySummary(
            count=counts[c], f1=f1_sums[c] / counts[c], em=em_sums[c] / counts[c]
        )
        for c in order
    }
    total = sum(counts.values())
    f1_total = 0.0
    em_total = 0
    for c in order:
        f1_total += f1_sums[c]
        em_total += em_sums[c]
    nan = float("nan")
    overall = CategorySummary(
        count=total,
        f1=f1_total / total if total else nan,
        em=em_total / total if total else nan,
    )
    return ScoreSummary(overall=overall, by_category=MappingProxyType(by_category))
