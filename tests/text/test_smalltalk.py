"""The small-talk classifier: its arithmetic, the packaged weights, and how the fact extractor uses it."""

from __future__ import annotations

import json
import math
from importlib import resources

import pytest

from memrefine_edge.text import SmallTalkModel, extract, fact_sentences, is_filler, is_small_talk
from memrefine_edge.text._smalltalk import DENSE, default_model, sentence_features, small_talk_probability

NEUTRAL = {k: 0.0 for k in DENSE}
UNIT = {k: 1.0 for k in DENSE}


def model(words=None, first=None, dense=None, bias=0.0, threshold=0.5):
    return SmallTalkModel(words=words or {}, first=first or {}, dense=dense or {}, mean=NEUTRAL, scale=UNIT,
                          bias=bias, threshold=threshold)


def test_features_are_lower_cased_tokens_and_shape_values():
    toks, dense = sentence_features("I LOVE my Dog! [shares a photo: a dog]")
    assert toks[:4] == ["i", "love", "my", "dog"]
    assert set(dense) == set(DENSE)
    assert dense["exclamation"] == 1.0 and dense["photo"] == 0.0  # the photo tag does not start the sentence
    assert dense["first_singular"] == pytest.approx(2 / len(toks))
    assert sentence_features("[shares a photo: a lake]")[1]["photo"] == 1.0


def test_probability_is_the_logistic_of_the_summed_weights():
    m = model(words={"great": 1.5, "hike": -0.5}, first={"have": 0.25}, bias=-1.0)
    z = -1.0 + 1.5 - 0.5 + 0.25
    assert m.probability("Have a great hike, great!") == pytest.approx(1 / (1 + math.exp(-z)))  # a word counts once
    assert m.probability("nothing known here") == pytest.approx(1 / (1 + math.exp(1.0)))


def test_shape_features_are_standardised_with_the_files_mean_and_scale():
    m = SmallTalkModel(words={}, first={}, dense={"exclamation": 2.0}, mean={**NEUTRAL, "exclamation": 0.5},
                       scale={**UNIT, "exclamation": 0.25}, bias=0.0, threshold=0.5)
    assert m.probability("Wow!") == pytest.approx(1 / (1 + math.exp(-2.0 * (1.0 - 0.5) / 0.25)))


def test_from_dict_reads_a_weights_file_and_ignores_its_notes():
    raw = {"words": {"thanks": 2.0}, "first": {}, "dense": {}, "mean": NEUTRAL, "scale": UNIT, "bias": 0.0,
           "threshold": 0.7, "trained_on": "a note", "cv": {"accuracy": 0.8}}
    m = SmallTalkModel.from_dict(raw)
    assert m.threshold == 0.7 and m.words == {"thanks": 2.0}


def test_the_packaged_weights_are_complete():
    raw = json.loads(resources.files("memrefine_edge").joinpath("data", "smalltalk_weights.json").read_text("utf-8"))
    assert set(raw["dense"]) == set(DENSE) == set(raw["mean"]) == set(raw["scale"])
    assert all(v > 0 for v in raw["scale"].values())
    assert 0.5 <= raw["threshold"] < 1.0
    assert len(raw["words"]) > 100
    assert default_model().threshold == raw["threshold"]


@pytest.mark.parametrize("sentence", ["It must feel great to be recognized for your hard work.", "Have a great hike."])
def test_the_packaged_model_calls_encouragement_in_ordinary_words_small_talk(sentence):
    assert is_small_talk(sentence)
    assert 0.0 <= small_talk_probability(sentence) <= 1.0


@pytest.mark.parametrize("sentence", ["I adopted two cats from the shelter.", "I started a pottery class.",
                                      "I just finished the intro to my next movie script."])
def test_the_packaged_model_keeps_personal_facts(sentence):
    assert not is_small_talk(sentence)


def test_the_extractor_drops_a_classified_sentence_and_keeps_the_rest():
    text = "Jon: It must feel great to be recognized for your hard work. I started a pottery class."
    assert "recogn" not in " ".join(extract(text).words)
    assert any(w.startswith("recogn") for w in extract(text, classify=False).words)
    assert fact_sentences(text) == ["I started a pottery class."]
    assert extract(text).speaker == "jon" and "jon" in extract(text).names


def test_only_small_talk_makes_the_speaker_no_fact_and_the_entry_filler():
    text = "Gina: Have a great hike. It must feel great to be recognized for your hard work."
    assert is_filler(text) and "gina" not in extract(text).names
    assert not is_filler(text, classify=False) and "gina" in extract(text, classify=False).names


def test_a_sentence_with_a_number_name_or_date_is_never_left_to_the_classifier():
    for sentence in ("It must feel great to win 3 games.", "It must feel great to be recognized by Maria.",
                     "It must feel great to be recognized last week."):
        assert not is_filler(sentence)
    assert is_filler("Have a great hike.") and not is_filler("Have a great hike in May.")
    assert not is_filler("Any plans for the hike?")  # a question is never asked about
