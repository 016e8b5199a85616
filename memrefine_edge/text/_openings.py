"""Which small talk may be dropped: what begins as greetings, thanks and reactions do.

The word lists (:func:`memrefine_edge.text._facts.is_filler`) call a sentence small talk when they find
no fact word in it. Most such sentences are greetings, thanks, laughter and reactions ("Thanks so much!",
"That sounds amazing!", "Good luck!"), but some state something in words the lists hold as filler: "She
loved both.", "Everyone is fine.", "Jae-won PASSED!", "NOOR!", a wish that names its occasion ("Happy
Easter, Hyun!"). The deterministic merge drops a sentence, and the fast path deletes an entry as small
talk, only when it is the word lists' small talk *and* opens as small talk does.
"""

from __future__ import annotations

import re

from ._facts import is_filler, sentence_scans, strip_speaker

__all__ = ["only_small_talk", "opens_as_small_talk"]

#: How a sentence of droppable small talk begins: a greeting, thanks, a farewell, laughter, an
#: interjection or a reaction to the other person's news.
_LEADS = frozenset(
    "hi hey hello hiya heya yo morning evening night thanks thank thx ty congrats congratulations good "
    "great wow woah whoa oh ah aw aww awww ooh haha hahaha hah lol lmao yay yes yeah yep yup ok okay sure "
    "cool nice awesome amazing wonderful lovely perfect see bye goodbye cheers sorry no nope hmm well that "
    "that's thats sounds so what how such absolutely totally definitely indeed right true exactly agreed "
    "omg please fantastic brilliant excellent beautiful sweet glad take have hope enjoy love lots".split()
)
_WORD = re.compile(r"[A-Za-z'\u2019]+")


def opens_as_small_talk(sentence: str) -> bool:
    """Whether ``sentence`` (a speaker prefix is skipped) begins as greetings, thanks and reactions do;
    a sentence with no word at all (an emoji, "!!!") counts as one."""
    lead = _WORD.search(strip_speaker(sentence)[1])
    return lead is None or lead.group().lower().replace("\u2019", "'") in _LEADS


def only_small_talk(text: str) -> bool:
    """Whether ``text`` is the word lists' small talk throughout and every sentence of it opens as small talk."""
    return is_filler(text, classify=False) and all(
        opens_as_small_talk(s) for s, _filler, _words in sentence_scans(text, classify=False))
