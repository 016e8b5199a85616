"""The redundancy scorer: ordered features, packaged weights, and the scorer judge's hard fact checks."""

from __future__ import annotations

import json

import numpy as np
import pytest

from memrefine_edge.judge import GuardedJudge, ScorerJudge
from memrefine_edge.scorer import (
    CLASSES,
    FEATURES,
    SENTENCE_MATCH,
    RedundancyScorer,
    SentenceVectors,
    pair_features,
    sentences,
    swap_index,
)
from memrefine_edge.testing import HashEncoder

ENC = HashEncoder()  # deterministic and offline; the product hands the scorer its pipeline's encoder
SV = SentenceVectors(ENC)

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


def _judge(weights: dict, **kw) -> ScorerJudge:
    return ScorerJudge(encoder=ENC, scorer=RedundancyScorer(weights=weights), **kw)


@pytest.mark.parametrize("a,b,sim", PAIRS)
def test_swapping_the_pair_permutes_the_features(a, b, sim):
    perm, sign = swap_index()
    np.testing.assert_allclose(pair_features(b, a, sim, SV), pair_features(a, b, sim, SV)[perm] * sign)


def test_features_name_what_they_measure():
    f = dict(zip(FEATURES, pair_features(*PAIRS[2], SV)))
    assert f["filler_share_a"] == 1.0 and f["filler_share_b"] == 0.0
    assert f["num_date_extra_b"] == 1.0 and f["num_date_extra_a"] == 0.0
    assert f["photo_b"] == 1.0 and f["same_speaker"] == 1.0
    g = dict(zip(FEATURES, pair_features(*PAIRS[3], SV)))
    assert g["other_speaker"] == 1.0 and g["question_share_b"] == 1.0 and g["stated_words_b"] == 0.0


def test_packaged_weights_give_symmetric_calibrated_probabilities():
    scorer = RedundancyScorer()
    assert scorer.meta["trained_on"].startswith("bench/judge_labels tune split")
    for a, b, sim in PAIRS:
        ab, ba = scorer.score(a, b, sim, SV), scorer.score(b, a, sim, SV)
        assert sum(ab.as_dict().values()) == pytest.approx(1.0)
        # Trained on both orientations: delete_a of (a, b) is close to delete_b of (b, a).
        assert ab.delete_a == pytest.approx(ba.delete_b, abs=0.05)
        assert ab.merge == pytest.approx(ba.merge, abs=0.05)


def test_bad_weights_are_a_configuration_error(tmp_path):
    from memrefine_edge.errors import ConfigurationError

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
    judge = ScorerJudge(encoder=ENC, scorer=RedundancyScorer(weights=_weights("delete_b")))
    # B holds a number and a name A lacks: the delete of B is refused, the next class decides.
    d = judge.judge("Jolene does yoga.", "Jolene does yoga with Deborah twice a week.", 0.8)
    assert d.action != "delete" or d.target == "a"
    assert d.source == "scorer" and "delete_b" in d.reason
    # Nothing strict to lose: the scorer's delete is taken even though the wording differs.
    d = judge.judge("Sam appreciates the encouragement.", "Sam expressed appreciation for the support.", 0.8)
    assert (d.action, d.target) == ("delete", "b")


def test_scorer_judge_needs_a_confident_delete():
    w = _weights("delete_a", strength=0.5)  # delete_a about 0.35: wins, but is below 0.5
    a, b = "Sam appreciates the encouragement.", "Sam expressed appreciation for the support."
    assert _judge(w).judge(a, b, 0.8).action == "delete"
    assert _judge(w, min_delete_probability=0.5).judge(a, b, 0.8).action != "delete"
    with pytest.raises(ValueError):
        ScorerJudge(min_delete_probability=1.5)


def test_scorer_judge_merges_with_an_instruction_and_records_settings():
    judge = ScorerJudge(encoder=ENC, scorer=RedundancyScorer(weights=_weights("merge")))
    d = judge.judge("Evan suggested kayaking to de-stress.", "Sam is considering kayaking next month.", 0.7)
    assert d.action == "merge" and d.merge_instruction
    assert ScorerJudge().describe()["type"] == "ScorerJudge"
    assert 0.0 <= ScorerJudge().min_delete_probability <= 1.0


def test_the_guard_behind_the_scorer_only_checks_strict_facts():
    # min_word_cover=0.0: a paraphrase delete passes the guard, a strict-fact loss would not.
    guarded = GuardedJudge(ScorerJudge(encoder=ENC, scorer=RedundancyScorer(weights=_weights("delete_a"))),
                           min_word_cover=0.0, check_merges=False)
    d = guarded.judge("Sam appreciates the encouragement.", "Sam expressed appreciation for the support.", 0.8)
    assert (d.action, d.target, d.source) == ("delete", "a", "scorer")


def test_a_merge_floor_turns_low_similarity_merges_into_preserves():
    judge = ScorerJudge(encoder=ENC, scorer=RedundancyScorer(weights=_weights("merge")), merge_min_similarity=0.6)
    a, b = "Evan suggested kayaking to de-stress.", "Sam is considering kayaking next month."
    assert judge.judge(a, b, 0.7).action == "merge"
    assert judge.judge(a, b, 0.5).action == "preserve"


def test_default_judge_is_the_scorer_and_names_pick_the_others():
    from memrefine_edge.judge import default_judge

    assert default_judge().describe()["inner"]["type"] == "ScorerJudge"
    assert default_judge("none").describe()["inner"]["type"] == "ScorerJudge"
    assert default_judge("fact").describe()["inner"]["type"] == "FactJudge"
    assert default_judge("bundled").describe()["inner"]["type"] == "LlamaJudge"  # lazy: nothing loads here


def test_an_unsure_merge_falls_to_the_next_action():
    w = _weights("merge", strength=0.5)  # merge about 0.35: most probable, below 0.4
    a, b = "Evan suggested kayaking to de-stress.", "Sam is considering kayaking next month."
    assert _judge(w).judge(a, b, 0.7).action == "merge"
    assert _judge(w, min_merge_probability=0.4).judge(a, b, 0.7).action != "merge"
    packaged = ScorerJudge()
    assert packaged.min_merge_probability == packaged.scorer.meta["min_merge_probability"]


class CountingEncoder(HashEncoder):
    """HashEncoder that records every text it embeds."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def embed_batch(self, texts):
        self.seen += list(texts)
        return super().embed_batch(texts)


def test_sentences_are_the_fact_extractors_without_the_speaker():
    assert sentences("Sam: I went hiking. Thanks so much!\nBye") == ["I went hiking.", "Thanks so much!", "Bye"]
    assert sentences("") == [] and sentences("  ") == []


def test_sentence_alignment_features_say_which_sentences_the_other_side_holds():
    a = "Sam: Thanks so much! I went hiking with Evan. I adopted a puppy."
    b = "Sam: I went hiking with Evan."
    f = dict(zip(FEATURES, pair_features(a, b, 0.7, SentenceVectors(HashEncoder())), strict=True))
    # b's one sentence is said word for word in a; a's puppy (and its small talk) is not in b.
    assert f["sent_min_b"] == pytest.approx(1.0) and f["sent_unmatched_b"] == 0.0
    assert f["sent_min_a"] < SENTENCE_MATCH and f["sent_unmatched_a"] == 2.0
    # Small talk left out: the fact sentences of a are 'hiking' (matched) and 'puppy' (not).
    assert f["fact_sent_min_a"] < SENTENCE_MATCH
    assert f["fact_sent_mean_a"] == pytest.approx((1.0 + f["fact_sent_min_a"]) / 2)
    assert f["sent_mean_a"] < f["fact_sent_mean_a"]  # 'Thanks so much!' shares no word with b
    assert f["fact_sent_min_b"] == pytest.approx(1.0)
    # A side without sentences has nothing unmatched.
    g = dict(zip(FEATURES, pair_features("", b, 0.1, SentenceVectors(HashEncoder())), strict=True))
    assert (g["sent_min_a"], g["sent_unmatched_a"], g["sent_min_b"], g["sent_unmatched_b"]) == (1.0, 0.0, 1.0, 0.0)


def test_sentence_vectors_embed_each_text_once_and_keep_the_most_recent():
    enc = CountingEncoder()
    sv = SentenceVectors(enc, max_texts=2)
    a, b, c = "Sam: I went hiking. I adopted a puppy.", "Evan: I went hiking.", "Ana swam in Rome."
    (va, fa), (vb, _) = sv.get(a, b)
    assert va.shape == (2, ENC.dim) and vb.shape == (1, ENC.dim) and not fa.any()
    np.testing.assert_allclose(np.linalg.norm(va, axis=1), 1.0, rtol=1e-5)
    assert sorted(enc.seen) == sorted(["I went hiking.", "I adopted a puppy.", "I went hiking."])
    sv.get(b, a)
    assert len(enc.seen) == 3  # both cached
    sv.get(c)  # evicts the least recently used (b)
    assert len(sv) == 2
    sv.get(a)
    assert len(enc.seen) == 4
    sv.get(b)
    assert enc.seen[-1] == "I went hiking." and len(enc.seen) == 5
    with pytest.raises(ValueError):
        SentenceVectors(enc, max_texts=0)


def test_the_scorer_judge_embeds_with_the_encoder_it_is_given_and_caches_per_text():
    enc = CountingEncoder()
    judge = ScorerJudge(encoder=enc)
    a, b = "Sam: I appreciate your encouragement. It means a lot.", "Sam: Thanks for the support, Evan."
    judge.judge(a, b, 0.6)
    judge.judge(b, a, 0.6)
    assert len(enc.seen) == len(sentences(a)) + len(sentences(b))
    judge.use_encoder(HashEncoder())  # one given at construction stays
    assert judge.encoder is enc and judge.describe()["encoder"] == "hash-bow"
    handed = ScorerJudge()
    assert handed.describe()["encoder"] == "default"  # nothing loaded to describe it
    handed.use_encoder(enc)
    assert handed.encoder is enc


def test_weights_for_the_features_before_sentence_alignment_are_refused():
    from memrefine_edge.errors import ConfigurationError

    w = _weights("preserve")
    old = [n for n in FEATURES if not n.startswith(("sent_", "fact_sent_"))]
    w.update(features=old, mean=[0.0] * len(old), scale=[1.0] * len(old), coef=[[0.0] * len(old) for _ in CLASSES])
    with pytest.raises(ConfigurationError, match="other features"):
        RedundancyScorer(weights=w)
