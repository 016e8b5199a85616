"""Bound facts: a number with what it counts, a name in its role, a negation on its statement.

The extractor (:mod:`memrefine_edge.text._facts`) reads a text as bags of names,
numbers, dates and words. Bags cannot tell ``"Mia takes 50 mg ... at 8"`` from
``"Mia takes 8 mg ... at 50 past 7"``, ``"Flight 12 ... gate 7"`` from
``"Flight 7 ... gate 12"`` or ``"Ana lent Ben"`` from ``"Ben lent Ana"``: the
same keys, other facts. A delete is safe only when the kept entry states every
fact of the deleted one *with what it is bound to*; this module reads those
bindings and checks them. It is a veto on top of the bag checks, never a
reason to delete.

Each sentence that states something (small talk dropped, as the extractor
drops it) becomes its *bound facts* in order of appearance (a number is read
whole here: ``7.5``, ``3:30``, ``1,000``):

* **number** -- with its *unit*, the word next to it that says what it counts
  or names (``50 mg``, ``3 lamps``, ``gate 7``, ``flight 12``; the word after it
  first, else the word before it; none when both are stopwords: ``at 8``), and
  its *relation*, a contrastive word right before it (``since 2020`` /
  ``until 2020``, ``from 9 to 5``, ``more than 3``).
* **date** -- a month with the day and year written next to it is one fact
  (``4 May 2023`` = ``May 4 2023``); a date keeps its relation (``before
  Friday``).
* **name** -- possessive or not (``Ana's sister`` / ``Ana``), and its *role*:
  its side of the clause's verb (before the first content word or verb: the
  subject side, ``Ana`` in ``"Ana lent Ben"``; after it: ``Ben``) and its side
  of each content word. Vocatives are no facts.
* **negation** -- with the statement it negates: the next two content words,
  names, numbers or dates of its clause (``doesn't eat meat`` -> ``eat meat``).

Every sentence also knows who said it: the entry's ``Speaker:`` prefix, or
the label of a merged entry's part (``"... Melanie: ..."``).

**Coverage** (:func:`binding_losses`): every fact sentence of the deleted
entry needs one sentence of the kept entry, said by the same speaker (or, when
the kept sentence has no speaker, naming that speaker as its subject:
``"Caroline went ..."`` for ``"Caroline: I went ..."``), whose bound facts
include its own in the same order (dates in their own order: a time phrase
moves freely in a paraphrase), each with the same binding and each name in its
role -- on the same side of its verb, or else of every content word the two
sentences share. No sentence said by that speaker may negate a statement of
the deleted sentence that the deleted sentence does not negate itself (``"Ana
likes dogs"`` is not stated by ``"Ana doesn't like dogs"``), and the kept
sentence closest to it in content words may not be someone else's
(``"Caroline: I love painting. Melanie: I love hiking."`` does not state
``"Caroline: I love hiking."``). A capitalised word the kept entry holds only as
an ordinary word has no role to keep. Texts equal up to case, punctuation and
whitespace (the words in the same order) state the same facts.

Content words stay soft: whether a paraphrase keeps them is for the judge
and the word-coverage share of :func:`memrefine_edge.text._facts.missing_facts`.
:func:`lost_facts` is both checks in one: the bags first, then the bindings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from ._facts import (
    ClauseToken,
    Kind,
    clause_tokens,
    extract,
    is_stopword,
    missing_facts,
    normalise,
    sentence_scans,
    stem,
    strip_speaker,
    word_tokens,
)

__all__ = ["Bound", "BoundSentence", "bound_sentences", "binding_losses", "lost_facts", "describe", "surface_forms"]

_NUM, _DATE, _NEG, _NAME, _SKIP, _WORD = (int(k) for k in Kind)

#: Words right before a number or date that change what it says (``since 2020`` vs ``until 2020``).
RELATIONS = frozenset("since until till before after from to by over under above below than per".split())
#: Stopwords that are a clause's verb: a name after one is on the object side (``"Ana got Ben a cake"``).
_VERBS = frozenset("go goes went gone going get gets got getting make makes made making like likes liked let lets "
                   "have has had having do does did am is are was were be been being".split())
_THOUSANDS = re.compile(r"\d{1,3}(?:,\d{3})+")
_MONTHS = frozenset("january february march april may june july august september october november "
                    "december".split())


@dataclass(frozen=True, slots=True)
class Bound:
    """One fact with its binding: ``kind`` (:class:`~memrefine_edge.text._facts.Kind`), ``value`` (a name's
    stem, a number, a date, ``"not"``) and ``bind`` -- a name's ``("'s",)`` when possessive, a number's
    ``(unit, relation)``, a date's ``(relation,)``, a negation's following content values (see the
    module docstring). ``shown`` is for reasons, ``at`` its position among the sentence's tokens,
    ``side`` a name's side of its clause's verb (``S`` before the first content word or verb, ``O``
    after); none of those three takes part in comparisons."""

    kind: int
    value: str
    bind: tuple[str, ...]
    shown: str = field(default="", compare=False)
    at: int = field(default=0, compare=False)
    side: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class BoundSentence:
    """The bound facts of one sentence that states something, with who said it (lower case, or None).

    ``content``: the values of its content words, names, numbers and dates; ``names``: its names'
    stems; ``words``: where each content word first appears (token positions); ``text`` the sentence
    and ``label`` its speaker as written, for reasons.
    """

    speaker: str | None
    facts: tuple[Bound, ...]
    content: frozenset[str]
    names: frozenset[str]
    negations: tuple[Bound, ...]
    words: dict[str, int]
    text: str = field(default="", compare=False)
    label: str = field(default="", compare=False)
    #: A question: its names, numbers and dates are facts, not who asked it nor a negation in it.
    question: bool = field(default=False, compare=False)


def _word_value(item: ClauseToken) -> str:
    kind, value, bare, tok = item
    if kind in (_WORD, _DATE, _NUM):
        return value
    return stem(tok)


def _unit(items: list[ClauseToken], i: int) -> tuple[str, str]:
    """What the number at ``i`` counts or names: the next token, else the one before, if a word;
    ``(value, token)``, empty when neither is."""
    for j in (i + 1, i - 1):
        if 0 <= j < len(items):
            kind, _, bare, tok = items[j]
            if kind not in (_NUM, _NEG) and not is_stopword(bare) and bare not in RELATIONS:
                return _word_value(items[j]), tok
    return "", ""


def _relation(items: list[ClauseToken], i: int) -> str:
    if i < 1:
        return ""
    bare = items[i - 1][2]
    if bare == "than" and i >= 2:
        return f"{items[i - 2][2]} than"
    return bare if bare in RELATIONS else ""


def _day_or_year(item: ClauseToken) -> str | None:
    kind, value, _, _ = item
    digits = value.lstrip("#")
    if kind == _NUM and digits.isdigit() and (1 <= int(digits) <= 31 or len(digits) == 4):
        return digits
    return None


def _date_parts(items: list[ClauseToken], i: int) -> tuple[str, list[int]]:
    """The month at ``i`` with the day and year written next to it, and the indices they take
    (``4 May 2023``, ``May 4``, ``the 4th of May``)."""
    used: list[int] = []
    j = i - 1
    while j >= 0 and items[j][2] in ("of", "the") and i - j <= 2:
        j -= 1
    if j >= 0 and (d := _day_or_year(items[j])) is not None and len(d) <= 2:
        used.append(j)
    j = i + 1
    if j < len(items) and items[j][2] == "the":
        j += 1
    while j < len(items) and len(used) < 3 and _day_or_year(items[j]) is not None:
        used.append(j)
        j += 1
    parts = [str(_day_or_year(items[u])) for u in used]
    day = [p for p in parts if len(p) <= 2][:1]
    year = [p for p in parts if len(p) == 4][:1]
    return " ".join([items[i][1], *day, *year]), used


def _dates(items: list[ClauseToken]) -> tuple[dict[int, tuple[str, int]], set[int]]:
    """Months of a clause with their day and year: ``{index: (value, first index)}``, and the
    indices of the numbers they take."""
    dates: dict[int, tuple[str, int]] = {}
    taken: set[int] = set()
    for i, (kind, value, _, _) in enumerate(items):
        if kind == _DATE and value in _MONTHS:
            value, used = _date_parts(items, i)
            dates[i] = (value, min([i, *used]))
            taken.update(used)
    return dates, taken


def _bound_clause(items: list[ClauseToken], vocative: bool, at: int, facts: list[Bound], content: set[str],
                  words: dict[str, int]) -> None:
    """Append the bound facts of one clause (its first token at position ``at`` of the sentence), in
    order; collect its content values and where its content words are."""
    dates, taken = _dates(items)
    after_verb = False  # a content word or verb came before: a name now is on the object side
    for i, (kind, value, bare, tok) in enumerate(items):
        if kind == _WORD:
            content.add(value)
            words.setdefault(value, at + i)
            after_verb = True
        elif kind == _SKIP:
            after_verb = after_verb or bare in _VERBS or not is_stopword(bare)
        elif kind == _NAME and not vocative:
            key = stem(tok)
            # Possessive ("Ana's sister"), or the agent of a passive ("hired by Kayla" is not "hired Kayla").
            owner = ("'s" if tok.lower().replace("\u2019", "'").endswith("'s") else
                     "by" if i and items[i - 1][2] == "by" else "")
            facts.append(Bound(_NAME, key, (owner,), shown=tok, at=at + i, side="O" if after_verb else "S"))
            content.add(key)
        elif kind == _DATE:
            content.add(value)
            value, start = dates.get(i, (value, i))
            facts.append(Bound(_DATE, value, (_relation(items, start),), shown=value, at=at + i))
        elif kind == _NUM:
            if _THOUSANDS.fullmatch(value):
                value = value.replace(",", "")  # 1,000 = 1000
            content.add(value)
            if i in taken:
                continue
            (unit, written), relation = _unit(items, i), _relation(items, i)
            shown = (relation, tok, written) if items[i + 1:i + 2] and items[i + 1][3] == written else (
                relation, written, tok)
            facts.append(Bound(_NUM, value, (unit, relation), shown=" ".join(p for p in shown if p), at=at + i))
        elif kind == _NEG:
            following = [x for x in items[i + 1:] if x[0] in (_WORD, _NAME, _NUM, _DATE)][:2]
            facts.append(Bound(_NEG, "not", tuple(_word_value(x) for x in following),
                               shown=" ".join([tok, *(x[3] for x in following)]), at=at + i))


_NO_WORDS: dict[str, int] = {}


# Read only for the deletes the bag checks allow (about 12 in 100 pairs on the dev conversations); a
# turn takes about 3 KB here and a merged entry 13 bytes a character (100 KB at 8,000), so the cache is
# kept small: 512 texts.
@lru_cache(maxsize=512)
def bound_sentences(text: str) -> tuple[BoundSentence, ...]:
    """The bound facts of each sentence of ``text`` that states something (see the module docstring)."""
    current, _ = strip_speaker(text)
    out: list[BoundSentence] = []
    for sentence, filler, _ in sentence_scans(text):
        label, body = strip_speaker(sentence)
        if label:  # a merged entry's part: "... Melanie: I went ..."
            current = label
        if filler:
            continue
        facts: list[Bound] = []
        content: set[str] = set()
        words: dict[str, int] = {}
        at = 0
        for items, vocative in clause_tokens(body):
            _bound_clause(items, vocative, at, facts, content, words)
            at += len(items)
        names = frozenset(f.value for f in facts if f.kind == _NAME)
        question = body.rstrip().endswith("?")
        if question:
            facts = [f for f in facts if f.kind != _NEG]
        out.append(BoundSentence(current.lower() if current else None, tuple(facts), frozenset(content), names,
                                 tuple(f for f in facts if f.kind == _NEG),
                                 words if names else _NO_WORDS,  # only a name's role reads them
                                 body, current or "", question))
    return tuple(out)


def _said_by(gone: BoundSentence, kept: BoundSentence) -> bool:
    """``kept`` speaks for ``gone``'s speaker: the same one, or none while naming them as its subject
    (``"Caroline went ..."`` for ``"Caroline: I went ..."``; not ``"I lent Caroline ..."``)."""
    if gone.speaker is None or kept.speaker == gone.speaker:
        return True
    if kept.speaker is not None:
        return False
    who = stem(gone.speaker)
    return any(f.kind == _NAME and f.value == who and f.side == "S" for f in kept.facts)


def _within(f: Bound, h: Bound) -> bool:
    """The date ``f`` is stated by the more precise date ``h``: the same month and relation, and each
    day or year ``f`` writes is ``h``'s ("March 2025" by "31 March 2025"; not "4 May" by "9 May")."""
    if f.kind != _DATE or h.kind != _DATE or f.bind != h.bind:
        return False
    fp, hp = f.value.split(), h.value.split()
    if len(fp) >= len(hp) or fp[0] != hp[0] or fp[0] not in _MONTHS:
        return False
    day = lambda parts: next((p for p in parts[1:] if len(p) <= 2), None)  # noqa: E731
    year = lambda parts: next((p for p in parts[1:] if len(p) == 4), None)  # noqa: E731
    return day(fp) in (None, day(hp)) and year(fp) in (None, year(hp))


def _states(g: BoundSentence, needed: tuple[Bound, ...], k: BoundSentence, *, roles: bool = True) -> bool:
    """``k`` holds ``needed`` (facts of ``g``) in order -- dates in their own order, since a time
    phrase moves freely in a paraphrase (``"Next month I'm having a show"``) -- and each name in
    its role: on the same side of its clause's verb, or else on the same side of every content word
    the two sentences share (``"Ana called her mother"`` / ``"Her mother called Ana"`` differ in both)."""
    shared = g.words.keys() & k.words.keys()
    for dates in (False, True):
        it = iter([h for h in k.facts if (h.kind == _DATE) == dates])
        for f in needed:
            if (f.kind == _DATE) != dates:
                continue
            for h in it:
                if f == h or (dates and _within(f, h)):
                    break
            else:
                return False
            if roles and f.kind == _NAME and f.side != h.side and any((g.words[w] < f.at) != (k.words[w] < h.at)
                                                              for w in shared):
                return False
    return True


def _moved(g: BoundSentence, kept: tuple[BoundSentence, ...], candidates: list[BoundSentence]) -> bool:
    """The sentence of ``kept`` closest to ``g`` in content words is someone else's (``"Caroline: I love
    hiking"`` and ``"Caroline: I love painting. Melanie: I love hiking."``)."""
    mine = max((len(g.content & k.content) for k in candidates), default=0)
    theirs = max((len(g.content & k.content) for k in kept if not _said_by(g, k)), default=0)
    return theirs > mine and 2 * theirs > len(g.content)


def _sentence_loss(g: BoundSentence, kept: tuple[BoundSentence, ...], kept_names: frozenset[str]) -> str | None:
    """Why no sentence of ``kept`` states ``g`` (None: one does); ``kept_names``: every name of ``kept``."""
    if g.question:
        # A question states nothing of its speaker's: only the names, numbers and dates it asks about
        # are facts, wherever the other entry holds them.
        if not g.facts or any(_states(g, g.facts, k, roles=False) for k in kept):
            return None
        have = {f for k in kept for f in k.facts}
        return ", ".join(f.shown for f in g.facts if f not in have) or "the order of " + ", ".join(
            f.shown for f in g.facts)
    candidates = [k for k in kept if _said_by(g, k)]
    if not candidates or (len(candidates) < len(kept) and _moved(g, kept, candidates)):
        return f"what {g.label} said"
    negated = {f.bind for f in g.negations}
    for k in candidates:
        for neg in k.negations:
            if neg.bind not in negated and not g.content.isdisjoint(neg.bind):
                return f"{describe(sorted(g.content.intersection(neg.bind)), g.text)} (negated in the other entry)"
    # A capitalised word the other entry holds only as an ordinary word ("Art gives me ..." and
    # "making art") has no role to keep: the bag check found it.
    needed = tuple(f for f in g.facts if f.kind != _NAME or f.value in kept_names)
    stating = [k for k in candidates if not needed or _states(g, needed, k)]
    if stating:
        # Stated, unless every sentence that states it says the same with one word of it replaced:
        # "Prefers oat milk" is not stated by "Prefers soy milk", nor "Pickle is scared of the hoover"
        # by "Pretzel is scared of the hoover" (the bags hold no name there, only words).
        swaps = [_replaced(g, k) for k in stating]
        first = swaps[0]
        if first is None or not all(swaps):
            return None
        return f"{first[0]} (the other entry says {first[1]})"
    have = {f for k in candidates for f in k.facts}
    unbound = [f.shown for f in needed if f not in have]
    if unbound:
        return ", ".join(unbound)
    if any(_states(g, needed, k, roles=False) for k in candidates):
        return "the role of " + ", ".join(f.shown for f in needed if f.kind == _NAME)
    return "the order of " + ", ".join(f.shown for f in needed)


_FRAME = re.compile(r"[^\W\d_](?:[^\W\d_]|['\u2019-])*|\d+(?:[.,:]\d+)*")


@lru_cache(maxsize=4096)
def _frame(text: str) -> tuple[str, ...]:
    return tuple(t.lower().replace("\u2019", "'") for t in _FRAME.findall(text))


def _replaced(g: BoundSentence, k: BoundSentence) -> tuple[str, str] | None:
    """``(word of g, word of k)`` when ``k`` is ``g`` with one short span of content words replaced by
    another and nothing else changed -- the same statement of another value ("Prefers oat milk" /
    "Prefers soy milk"); None when the two differ otherwise (a paraphrase rewords more than one
    place) or the replaced span holds no content word on either side."""
    gt, kt = _frame(g.text), _frame(k.text)
    if gt == kt or abs(len(gt) - len(kt)) > 2 or len(set(gt) ^ set(kt)) > 6:
        return None  # cheap tests first: a replaced span of at most three words allows no more
    import difflib

    ops = [op for op in difflib.SequenceMatcher(None, gt, kt, autojunk=False).get_opcodes() if op[0] != "equal"]
    if len(ops) != 1 or ops[0][0] != "replace":
        return None
    _, i1, i2, j1, j2 = ops[0]
    if i2 - i1 > 3 or j2 - j1 > 3:
        return None
    equal = len(gt) - (i2 - i1)
    if equal < 2 or 2 * equal < max(len(gt), len(kt)):
        return None
    g_words = [t for t in gt[i1:i2] if stem(t) in g.content]
    k_words = [t for t in kt[j1:j2] if stem(t) in k.content]
    if not g_words or not k_words:
        return None
    return " ".join(gt[i1:i2]), " ".join(kt[j1:j2])


def binding_losses(gone: str, kept: str) -> list[str]:
    """The bound facts of ``gone`` that ``kept`` does not state, as short descriptions (empty: it
    states them all; see the module docstring)."""
    if gone == kept or normalise(gone) == normalise(kept):
        return []
    kept_sentences = bound_sentences(kept)
    kept_names = frozenset().union(*(k.names for k in kept_sentences))
    out: list[str] = []
    for g in bound_sentences(gone):
        loss = _sentence_loss(g, kept_sentences, kept_names)
        if loss is not None and loss not in out:
            out.append(loss)
    return out


def lost_facts(gone: str, kept: str, *, min_word_cover: float = 0.75, classify: bool = True) -> list[str]:
    """Facts of ``gone`` that ``kept`` does not state: the bag check
    (:func:`memrefine_edge.text._facts.missing_facts`; ``classify=False``: only the word lists' small
    talk carries no fact in it), then, when that passes, the bindings (:func:`binding_losses`). Empty:
    deleting ``gone`` loses nothing ``kept`` does not say."""
    bags = (gone, kept) if classify else (extract(gone, classify=False), extract(kept, classify=False))
    return missing_facts(*bags, min_word_cover=min_word_cover) or binding_losses(gone, kept)


def surface_forms(text: str) -> dict[str, str]:
    """Map each word's stem (and lower-cased form) to how it is written in ``text``."""
    out: dict[str, str] = {}
    for tok in dict.fromkeys(word_tokens(text)):  # first occurrences, in order: a long merged text repeats
        low = tok.lower().replace("\u2019", "'")
        out.setdefault(low.replace("'", ""), tok)
        out.setdefault(stem(low), tok)
    return out


def describe(keys: list[str], text: str | None = None) -> str:
    """A short human list of fact keys for merge instructions and reasons.

    With ``text``, stems are shown as the words written there (``literatur`` -> ``literature``).
    """
    forms = surface_forms(text) if text else {}
    shown = [("negation" if k == "<not>" else forms.get(k, k)) for k in keys[:12]]
    more = f" and {len(keys) - 12} more" if len(keys) > 12 else ""
    return ", ".join(shown) + more
