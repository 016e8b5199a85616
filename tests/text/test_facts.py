"""The fact extractor and the coverage checks behind the guard."""

from __future__ import annotations

import pytest

from memrefine_edge.text import (
    covers,
    describe,
    extract,
    fact_sentences,
    is_filler,
    missing_facts,
    normalise,
    strip_speaker,
)
from memrefine_edge.text._facts import fact_overlap, stem


def test_speaker_prefix_is_split_and_kept_as_a_name():
    speaker, body = strip_speaker("Caroline: I went to a support group.")
    assert speaker == "Caroline" and body == "I went to a support group."
    f = extract("Caroline: I went to a support group.")
    assert f.speaker == "caroline" and "caroline" in f.names


def test_sentence_initial_capitals_are_not_names_unless_they_look_like_one():
    f = extract("Painting helps me relax. Melanie painted a lake.")
    assert "painting" not in f.names and "paint" in f.words
    assert "melanie" in f.names



@pytest.mark.parametrize("text", ["Obstacles keep coming up at work.", "Big news: I got the job!",
                                  "Confidence is key when you perform."])
def test_a_plain_dictionary_word_starting_a_sentence_is_no_name(text):
    f = extract(text, classify=False)  # the name rule alone: the small-talk classifier may drop a sentence whole
    assert not f.names
    # Still an ordinary content word: a paraphrase must carry most of these.
    assert f.words


@pytest.mark.parametrize("text, name", [("Mark went to Paris.", "mark"), ("Grace loves dogs.", "grace"),
                                        ("John likes cats.", "john"), ("NBA games are fun.", "nba"),
                                        ("Caroline: Obstacles keep coming.", "caroline")])
def test_a_word_that_is_also_a_name_still_counts_as_one_at_a_sentence_start(text, name):
    assert name in extract(text, classify=False).names  # the name rule alone, without the small-talk classifier


def test_a_plain_word_at_a_sentence_start_no_longer_blocks_a_covering_delete():
    # "Obstacles" is no name, so the longer entry carries every strict fact of the shorter one.
    assert covers("Caroline: obstacles keep coming up at work, but I stay positive.",
                  "Caroline: Obstacles keep coming up at work.")


@pytest.mark.parametrize("word, plain", [("obstacles", True), ("confidence", True), ("big", True),
                                         ("john", False), ("mark", False), ("grace", False),
                                         ("caroline", False), ("paris", False), ("iphone", False),
                                         ("zzqx", False), ("", False)])
def test_plain_words_are_dictionary_words_never_written_capitalised(word, plain):
    from memrefine_edge.text._facts import is_plain_word

    assert is_plain_word(word) is plain


def test_numbers_dates_and_number_words():
    f = extract("John scored 40 points last week, his first 5K was in Sept 2022; he has two dogs.")
    assert {"40", "5k", "2022", "2"} <= f.numbers
    assert "#1" in f.numbers
    assert {"last week", "september"} <= f.dates


def test_may_the_verb_is_not_a_month():
    assert "may" not in extract("I may go there").dates
    assert "may" in extract("We met on 8 May").dates


def test_stemming_lite_maps_inflections_together():
    assert stem("painted") == stem("painting") == stem("paints") == stem("paint")
    assert stem("stories") == stem("story")
    assert stem("running") == stem("run")


def test_vocatives_are_not_facts_but_subjects_are():
    assert "maria" not in extract("John: Thanks, Maria! I run every day.").names
    assert "gina" not in extract("Jon: Hey Gina, I closed my bank account.").names
    assert "gina" in extract("Jon met Gina at the store.").names


@pytest.mark.parametrize("text", [
    "Thanks!", "Hey Mel! Good to see you! How have you been?", "Nate: Bye Joanna! Take care!",
    "Gina: Thanks, Jon! Appreciate the kind words. <3", "Maria: Hey John! Long time no see! What's up?",
])
def test_filler(text):
    assert is_filler(text)


@pytest.mark.parametrize("text", [
    "Thanks! I ran a 5K yesterday.", "Caroline: I went to a LGBTQ support group.", "No, I never eat meat.",
    "Thanks, see you on Friday!",
])
def test_not_filler(text):
    assert not is_filler(text)


def test_normalise_ignores_case_punctuation_and_whitespace():
    assert normalise("  Hey, Gina!  I'm OK. ") == normalise("hey gina i m ok")


def test_missing_facts_and_covers():
    a = "Caroline attended an LGBTQ support group yesterday."
    b = "Caroline: I went to a LGBTQ support group."
    assert "yesterday" in missing_facts(a, b)
    assert not covers(b, a)
    assert covers(a, "Caroline attended an LGBTQ support group.")


def test_negation_is_a_strict_fact():
    assert "<not>" in missing_facts("Tim doesn't like dogs.", "Tim likes dogs.")
    assert describe(["<not>"]) == "negation"


def test_describe_shows_surface_words():
    assert describe(["literatur"], "a fantasy literature forum") == "literature"


def test_fact_overlap_bounds():
    assert fact_overlap("John runs.", "John runs.") == 1.0
    assert fact_overlap("John practices kickboxing.", "Maria does aerial yoga.") < 0.2


def test_fact_sentences_drop_filler():
    assert fact_sentences("Melanie: Thanks, Caroline! Family time matters to me.") == ["Family time matters to me."]


def test_the_speaker_of_pure_small_talk_is_no_fact():
    greeting = "Melanie: Hey Caroline! Good to talk to you again. What's up? Anything new since last time?"
    assert is_filler(greeting) and "melanie" not in extract(greeting).names
    assert not missing_facts(greeting, "Caroline: Hey Melanie, great to hear from you.")
    assert "melanie" in extract("Melanie: I painted a lake last week.").names  # a fact: who said it counts


def test_speaker_labels_inside_a_merged_entry_are_names():
    merged = ("Caroline: Mental health's a priority, so take care of yourself. "
              "Melanie: Mental health is important to me, and it's made such an improvement!")
    assert {"caroline", "melanie"} <= extract(merged).names
    a = "Melanie: Caroline, thanks! Mental health is important to me, and it's made such an improvement!"
    assert not missing_facts(a, merged)


def test_sentence_words_agree_with_the_entry_level_extractor():
    from memrefine_edge.text import extract, is_filler
    from memrefine_edge.text._facts import sentence_words

    for sentence in ["Thanks, Maria!", "Ana: I adopted a cat named Tom last week.", "", "   ",
                     "We didn't go to Paris in May.", "Hey Gina, how are you doing?", "I ran 5K on Sunday."]:
        assert sentence_words(sentence) == (is_filler(sentence), extract(sentence).words if sentence.strip()
                                            else frozenset())


@pytest.mark.parametrize("text", [
    "Caroline: I went to the LGBTQ support group yesterday.",
    "Caroline: Thanks, Melanie!",
    "Caroline: Melanie: see you at 5.",
    "I adopted a dog named Max in June 2022.\n\n",
    "Hey Mel! Long time no see. I painted a lake sunrise last week?",
    "Melanie: Wow, great! Caroline: I ran a charity race on Sunday. It was not easy.",
    "   ",
    "Jon: Bye!",
])
def test_sentence_scans_agree_with_each_sentence_scanned_alone(text):
    from memrefine_edge.text import fact_sentences, sentence_scans, strip_speaker
    from memrefine_edge.text._facts import _SENTENCE, sentence_words

    _, body = strip_speaker(text)
    sentences = [s.strip() for s in _SENTENCE.split(body) if s.strip()]
    assert sentence_scans(text) == [(s, *sentence_words(s)) for s in sentences]
    assert fact_sentences(text) == [s for s in sentences if not sentence_words(s)[0]]


def test_stated_words_leave_out_small_talk_and_questions():
    from memrefine_edge.text import sentence_scans, stated_words
    from memrefine_edge.text._facts import sentence_words

    text = "Melanie: Hey! I painted a lake sunrise. Did you go kayaking? We adopted a puppy named Max."
    assert stated_words(sentence_scans(text)) == (sentence_words("I painted a lake sunrise.")[1]
                                                   | sentence_words("We adopted a puppy named Max.")[1])
    question = sentence_words("Did you go kayaking?")[1]
    assert question and not question & stated_words(sentence_scans(text)) and stated_words([]) == frozenset()


# --- names in greetings and addresses, speakers of small talk, stated views ---------------------------

@pytest.mark.parametrize("text", [
    "Hey, it's Deb again.",
    "Hi, Omar again.",
    "Happy new year, Tomás!",
    "Nadia: Merry Christmas!",
    "Good morning, Nadia!",
    "Sam: Congrats, Jules!",
    "Jules: Congratulations, Sam!!",
    "Hi Ana, Ben",
])
def test_greetings_with_a_name_hold_no_fact(text):
    assert is_filler(text), extract(text)


def test_a_holiday_outside_a_greeting_is_still_a_date():
    assert "christmas" in extract("We'll visit Mum at Christmas.").dates
    assert "morning" in extract("I run every morning.").dates


def test_a_name_after_a_place_is_its_apposition_not_an_address():
    f = extract("Owns a bakery called Masa Madre in Austin, Texas")
    assert {"austin", "texas"} <= f.names
    f = extract("Katerina lives in Chania, Crete, with her husband Nikos.")
    assert "crete" in f.names
    # An address stays an address.
    assert "maria" not in extract("I agree, Maria.").names


def test_names_in_any_alphabet_are_whole_names():
    assert "inés" in extract("Inés runs the farmers market stall on Sundays.").names
    assert "neukölln" in extract("Shares a flat in Neukölln with Oskar.").names


def test_a_contraction_at_a_sentence_start_is_no_name():
    assert "howre" not in extract("How're you handling the changes?").names
    assert not extract("Where'd you get the idea?").names


def test_a_title_does_not_end_the_sentence():
    assert fact_sentences("Her GP in Chania is Dr. Markaki.") == ["Her GP in Chania is Dr. Markaki."]


def test_the_speaker_of_small_talk_and_questions_is_no_fact_to_the_hard_checks():
    f = extract("Caroline: Thanks, Melanie! Appreciate it. You play any instruments?")
    assert "caroline" not in f.names and not f.negated
    # ... while the scorer's features (the word lists' view) read it as before.
    assert "caroline" in extract("Caroline: Thanks, Melanie! Appreciate it. You play any instruments?",
                                 classify=False).names
    # A statement keeps its speaker; a question keeps the names it asks about.
    assert "caroline" in extract("Caroline: I play the violin.").names
    assert "jupiter" in extract("Sam: Congrats, Jules! Did Jupiter hold together?").names
    # A tag question negates nothing.
    assert not extract("Melanie: Music's amazing, isn't it?").negated
    assert extract("Melanie: I don't play music.").negated


@pytest.mark.parametrize("sentence", [
    "Live music is the best.",
    "Planners or schedulers help you stay on top of things.",
    "That's when my love for car engineering began!",
    "And so sad she's leaving.",
    "Loves sushi",
    "Can't stand olives",
    "Doesn't like swimming pools",
])
def test_a_stated_preference_or_view_is_a_fact_not_small_talk(sentence):
    assert not is_filler(sentence)
    assert fact_sentences(f"Sam: Thanks! {sentence}") == [sentence]


@pytest.mark.parametrize("sentence", [
    "Have a great hike.",
    "It must feel great to be recognized for your hard work.",
    "I love your painting!",
    "Thanks, Deb!",
])
def test_reactions_to_the_other_persons_news_stay_small_talk(sentence):
    assert is_filler(sentence)
