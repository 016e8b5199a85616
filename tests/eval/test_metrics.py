"""Tests for memrefine_edge.eval._metrics, the LoCoMo QA scoring protocol.

Two kinds of checks:

* self-written unit cases (always run), including Porter stems whose values
  were verified against nltk's ``PorterStemmer`` -- nltk is not needed here;
* the official scorer's outputs in ``metric-test-vectors.json`` from the LoCoMo
  data folder, read at run time (the data is CC BY-NC and is never copied into
  this repository). Found via ``$MEMREFINE_LOCOMO`` or ``../shared/data/locomo``
  next to the repository; the tests skip with a reason when it is absent.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from memrefine_edge.eval._metrics import (
    ABSTENTION_MARKERS,
    CATEGORY_NAMES,
    CATEGORY_REPORT_ORDER,
    QAScore,
    aggregate,
    declines,
    exact_match,
    f1_score,
    gold_answer,
    multi_answer_f1,
    normalize_answer,
    score_qa,
)
from memrefine_edge.eval._stemmer import stem

# --- locating the LoCoMo data -----------------------------------------------


def _locomo_dir() -> Path:
    env = os.environ.get("MEMREFINE_LOCOMO")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2].parent / "shared/data/locomo"


VECTORS_PATH = _locomo_dir() / "metric-test-vectors.json"
DEV_PATH = _locomo_dir() / "locomo-dev.json"
_MISSING = (
    f"LoCoMo data not found at {_locomo_dir()} "
    "(set MEMREFINE_LOCOMO to the folder holding metric-test-vectors.json)"
)


@cache
def _vectors() -> dict[str, Any] | None:
    if not VECTORS_PATH.is_file():
        return None
    return json.loads(VECTORS_PATH.read_text(encoding="utf-8"))


def _indices(group: str) -> list[Any]:
    """Parametrise over the vectors of one group by index (no text in ids)."""
    vectors = _vectors()
    if vectors is None:
        return [pytest.param(None, marks=pytest.mark.skip(reason=_MISSING))]
    return [pytest.param(i, id=f"{group}[{i}]") for i in range(len(vectors[group]))]


def _require(path: Path) -> None:
    if not path.is_file():
        pytest.skip(_MISSING)


def _rounded(value: float) -> float:
    """The vector file stores pair scores rounded to 6 decimals."""
    return round(float(value), 6)


# --- official test vectors --------------------------------------------------

locomo = pytest.mark.locomo


@locomo
@pytest.mark.parametrize("index", _indices("pairs"))
def test_vector_pairs(index: int) -> None:
    pair = _vectors()["pairs"][index]  # type: ignore[index]
    prediction, truth = pair["prediction"], pair["ground_truth"]
    assert normalize_answer(prediction) == pair["normalize_answer(prediction)"]
    assert normalize_answer(truth) == pair["normalize_answer(ground_truth)"]
    assert _rounded(f1_score(prediction, truth)) == pytest.approx(
        pair["f1_score"], abs=1e-9
    )
    assert _rounded(multi_answer_f1(prediction, truth)) == pytest.approx(
        pair["f1_multi_answer(cat1)"], abs=1e-9
    )
    assert exact_match(prediction, truth) is pair["exact_match_score(set-equality)"]


@locomo
@pytest.mark.parametrize("index", _indices("eval_question_answering_examples"))
def test_vector_eval_question_answering(index: int) -> None:
    example = _vectors()["eval_question_answering_examples"][index]  # type: ignore[index]
    score = score_qa(example, example["pred"])
    assert score.category == example["category"]
    assert score.f1 == pytest.approx(example["score"], abs=1e-9)


@locomo
def test_vector_cat5_without_answer_key() -> None:
    vectors = _vectors()
    if vectors is None:
        pytest.skip(_MISSING)
    expected = vectors["cat5_without_answer_key_on_official_main"]
    question = {
        "question": "q",
        "category": 5,
        "evidence": [],
        "adversarial_answer": "x",
    }
    with pytest.raises(KeyError) as caught:
        score_qa(question, "Not mentioned in the conversation")
    assert f"{type(caught.value).__name__}: {caught.value}" == expected
    # The opt-out grades the same record by the declining rule alone.
    lenient = score_qa(question, "Not mentioned in the conversation", strict=False)
    assert lenient == QAScore(f1=1.0, em=True, category=5)
    assert score_qa(question, "x", strict=False).f1 == 0.0


@locomo
def test_dev_split_categories_and_answer_keys() -> None:
    _require(DEV_PATH)
    samples = json.loads(DEV_PATH.read_text(encoding="utf-8"))
    questions = [q for sample in samples for q in sample["qa"]]
    assert {q["category"] for q in questions} == set(CATEGORY_NAMES)
    # Category 2 is temporal: nearly every question asks "when".
    temporal = [q for q in questions if q["category"] == 2]
    when = sum(q["question"].lower().startswith("when") for q in temporal)
    assert when / len(temporal) > 0.7
    for q in questions:
        if "answer" in q:
            score = score_qa(q, "Not mentioned")
            assert 0.0 <= score.f1 <= 1.0
        else:
            # Only adversarial questions lack the key; upstream stops on them.
            assert q["category"] == 5
            with pytest.raises(KeyError):
                score_qa(q, "Not mentioned")
            assert score_qa(q, "Not mentioned", strict=False).f1 == 1.0


# --- Porter stemming --------------------------------------------------------

# Every value below is nltk.stem.PorterStemmer().stem(word) (nltk 3.8.1 and 3.10.4).
NLTK_STEMS = {
    "caresses": "caress",
    "ponies": "poni",
    "ties": "tie",
    "dies": "die",
    "flies": "fli",
    "dying": "die",
    "lying": "lie",
    "skies": "sky",
    "news": "news",
    "innings": "inning",
    "agreed": "agre",
    "feed": "feed",
    "proceed": "proceed",
    "plastered": "plaster",
    "bled": "bled",
    "motoring": "motor",
    "sing": "sing",
    "conflated": "conflat",
    "troubled": "troubl",
    "sized": "size",
    "hopping": "hop",
    "tanned": "tan",
    "falling": "fall",
    "hissing": "hiss",
    "fizzed": "fizz",
    "filing": "file",
    "happy": "happi",
    "enjoy": "enjoy",
    "spy": "spi",
    "by": "by",
    "relational": "relat",
    "conditional": "condit",
    "hesitanci": "hesit",
    "radicalli": "radic",
    "vietnamization": "vietnam",
    "decisiveness": "decis",
    "hopefulness": "hope",
    "sensibiliti": "sensibl",
    "triplicate": "triplic",
    "electrical": "electr",
    "goodness": "good",
    "allowance": "allow",
    "gyroscopic": "gyroscop",
    "defensible": "defens",
    "replacement": "replac",
    "adoption": "adopt",
    "communism": "commun",
    "effective": "effect",
    "cease": "ceas",
    "controll": "control",
    "roll": "roll",
    "running": "run",
    "runs": "run",
    "ran": "ran",
    "counseling": "counsel",
    "certification": "certif",
    "psychology": "psycholog",
    "geology": "geolog",
    "swimming": "swim",
    "pottery": "potteri",
    "camping": "camp",
    "generously": "gener",
    "generalization": "gener",
    "hopefully": "hope",
    "fully": "fulli",
    "was": "wa",
    "is": "is",
    "a": "a",
}


@pytest.mark.parametrize(("word", "expected"), sorted(NLTK_STEMS.items()))
def test_stem_matches_nltk(word: str, expected: str) -> None:
    assert stem(word) == expected


def test_stem_lowercases_and_handles_runs_of_y() -> None:
    assert stem("Running") == "run"
    assert stem("SKIES") == "sky"
    assert stem("IS") == "is"
    assert stem("y" * 5000).startswith("y")  # no recursion limit


def test_import_needs_neither_nltk_nor_regex() -> None:
    code = (
        "import sys, memrefine_edge.eval._metrics as m; m.f1_score('a b', 'b');"
        "bad = {'nltk', 'regex', 'bert_score'} & set(sys.modules);"
        "sys.exit(f'imported {sorted(bad)}' if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr or done.stdout


# --- normalisation ----------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("An apple, the banana!", "apple banana"),
        ("Pottery and camping", "pottery camping"),  # "and" is removed too
        ("Anna, Andy and Theo", "anna andy theo"),  # whole words only
        ("the", ""),
        ("A.", ""),  # punctuation goes first, then the article
        ("U.S.A.", "usa"),
        ("She's a painter!", "shes painter"),
        ("rock-and-roll", "rockandroll"),  # hyphen removed before the word rule
        ("She\u2019s", "she\u2019s"),  # only ASCII punctuation is removed
        ("  many\t\nspaces\u00a0here ", "many spaces here"),
        ("Caf\u00e9", "caf\u00e9"),  # no accent folding
        ("a\u0301 b", "a\u0301 b"),  # a combining mark continues the word
        ("x\u00b2 a\u00b2", "x\u00b2 \u00b2"),  # superscript two is not a word char
    ],
)
def test_normalize_answer(raw: str, normalized: str) -> None:
    assert normalize_answer(raw) == normalized


# --- F1 and exact match -----------------------------------------------------


def test_f1_uses_stems_and_counts_repeats() -> None:
    assert f1_score("running", "runs") == 1.0
    assert f1_score("cat cat", "cat") == pytest.approx(2 / 3)
    assert f1_score("on 7 May", "7 May 2023") == pytest.approx(2 / 3)
    assert f1_score("", "something") == 0.0
    assert f1_score("", "") == 0.0  # no overlap at all scores zero ...
    assert exact_match("", "")  # ... while the empty sets are equal


def test_exact_match_is_set_equality_without_stemming() -> None:
    assert exact_match("May 7, 2023", "7 May 2023")
    assert exact_match("paris paris", "Paris")
    assert not exact_match("running", "runs")


def test_multi_answer_f1() -> None:
    gold = "Pottery, camping, painting, swimming"
    assert multi_answer_f1("camping, painting", gold) == 0.5
    assert multi_answer_f1("swimming, pottery, painting, camping", gold) == 1.0
    # Without commas the whole prediction is one part, diluted for every gold part.
    assert multi_answer_f1("camping and painting", gold) == pytest.approx(
        (0 + 2 / 3 + 2 / 3 + 0) / 4
    )
    assert multi_answer_f1("camping", "camping") == 1.0


# --- per-question scoring ---------------------------------------------------


def test_category_names() -> None:
    assert dict(CATEGORY_NAMES) == {
        1: "multi-hop",
        2: "temporal",
        3: "open-domain",
        4: "single-hop",
        5: "adversarial",
    }
    assert CATEGORY_REPORT_ORDER == (4, 1, 2, 3, 5)
    assert QAScore(f1=0.0, em=False, category=3).category_name == "open-domain"


def test_category_3_scores_the_first_segment_only() -> None:
    answer = "Likely yes; since she loves books"
    assert gold_answer({"answer": answer, "category": 3}) == "Likely yes"
    assert score_qa({"answer": answer, "category": 3}, "likely yes") == QAScore(
        f1=1.0, em=True, category=3
    )
    # Other categories keep the whole gold answer.
    assert score_qa({"answer": answer, "category": 4}, "likely yes").f1 < 1.0


def test_category_1_uses_multi_answer_f1() -> None:
    question = {"answer": "Pottery, camping, painting, swimming", "category": 1}
    assert score_qa(question, "pottery, camping, painting").f1 == 0.75
    assert score_qa({**question, "category": 4}, "pottery, camping, painting").f1 == (
        pytest.approx(6 / 7)
    )


@pytest.mark.parametrize(
    ("prediction", "expected"),
    [
        ("Not mentioned in the conversation", True),
        ("It is NOT MENTIONED anywhere.", True),
        ("No information available", True),
        ("(a) not mentioned", True),
        ("Not answerable", False),  # only the two official phrases count
        ("I don't know", False),
        ("not  mentioned", False),  # plain substring test, no normalisation
        ("self-care is important", False),
    ],
)
def test_category_5_declining_rule(prediction: str, expected: bool) -> None:
    assert declines(prediction) is expected
    score = score_qa({"answer": "decoy", "category": 5}, prediction)
    assert score == QAScore(f1=float(expected), em=expected, category=5)


def test_markers_are_the_official_strings() -> None:
    assert ABSTENTION_MARKERS == ("no information available", "not mentioned")


def test_non_string_answers_are_stringified() -> None:
    assert score_qa({"answer": 2022, "category": 2}, "2022") == QAScore(
        f1=1.0, em=True, category=2
    )


def test_missing_answer_raises_like_upstream() -> None:
    with pytest.raises(KeyError, match="answer"):
        score_qa({"category": 5, "adversarial_answer": "x"}, "not mentioned")
    with pytest.raises(KeyError, match="answer"):  # the answer lookup comes first
        score_qa({}, "x")
    with pytest.raises(KeyError, match="answer"):  # only category 5 may omit it
        score_qa({"category": 2}, "x", strict=False)


def test_bad_questions_are_refused() -> None:
    with pytest.raises(ValueError, match="category"):
        score_qa({"answer": "x", "category": 6}, "x")
    with pytest.raises(ValueError, match="BERTScore"):
        score_qa({"answer": "x", "category": 2, "metric": "bertscore"}, "x")
    with pytest.raises(TypeError):
        score_qa({"answer": "x", "category": 2}, ["x"])  # type: ignore[arg-type]


def test_qascore_is_frozen() -> None:
    score = QAScore(f1=1.0, em=True, category=4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        score.f1 = 0.0  # type: ignore[misc]


# --- aggregation ------------------------------------------------------------


def test_aggregate_overall_and_per_category() -> None:
    scores = [
        QAScore(f1=1.0, em=True, category=4),
        QAScore(f1=0.5, em=False, category=4),
        QAScore(f1=0.25, em=False, category=1),
        QAScore(f1=0.0, em=False, category=5),
    ]
    summary = aggregate(scores)
    assert summary.overall.count == 4
    assert summary.overall.f1 == pytest.approx(1.75 / 4)
    assert summary.overall.em == 0.25
    assert list(summary.by_category) == [4, 1, 5]  # official report order
    assert summary.by_category[4].count == 2
    assert summary.by_category[4].f1 == 0.75
    assert summary.by_category[4].em == 0.5
    assert summary.by_category[1].f1 == 0.25


def test_aggregate_of_nothing() -> None:
    summary = aggregate([])
    assert summary.overall.count == 0
    assert math.isnan(summary.overall.f1)
    assert dict(summary.by_category) == {}
