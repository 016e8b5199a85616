"""The last-copy check: a delete may not take the store's last copy of a specific word.

The judge decides on a pair; the labelling rules call a delete fact-losing when the
deleted entry holds a fact the store holds *nowhere else*. The pair judge cannot see
"nowhere else", and its fact checks cover names, numbers, dates and negation only,
so a paraphrase delete could take the one entry that says "pottery" or "kayaking".
:class:`LastCopies` counts, over the live entries, in how many entries each content
key appears (the fact extractor's names, numbers, dates and words), and answers
which *specific* keys a delete would take out of the store for good.

A key is specific when it is a name, number or date, or a word of a sentence that
states something (not a question, not small talk) whose surface forms are all
outside the package's list of common English words (``data/common_words.txt``:
the first 10,000 frequency ranks of the encoder's vocabulary, written by
``scripts/make_common_words.py``). Common words ("whenever", "encounter",
"question") are not facts an answer needs; rare ones mostly are. The check needs
no model and no gold answers.

A refused delete becomes a merge that keeps both texts (``source="guard"``,
the keys named in the reason). With ``defer_last_copies`` it is deferred
instead: the pair is preserved (``source="deferred"``) and never proposed
again; when a run runs out of candidate pairs still above its budget, the
compressor's deferred phase asks
:meth:`~memrefine_edge.methods.MemRefineMethod.deferred` about those pairs in
the order they were deferred, and takes each delete the judge still makes
(``source="guard"``) until the budget holds; only then does strict mode evict.

What the check keeps, and what deferring costs, is measured by
``bench/store_words.py`` (the figures are in the docs' benchmarks page).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache

from ._facts import extract, sentence_scans, stated_words, stem
from ._lexicon import common_word_ranks

__all__ = ["LastCopies", "common_words", "content_keys", "specific_keys", "specific_keys_among", "stated_keys"]

_WORD = re.compile(r"[A-Za-z][A-Za-z'\u2019]*")


@lru_cache(maxsize=1)
def common_words() -> frozenset[str]:
    """The package's common English words (lower case, :mod:`memrefine_edge.text._lexicon`), as a set."""
    return frozenset(common_word_ranks())


# Small caches: a key set is asked for again within a few decisions (the pair, then its removal),
# and on a 100k-entry store a larger cache raised the run's peak memory.
@lru_cache(maxsize=256)
def content_keys(text: str) -> frozenset[str]:
    """Every content key of ``text`` as the fact checks see them: names, numbers, dates and words."""
    f = extract(text)
    return f.names | f.numbers | f.dates | f.words


def stated_keys(text: str) -> frozenset[str]:
    """Names, numbers, dates, and the words of the sentences that state something (no question, no small talk)."""
    f = extract(text)
    return f.names | f.numbers | f.dates | stated_words(sentence_scans(text))


def specific_keys_among(text: str, common: frozenset[str]) -> frozenset[str]:
    """:func:`specific_keys` with ``common`` as the common words (the benchmark varies the list)."""
    f = extract(text)
    strict = f.names | f.numbers | f.dates
    common_stems = set()  # stems with at least one common surface form here
    for tok in _WORD.findall(text):
        w = tok.lower().replace("\u2019", "'")
        if (w[:-2] if w.endswith("'s") else w) in common:
            common_stems.add(stem(tok))
    return frozenset(k for k in stated_keys(text) if k in strict or k not in common_stems)


@lru_cache(maxsize=256)
def specific_keys(text: str) -> frozenset[str]:
    """The keys of ``text`` whose last copy a delete may not take (see the module docstring)."""
    return specific_keys_among(text, common_words())


class LastCopies:
    """How many live entries hold each content key; which specific keys a delete would lose.

    Fill it with :meth:`build` (the live entries' texts), then keep it in step
    with :meth:`add` and :meth:`remove` as entries come and go.
    """

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def build(self, texts: Iterable[str]) -> None:
        """Count the keys of ``texts`` (the live entries), replacing any earlier counts."""
        self.counts = Counter()
        for text in texts:
            self.counts.update(content_keys(text))

    def add(self, text: str) -> None:
        """An entry with ``text`` became live."""
        self.counts.update(content_keys(text))

    def remove(self, text: str) -> None:
        """An entry with ``text`` is gone."""
        counts = self.counts
        for k in content_keys(text):
            n = counts[k] - 1
            if n > 0:
                counts[k] = n
            else:
                del counts[k]  # the counter stays as small as the store's vocabulary

    def last(self, gone: str, kept: str) -> frozenset[str]:
        """Specific keys of ``gone`` that neither ``kept`` nor any other live entry holds."""
        have = content_keys(kept)
        return frozenset(k for k in specific_keys(gone) if k not in have and self.counts[k] <= 1)
