"""Which of the word lists' small talk may be dropped: what opens as greetings, thanks and reactions do."""

from __future__ import annotations

import pytest

from memrefine_edge.text import is_filler, only_small_talk, opens_as_small_talk


@pytest.mark.parametrize("sentence", ["Thanks so much!", "Melanie: Haha.", "That sounds amazing!", "Good luck!",
                                      "Wow, congrats!", "See you soon!", "Take care!", "\U0001F600", "!!!",
                                      "That\u2019s great!"])
def test_greetings_thanks_and_reactions_open_as_small_talk(sentence):
    assert opens_as_small_talk(sentence)


@pytest.mark.parametrize("sentence", ["She loved both.", "Everyone is fine.", "Jae-won PASSED!", "NOOR!",
                                      "Happy Easter, Hyun!", "Just me.", "Everything goes up."])
def test_small_talk_to_the_word_lists_that_states_something_does_not(sentence):
    assert is_filler(sentence, classify=False)  # the word lists find no fact word in it ...
    assert not opens_as_small_talk(sentence) and not only_small_talk(sentence)  # ... but it is kept


def test_an_entry_is_only_small_talk_when_every_sentence_is():
    assert only_small_talk("Joanna: Thanks, Nate! That sounds fun.")
    assert not only_small_talk("Joanna: Thanks, Nate! She loved both.")
    assert not only_small_talk("Joanna: Thanks! I moved to Lisbon in May.")  # a fact: not small talk at all
