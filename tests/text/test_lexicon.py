"""The packaged common-word list: one reader, ranks in the file's order."""

from __future__ import annotations

from memrefine_edge.text._lastcopy import common_words
from memrefine_edge.text._lexicon import common_word_ranks


def test_ranks_follow_the_file_order_and_skip_its_comment():
    ranks = common_word_ranks()
    assert ranks["the"] == 0 and ranks["of"] == 1 and ranks["and"] == 2
    assert not any(w.startswith("#") for w in ranks)
    assert sorted(ranks.values()) == list(range(len(ranks)))
    assert all(w == w.lower() for w in ranks)


def test_the_last_copy_check_reads_the_same_words():
    assert common_words() == frozenset(common_word_ranks())
