"""The decisions taken before any judge: duplicates, containment, small talk."""

from __future__ import annotations

import pytest

from memrefine_edge.judging._fastpath import fast_path


def test_fast_path_exact_and_normalised_duplicates():
    assert fast_path("Tim lives in Paris.", "Tim lives in Paris.").target == "b"
    hit = fast_path("tim lives in paris", "Tim lives in Paris.")
    assert hit.action == "delete" and hit.target == "a"  # keep the better formatted copy


def test_fast_path_containment_deletes_the_contained_entry():
    assert fast_path("Jon: I shut my bank account.", "Jon: I shut my bank account. It was tough.").target == "a"
    assert fast_path("Joanna: I read a lot this week.", "I read a lot this week.").target == "b"


def test_fast_path_containment_needs_whole_words():
    assert fast_path("Tim ran", "Tim ran a marathon in Rome") is not None
    assert fast_path("Tim ran", "Tim ranked third in Rome") is None


def test_fast_path_filler_rules():
    both = fast_path("Nate: Bye!", "Joanna: Later, take care!")
    assert both.action == "delete" and both.target == "a"  # the shorter one
    one = fast_path("Melanie painted a lake sunrise in 2022.", "Caroline: Thanks, Mel!")
    assert one.target == "b"


def test_fast_path_leaves_real_decisions_to_the_judge():
    assert fast_path("John practices kickboxing.", "John practices taekwondo.") is None


def test_the_fast_path_deletes_classified_small_talk_only_when_asked_to_classify():
    # The judge's fast path reads the word lists only: the classifier calls some fact sentences small
    # talk ("Roof is finished!"), and a delete must not rest on its call. The scorer decides such pairs.
    talk = "Maria: It must feel great to be recognized for your hard work."
    fact = "John: I started a pottery class."
    assert fast_path(talk, fact) is None
    d = fast_path(talk, fact, classify=True)
    assert d is not None and d.action == "delete" and d.target == "a"
    assert fast_path("Roof is finished!", "Roof works started today.") is None


def test_containment_deletes_only_what_the_container_states_bound_as_it_is():
    # Contained word for word, but bound otherwise: the judge decides.
    assert fast_path("Flight 12 leaves from gate 7.", "Flight 12 leaves from gate 7.5 today.") is None
    assert fast_path("Ana likes dogs.", "Ben says Ana doesn't like dogs.") is None
    assert fast_path("I like dogs.", "I don't think I like dogs.") is None
    # Stated as it is: deleted as before.
    hit = fast_path("Flight 12 leaves from gate 7.", "Ben says Flight 12 leaves from gate 7 on Friday.")
    assert hit is not None and (hit.action, hit.target) == ("delete", "a")


def test_normalised_duplicates_stay_deletable_whatever_their_punctuation():
    hit = fast_path("Flight 12, gate 7.", "flight 12 gate 7")
    assert hit is not None and (hit.action, hit.target) == ("delete", "b")


@pytest.mark.parametrize("states", ["Hyun: Jae-won PASSED!", "Nikolai: She loved both.", "Joost: Everyone is fine.",
                                    "Mira: NOOR!", "Anneke: Happy Easter, Hyun!"])
def test_small_talk_that_states_something_is_not_deleted_as_small_talk(states):
    # No fact word for the word lists, but not how greetings, thanks and reactions open: the fast path
    # leaves the pair to the judge, or deletes the other side when that is the small talk.
    d = fast_path(states, "Hyun: Thanks so much! Haha.")
    assert d is None or (d.action, d.target) == ("delete", "b")
    assert fast_path("Hyun: Thanks so much! Haha.", "Anneke: That sounds amazing! Good luck!") is not None
