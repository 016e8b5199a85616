"""The redundancy scorer: ordered features, packaged weights, and the scorer judge's hard fact checks."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from memrefine_edge.judging import GuardedJudge, RedundancyScorer, ScorerJudge
from memrefine_edge.judging._scorer import CLASSES, FEATURES, pair_features, swap_index

PAIRS = [
    ("Caroline: I went to the LGBTQ support group yesterday.", "Caroline: The support group was really moving.", 0.71),
    ("Jolene does yoga.", "Jolene does yoga and meditation to stay grounded.", 0.83),
    ("Melanie: Thanks so much! Take care!", "Melanie: I painted a lake sunrise in 2022. [shares a photo: a lake]", 0.42),
    ("Sam: I never liked hiking.", "Evan: I love hiking in the mountains with my 2 kids?", 0.55),
]


def _weights(prefer: str, strength: float = 5.0) -> dict:
    """Weights under which one class always wins, whatever the features."""
    intercept = [0.0] * len(CLASSES)
    intercept[CLASSES.index(prefer)] = strength
    return {"features": list(FEATURES), "classes": list(CLASSES), "mean": [0.0] * len(FEATURES),
            "scale": [1.0] * len(FEATURES), "coef": [[0.0] * len(FEATURES) for _ in CLASSES],
            "intercept": intercept}


@pytest.mark.parametrize("a,b,sim", PAIRS)
def test_swapping_the_pair_permutes_the_features(a, b, sim):
    perm, sign = swap_index()
    np.testing.assert_allclose(pair_features(b, a, sim), pair_features(a, b, sim)[perm] * sign)


def test_features_name_what_they_measure():
    f = dict(zip(FEATURES, pair_features(*PAIRS[2])))
    assert f["filler_share_a"] == 1.0 and f["filler_share_b"] == 0.0
    assert f["num_date_extra_b"] == 1.0 and f["num_date_extra_a"] == 0.0
    assert f["photo_b"] == 1.0 and f["same_speaker"] == 1.0
    g = dict(zip(FEATURES, pair_features(*PAIRS[3])))
    assert g["other_speaker"] == 1.0 and g["question_share_b"] == 1.0 and g["stated_words_b"] == 0.0


def test_sentence_shares_count_the_sentences_the_extractor_reads():
    # Lines without closing punctuation are sentences to the extractor; the shares count the same ones.
    lines = "Ana: Thanks so much\nI adopted a cat named Tom\nDo you have pets?"
    f = dict(zip(FEATURES, pair_features(lines, "Ana: I adopted a cat.", 0.6)))
    assert f["sentences_a"] == pytest.approx(math.log(3))
    assert 0.0 <= f["filler_share_a"] <= 1.0 and f["filler_share_a"] == pytest.approx(1 / 3)
    assert f["question_share_a"] == pytest.approx(1 / 3)


def test_packaged_weights_give_symmetric_calibrated_probabilities():
    scorer = RedundancyScorer()
    # Fitted on the first set's tune conversations and the whole second set: neither the held-out LoCoMo
    # conversations nor the third set (bench/judge_labels_v3) is named.
    trained_on = scorer.meta["trained_on"]
    assert trained_on.startswith("the first set's tune part, the second set's tune and test parts: ")
    assert not any(name in trained_on for name in ("conv-43", "conv-44", "conv-47", "judge_labels_v3",
                                                   "facts_yusuf", "notes_kwame", "turns_olga_ben",
                                                   "summaries_ravi", "observations_pia_dario", "swaps:agent"))
    assert "facts_priya" in trained_on and "conv-26" in trained_on
    for a, b, sim in PAIRS:
        ab, ba = scorer.score(a, b, sim), scorer.score(b, a, sim)
        assert sum(ab.as_dict().values()) == pytest.approx(1.0)
        # Trained on both orientations: delete_a of (a, b) is close to delete_b of (b, a).
        assert ab.delete_a == pytest.approx(ba.delete_b, abs=0.05)
        assert ab.merge == pytest.approx(ba.merge, abs=0.05)


def test_bad_weights_are_a_configuration_error(tmp_path):
    from memrefine_edge.core import ConfigurationError

    w = _weights("preserve")
    w["features"] = w["features"][:-1]
    path = tmp_path / "w.json"
    path.write_text(json.dumps(w))
    with pytest.raises(ConfigurationError, match="other features"):
        RedundancyScorer(path=path)
    w = _weights("preserve")
    w["coef"] = w["coef"][:2]
    with pytest.raises(ConfigurationError, match="shapes"):
        RedundancyScorer(weights=w)
    w = _weights("preserve")
    del w["mean"]
    with pytest.raises(ConfigurationError, match="incomplete"):
        RedundancyScorer(weights=w)
    with pytest.raises(ConfigurationError, match="cannot read"):
        RedundancyScorer(path=tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ConfigurationError, match="cannot read"):
        ScorerJudge(weights_path=tmp_path / "bad.json").load()  # load() fails before a run starts


def test_scorer_judge_never_deletes_a_strict_fact():
    judge = ScorerJudge(scorer=RedundancyScorer(weights=_weights("delete_b")))
    # B holds a number and a name A lacks: the delete of B is refused, the next class decides.
    d = judge.decide("Jolene does yoga.", "Jolene does yoga with Deborah twice a week.", 0.8)
    assert d.action != "delete" or d.target == "a"
    assert d.source == "scorer" and "delete_b" in d.reason
    # Nothing strict to lose: with no word floor the scorer's delete is taken even though the wording differs.
    judge = ScorerJudge(scorer=RedundancyScorer(weights=_weights("delete_b")), min_delete_word_cover=0.0)
    d = judge.decide("Sam appreciates the encouragement.", "Sam expressed appreciation for the support.", 0.8)
    assert (d.action, d.target) == ("delete", "b")


def test_scorer_judge_needs_a_confident_delete():
    w = _weights("delete_a", strength=0.5)  # delete_a about 0.35: wins, but is below 0.5
    a, b = "Sam appreciates the encouragement.", "Sam expressed appreciation for the support."
    assert ScorerJudge(scorer=RedundancyScorer(weights=w)).decide(a, b, 0.8).action == "delete"
    assert ScorerJudge(scorer=RedundancyScorer(weights=w), min_delete_probability=0.5).decide(a, b, 0.8).action != "delete"
    with pytest.raises(ValueError):
        ScorerJudge(min_delete_probability=1.5)


def test_scorer_judge_merges_with_an_instruction_and_records_settings():
    judge = ScorerJudge(scorer=RedundancyScorer(weights=_weights("merge")))
    d = judge.decide("Evan suggested kayaking to de-stress.", "Sam is considering kayaking next month.", 0.7)
    assert d.action == "merge" and d.merge_instruction
    assert ScorerJudge().describe()["type"] == "ScorerJudge"
    assert 0.0 <= ScorerJudge().min_delete_probability <= 1.0


def test_the_guard_behind_the_scorer_only_checks_strict_facts():
    # min_word_cover=0.0: a paraphrase delete passes the guard, a strict-fact loss would not.
    guarded = GuardedJudge(ScorerJudge(scorer=RedundancyScorer(weights=_weights("delete_a"))),
                           min_word_cover=0.0, check_merges=False)
    d = guarded.decide("Sam appreciates the encouragement.", "Sam expressed appreciation for the support.", 0.8)
    assert (d.action, d.target, d.source) == ("delete", "a", "scorer")


def test_a_merge_floor_turns_low_similarity_merges_into_preserves():
    judge = ScorerJudge(scorer=RedundancyScorer(weights=_weights("merge")), merge_min_similarity=0.6)
    a, b = "Evan suggested kayaking to de-stress.", "Sam is considering kayaking next month."
    assert judge.decide(a, b, 0.7).action == "merge"
    assert judge.decide(a, b, 0.5).action == "preserve"


def test_default_judge_is_the_scorer_and_names_pick_the_others():
    from memrefine_edge.judging import default_judge

    assert default_judge().describe()["inner"]["type"] == "ScorerJudge"
    assert default_judge("scorer").describe()["inner"]["type"] == "ScorerJudge"
    assert default_judge("fact").describe()["inner"]["type"] == "FactJudge"
    assert default_judge("gguf").describe()["inner"]["type"] == "LlamaJudge"  # lazy: nothing loads here


def test_an_unsure_merge_falls_to_the_next_action():
    w = _weights("merge", strength=0.5)  # merge about 0.35: most probable, below 0.4
    a, b = "Evan suggested kayaking to de-stress.", "Sam is considering kayaking next month."
    assert ScorerJudge(scorer=RedundancyScorer(weights=w)).decide(a, b, 0.7).action == "merge"
    assert ScorerJudge(scorer=RedundancyScorer(weights=w), min_merge_probability=0.4).decide(a, b, 0.7).action != "merge"
    packaged = ScorerJudge()
    assert packaged.min_merge_probability == packaged.scorer.meta["min_merge_probability"]


def test_a_delete_needs_the_kept_entry_to_carry_what_the_other_states():
    judge = ScorerJudge(scorer=RedundancyScorer(weights=_weights("delete_a")))
    # A states something (the phone asks to update) the other turn does not: not deleted, whatever
    # the scorer's confidence; nothing strict is lost, so the strict checks alone would let it go.
    a = "Olga: The phone keeps asking me to update. Should I?"
    b = "Olga: Also, my daughter moved our calls to Saturdays at 18:00."
    assert judge.decide(a, b, 0.6).action != "delete"
    assert ScorerJudge(scorer=RedundancyScorer(weights=_weights("delete_a")),
                       min_delete_word_cover=0.0).decide(a, b, 0.6).action == "delete"
    # Questions and small talk state nothing of their own: such a turn may still go.
    d = judge.decide("Tim: Looks great! Where did you go camping?",
                     "Tim: That's awesome about the deal! What kind of gear did you get?", 0.6)
    assert (d.action, d.target) == ("delete", "a")
    # Half of what it states is enough (the scorer judges the wording).
    d = judge.decide("Ana finally fixed her blender.", "Ana fixed the old blender last night.", 0.8)
    assert (d.action, d.target) == ("delete", "a")
    assert judge.describe()["min_delete_word_cover"] == judge.min_delete_word_cover == 0.5
    with pytest.raises(ValueError, match="min_delete_word_cover"):
        ScorerJudge(min_delete_word_cover=1.2)
