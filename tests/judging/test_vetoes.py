"""What the hard fact checks refuse, and what they no longer refuse: deletes of small talk whose only
"facts" were names in greetings, its speaker or a tag question, and facts the other entry states more
precisely; against deletes of a value replaced by another in the same statement."""

from __future__ import annotations

import pytest

from memrefine_edge.judging import concat_merge, default_judge
from memrefine_edge.judging._fastpath import fast_path
from memrefine_edge.text import lost_facts


@pytest.mark.parametrize("a, b", [
    ("Hey, it's Deb again.", "Thanks, Deb!"),
    ("Sam: Congrats, Jules!", "Jules: Congratulations, Sam!!"),
    ("Nadia: Merry Christmas!", "Assistant: It's been a pleasure, Nadia. Merry Christmas!"),
    ("Tomás: Happy new year, Tomás!", "Hello!"),
])
def test_pairs_of_greetings_with_names_are_deleted_without_a_judge(a, b):
    d = fast_path(a, b)
    assert d is not None and d.action == "delete", d


@pytest.mark.parametrize("gone, kept", [
    # The speaker of thanks and a question is no fact; the other speaker's statement may stay alone.
    ("Caroline: Thanks, Melanie! Appreciate it. You play any instruments?",
     "Melanie: I'm a fan of both classical like Bach and Mozart, as well as modern music."),
    ("Melanie: Sounds great! What kind of books you got in your library?",
     "Caroline: I've got lots of kids' books- classics, stories from different cultures, educational books."),
    # A tag question negates nothing.
    ("Melanie: Music's amazing, isn't it? Any songs that have deep meaning for you?",
     "Melanie: That's a gorgeous song, Caroline. Music can be so inspiring and uplifting."),
    # A date the other entry writes more precisely.
    ("Must submit the thesis by end of March 2025", "Thesis submission deadline is 31 March 2025"),
    ("Layla arrived April 17, 3 days before her due date.",
     "Layla was born on 17 April 2024 at 6:12 am, three days early."),
])
def test_the_checks_let_a_delete_go_that_loses_no_fact(gone, kept):
    assert lost_facts(gone, kept, min_word_cover=0.0) == []


@pytest.mark.parametrize("gone, kept, word", [
    ("Prefers oat milk", "Prefers soy milk", "oat"),
    ("Odile: Pickle is scared of the hoover.", "Odile: Pretzel is scared of the hoover.", "pickle"),
    ("Iris runs the farmers market stall on Sundays.", "Inés runs the farmers market stall on Sundays.", "iris"),
    ("Sam: Did Jupiter hold together?", "Jules: LANTERNFALL IS OUT!", "jupiter"),
    ("Owns a bakery called Masa Madre in Austin, Texas", "Masa Madre is the best bakery in East Austin", "texas"),
    ("Ana flew out on 4 May.", "Ana flew out on 9 May 2023.", "4"),
])
def test_the_checks_refuse_a_delete_that_loses_a_value(gone, kept, word):
    assert word in " ".join(lost_facts(gone, kept, min_word_cover=0.0)).lower()


@pytest.mark.parametrize("a, b", [
    ("Odile: Pickle is scared of the hoover.", "Odile: Pretzel is scared of the hoover."),
    ("Iris runs the farmers market stall on Sundays.", "Inés runs the farmers market stall on Sundays."),
    ("Owns a bakery called Masa Madre in Austin, Texas", "Austin Chronicle named Masa Madre best bakery in East Austin"),
])
def test_the_default_judge_deletes_neither_side_of_a_replaced_value(a, b):
    judge = default_judge()
    for x, y in ((a, b), (b, a)):
        for similarity in (0.75, 0.85, 0.95):
            assert judge.decide(x, y, similarity).action != "delete", (x, y, similarity)


def test_a_merge_keeps_a_stated_preference():
    merged = concat_merge("Sam: Thanks! Live music is the best.", "Sam: We saw the Lumineers at the Fillmore.").content
    assert "Live music is the best." in merged and "Thanks!" not in merged


@pytest.mark.parametrize("a, b", [
    ("Ottilie's scholarship pays €12,000 a year.", "Ottilie's scholarship pays £12,000 a year."),
    ("The discount is 45% this week.", "The discount is 45 this week."),
    ("Set the oven to 180 °C.", "Set the oven to 180 C."),
])
def test_a_currency_or_unit_sign_is_no_punctuation_to_the_duplicate_test(a, b):
    assert fast_path(a, b) is None
    assert default_judge().decide(a, b, 0.97).action != "delete"


def test_the_agent_of_a_passive_keeps_its_role():
    a = "Reminder: Joelle hired Kayla for the Ashford wedding."
    b = "Reminder: Joelle was hired by Kayla for the Ashford wedding."
    assert "Kayla" in lost_facts(a, b, min_word_cover=0.0) and "Kayla" in lost_facts(b, a, min_word_cover=0.0)
    judge = default_judge()
    for x, y in ((a, b), (b, a)):
        assert judge.decide(x, y, 0.97).action != "delete"
