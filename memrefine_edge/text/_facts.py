"""Facts in a memory entry: the extractor behind the judge's fast path and guards
(:mod:`memrefine_edge.judging._fastpath`, :mod:`memrefine_edge.judging._judge`).

Small judge models cannot be trusted to keep facts, so fact safety rests on
this deterministic module: a delete is applied only when the facts of the
entry to delete are covered by the entry that stays, and a merge only when
the merged text carries the facts of both.

The extractor (:func:`extract`) turns a text into a :class:`Facts`:

* **speaker** -- a ``Name:`` prefix (``"Caroline: I went ..."``) is split off;
  who said it is kept as a name fact.
* **numbers** -- digit groups (``40``, ``3:30``, ``5K``, ``2023``) and number
  words (``five`` -> ``5``); ordinals (``first``, ``1st``) -> ``#1``.
* **dates** -- month and weekday names (``Sept``/``September`` -> ``september``)
  and relative time words (``yesterday``, ``tonight``, ``last week``,
  ``next month``, ``ago`` ...).
* **names** -- capitalised words. A word that starts a sentence is a name
  only when it is not a stopword, not a filler word, does not look like an
  ordinary word (``-ing``/``-ed``/``-ly``/``-tion`` ...) and is not one of the
  dictionary words never written capitalised (:func:`is_plain_word`:
  ``"Obstacles"``, ``"Big"``; ``"Mark"`` and ``"Grace"`` stay names); ``I``
  never is.
  *Vocatives* -- a name alone in a clause of greetings or thanks
  (``"Thanks, Maria!"``, ``"Hey Gina, ..."``) -- are dropped: the addressee
  is not a fact about the world.
* **negation** -- ``not``, ``never``, ``no``, ``n't`` ... as one fact
  (``"likes dogs"`` must not cover ``"doesn't like dogs"``).
* **words** -- the remaining content words, lower-cased, without stopwords
  or filler, stemmed lightly (``painted``/``painting``/``paints`` -> ``paint``,
  ``stories`` -> ``story``).

Names, numbers, dates and negation are *strict*: every one must be covered.
Content words are *soft*: a share ``min_word_cover`` of them must be covered,
because a paraphrase changes some words without changing the facts.

**Filler** (:func:`is_filler`): text whose every sentence is small talk. A
sentence is small talk when every clause holds only greeting, thanks, praise
or small-talk words, stopwords and vocative names, and no number or date --
``"Thanks, Jon! Appreciate your support!"`` -- or, when it is no question and
holds no name, number or date, when the learned classifier
(:mod:`memrefine_edge.text._smalltalk`) calls it small talk -- ``"It must feel great
to be recognised."``. A small-talk sentence contributes no fact. Every
function that reads small talk takes ``classify=False`` for the word lists
alone (the redundancy scorer's features, which were trained on them).
"""

from __future__ import annotations

import gzip
import hashlib
import re
from array import array
from bisect import bisect_left
from dataclasses import dataclass
from enum import IntEnum
from functools import lru_cache
from importlib import resources
from typing import NamedTuple

from ._smalltalk import is_small_talk

__all__ = [
    "ClauseToken",
    "Facts",
    "clause_context",
    "Kind",
    "clause_tokens",
    "is_stopword",
    "read_clause",
    "word_tokens",
    "coverage_keys",
    "extract",
    "is_filler",
    "normalise",
    "strip_speaker",
    "missing_facts",
    "covers",
    "is_plain_word",
    "fact_overlap",
    "stem",
    "fact_sentences",
    "sentence_scans",
    "stated_words",
    "sentence_words",
]

_SPEAKER = re.compile(r"^\s*([A-Z][\w'.-]*(?: [A-Z][\w'.-]*)?):\s+")
_INLINE_SPEAKER = re.compile(r"(?<=[.!?\]])\s+([A-Z][\w'.-]*(?: [A-Z][\w'.-]*)?):\s+")
_CLAUSE = re.compile(r"[.!?;,:\n()\"\u2014\u2013]+|\s-\s|<3")
# A sentence ends at . ! ? (not after a title: "Dr. Alexiou") or a line break.
_SENTENCE = re.compile(r"(?<=[.!?])(?<!\bDr\.)(?<!\bMr\.)(?<!\bMs\.)(?<!\bMrs\.)(?<!\bSt\.)(?<!\bProf\.)\s+|\n+")
# A word is letters of any alphabet ("Tomás", "Neukölln", "İmam"), with apostrophes and hyphens inside.
_TOKEN = re.compile(r"[^\W\d_](?:[^\W\d_]|['\u2019-])*|\d+(?:[.,:]\d+)*(?:st|nd|rd|th|k|K|s|am|pm|%)?")

_STOP = frozenset("""
a about above after again against all also am an and any are aren as at be because been before being
below between both but by can could did do does doing don down during each few for from further had has
have having he her here hers herself him himself his how i if in into is it its itself just let lets me
more most my myself nor of off on once only or other our ours ourselves out over own same she should so
some such than that the their theirs them themselves then there these they this those through to too
under until up very was we were what when where which while who whom why will with would you your yours
yourself yourselves im ive id ill youre youve youll hes shes weve were theyre theyve thats whats theres
heres its lets gonna wanna gotta kinda sorta ya yall u ur thing things stuff something anything everything
nothing someone anyone everyone one ones get got gets getting go goes going gone went make makes made
making really much many lot lots bit quite pretty even still ever since though although however yet well
like just also maybe perhaps sure s t d ll re ve m way ways actually usually always often already
last next past coming previous
""".split())

# Greetings, thanks, praise and small talk: words that carry no fact on their own.
_FILLER = frozenset("""
hey hi hello hiya yo howdy bye goodbye later cya farewell thanks thank thx ty appreciate appreciated
appreciating glad great good nice cool awesome amazing wow whoa oh ooh aw aww awww yeah yes yep yup yea
totally absolutely definitely certainly indeed lol haha hahaha omg congrats congratulations welcome take
care safe soon see seeing chat chatting talk talking catch hear hearing heard keep going kind words word
mean means meant support supportive really so love loved lovely sounds sound fun wonderful fantastic
happy proud sweet doing been new long time no see up right okay ok alright fine anytime bet luck
best wishes wish cheers enjoy yourself too agree agreed exactly true tell glad helped help helps
incredible beautiful gorgeous stunning adorable cute impressive brilliant terrific excellent perfect
super neat sweet inspiring inspired inspiration motivating motivated motivation encouraging
encouragement uplifting touching touched means meaningful wonderful grateful thankful blessed
hope hoping hoped same happen happened happening whats hows wanted say saying said just lately recently
always here there for you me us am again nothing much stay compliment compliments
""".split()) - {"no"}

# Words that mark a clause as an address to someone ("Thanks, Maria", "Bye Joanna").
_VOCATIVE_CUES = frozenset("""
hey hi hello hiya yo bye goodbye later thanks thank thx ty congrats congratulations wow whoa sure yes yeah yep
yup agreed agree absolutely ok okay cool great nice awesome amazing dear go welcome cheers aw aww awww oh haha
lol see care luck sounds love night morning
""".split())

_NEGATION = frozenset("not never no nor cannot cant dont doesnt didnt isnt wasnt arent werent wont "
                      "wouldnt shouldnt couldnt hasnt havent hadnt neither nobody none nowhere".split())
_MONTHS = {
    "january": "january", "jan": "january", "february": "february", "feb": "february", "march": "march",
    "april": "april", "apr": "april", "may": "may", "june": "june", "jun": "june", "july": "july",
    "jul": "july", "august": "august", "aug": "august", "september": "september", "sep": "september",
    "sept": "september", "october": "october", "oct": "october", "november": "november",
    "nov": "november", "december": "december", "dec": "december",
}
_WEEKDAYS = frozenset("monday tuesday wednesday thursday friday saturday sunday weekend weekends".split())
_RELATIVE = frozenset("yesterday today tonight tomorrow ago morning afternoon evening night "
                      "christmas thanksgiving easter halloween summer winter spring autumn fall".split())
_PERIOD = frozenset("week weeks month months year years weekend night day days".split())
_REL_MOD = frozenset("last next this past coming previous".split())
_NUMBER_WORDS = {
    "zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6", "seven": "7",
    "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12", "thirteen": "13",
    "fourteen": "14", "fifteen": "15", "sixteen": "16", "seventeen": "17", "eighteen": "18",
    "nineteen": "19", "twenty": "20", "thirty": "30", "forty": "40", "fifty": "50", "sixty": "60",
    "seventy": "70", "eighty": "80", "ninety": "90", "hundred": "100", "thousand": "1000",
    "million": "1000000", "twice": "2", "once": "1", "dozen": "12", "half": "0.5",
}
_ORDINALS = {
    "first": "#1", "second": "#2", "third": "#3", "fourth": "#4", "fifth": "#5", "sixth": "#6",
    "seventh": "#7", "eighth": "#8", "ninth": "#9", "tenth": "#10",
}
# Capitalised sentence starts that look like ordinary words, not names.
_COMMON_SUFFIX = re.compile(r"(ing|ed|ly|tion|ness|ment|ful|ous|ive|able|ible|est|ies)$")


@lru_cache(maxsize=8192)
def stem(word: str) -> str:
    """Light suffix stripping so inflections of one word compare equal.

    Not a real stemmer: it only has to map ``paint/paints/painted/painting``
    and ``story/stories`` onto one key, deterministically.
    """
    w = word.lower().replace("\u2019", "'")
    if w.endswith("'s"):
        w = w[:-2]
    w = w.replace("'", "")
    if len(w) <= 3:
        return w
    for suffix, repl in (("ies", "y"), ("ied", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", ""), ("ly", "")):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            if suffix == "s" and w.endswith("ss"):
                break
            w = w[: len(w) - len(suffix)] + repl
            break
    if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "lsz":
        w = w[:-1]  # running -> runn -> run
    if len(w) > 3 and w.endswith("e"):
        w = w[:-1]  # bake / baked -> bak
    return w


_FILLER_STEMS = frozenset(stem(w) for w in _FILLER)


@dataclass(frozen=True)
class Facts:
    """What :func:`extract` found in one text (all keys lower-case)."""

    speaker: str | None
    names: frozenset[str]
    numbers: frozenset[str]
    dates: frozenset[str]
    negated: bool
    words: frozenset[str]

    @property
    def strict(self) -> frozenset[str]:
        """Facts that must each be covered (names, numbers, dates, negation)."""
        neg = {"<not>"} if self.negated else set()
        return self.names | self.numbers | self.dates | neg

    @property
    def empty(self) -> bool:
        return not (self.strict or self.words)

    def keys(self) -> frozenset[str]:
        """Every fact key, for overlap measures."""
        return self.strict | self.words


def strip_speaker(text: str) -> tuple[str | None, str]:
    """Split a ``Name: text`` prefix off; ``(None, text)`` when there is none."""
    m = _SPEAKER.match(text)
    if m and m.group(1).lower() not in _STOP:
        return m.group(1), text[m.end():]
    return None, text


#: Signs that say what a number counts, kept by :func:`normalise`.
_SIGNS = "$\u00a2\u00a3\u00a5\u20ac\u20b9\u20bd\u20a9%\u00b0"


#: How many texts the per-text caches (here and in the scorer) keep. The judge sees each entry of a
#: large store in several pairs, far apart in the run: a larger cache saves judging time on a
#: 100k-entry run and costs about 4 KB per text; this size is where the saving stops being worth a
#: device's memory (the measurements are in the docs' benchmarks page).
TEXT_CACHE = 8192


@lru_cache(maxsize=TEXT_CACHE)
def normalise(text: str) -> str:
    """Case-, punctuation- and whitespace-insensitive form used for duplicate tests.

    Cached: the judge normalises both texts of every pair it is shown, and on
    a large store the same entries come back pair after pair.
    """
    text = text.lower().replace("\u2019", "'")
    # Currency, percent and degree signs are words here: "€12,000" is not "£12,000".
    text = re.sub(r"[^\w\s" + _SIGNS + r"]", " ", text)
    return " ".join(re.sub("([" + _SIGNS + "])", r" \1 ", text).split())


def _clauses(body: str) -> list[str]:
    return [c.strip() for c in _CLAUSE.split(body) if c and c.strip()]


def _is_cap(tok: str) -> bool:
    return tok[:1].isupper()


def _word_hash(word: str) -> int:
    return int.from_bytes(hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest(), "little")


@lru_cache(maxsize=1)
def _plain_hashes() -> array[int]:
    # 64-bit hashes, sorted: 0.3 MB where a set of the 40k words takes 6 MB of a device's memory
    # budget (a chance collision, about 2e-15 per word looked up, would only make a word no name).
    raw = resources.files("memrefine_edge").joinpath("data", "plain_words.txt.gz").read_bytes()
    words = gzip.decompress(raw).decode("utf-8").split("\n")
    return array("Q", sorted(_word_hash(w) for w in words if w and not w.startswith("#")))


def is_plain_word(word: str) -> bool:
    """True for an English word a dictionary never spells capitalised (``data/plain_words.txt.gz``,
    from SCOWL; written by ``scripts/make_plain_words.py``): at a sentence start it is no name.
    ``word`` is lower case."""
    hashes, h = _plain_hashes(), _word_hash(word)
    i = bisect_left(hashes, h)
    return i < len(hashes) and hashes[i] == h


def _sentence_start_name(tok: str) -> bool:
    low = tok.lower().replace("\u2019", "'")
    if "'" in low and low.split("'", 1)[0] in _STOP:  # "How're", "Where'd", "It'll": a stopword's contraction
        return False
    low = low.replace("'", "")
    if low in _STOP or low in _FILLER or low in _NEGATION or low in _NUMBER_WORDS or low in _ORDINALS:
        return False
    if tok.isupper() and len(tok) > 1:  # LGBTQ, NBA
        return True
    # "Obstacles keep coming", "Big news": a word only ever written in lower case is no name;
    # one that is also a name ("Mark", "Grace", "John") still counts as one.
    return not _COMMON_SUFFIX.search(low) and not is_plain_word(low)


_FILLER_PHRASES = re.compile(
    r"\b(long time no see|no worries|no problem|not bad|can'?t wait|no way|never mind|you bet"
    # Greetings of the day or season: "Christmas", "morning" or "year" in them is no date.
    r"|(?:merry|happy) (?:christmas|xmas|new year|holidays|easter|thanksgiving|hanukkah|diwali|eid)"
    r"|season'?s greetings|good (?:morning|afternoon|evening|night))\b", re.IGNORECASE
)


def _is_filler_word(bare: str) -> bool:
    return bare in _FILLER or bare in _STOP or stem(bare) in _FILLER_STEMS


class Kind(IntEnum):
    """What a token is to the fact checks (``SKIP``: a stopword, filler or short word)."""

    NUM, DATE, NEG, NAME, SKIP, WORD = range(6)


# What one token is, as far as the token alone tells (its context -- the word before it, whether it
# starts a sentence -- is applied in read_clause). Plain ints on the hot path.
_NUM, _DATE, _NEG, _NAME, _SKIP, _WORD = (int(k) for k in Kind)


class _TokenClass(NamedTuple):
    """What one token is on its own (:func:`_token_class`); a named tuple, unpacked on the hot path.

    ``period`` is the stem of a period word (``week``, ``months`` ...), a date
    when the word before is a relative modifier (``last week``); otherwise the
    token is ``kind``. A capitalised token (kind ``_NAME``) that starts a
    sentence is a name only when it looks like one (``value == "start"``);
    otherwise it is ``fallback_kind`` / ``fallback_value``.
    """

    bare: str
    period: str | None
    kind: int
    value: str
    fallback_kind: int
    fallback_value: str


@lru_cache(maxsize=16384)
def _token_class(tok: str) -> _TokenClass:
    """The :class:`_TokenClass` of one token. The scan of every text walks the same few thousand chat
    words: classifying each once is what keeps the judge's fact checks cheap on a large store."""
    low = tok.lower().replace("\u2019", "'")
    bare = low.replace("'", "")
    if tok[0].isdigit():
        num = re.sub(r"(st|nd|rd|th)$", "", low)
        return _TokenClass(bare, None, _NUM, (("#" + num) if num != low and num.isdigit() else num.rstrip("s")),
                           _SKIP, "")
    if bare in _NUMBER_WORDS and bare not in {"once", "one"}:
        return _TokenClass(bare, None, _NUM, _NUMBER_WORDS[bare], _SKIP, "")
    if bare in _ORDINALS:
        return _TokenClass(bare, None, _NUM, _ORDINALS[bare], _SKIP, "")
    if bare in _MONTHS and (bare != "may" or _is_cap(tok)) and (bare not in {"mar", "sep"}):
        return _TokenClass(bare, None, _DATE, _MONTHS[bare], _SKIP, "")
    if bare in _WEEKDAYS or bare in _RELATIVE:
        return _TokenClass(bare, None, _DATE, (bare.rstrip("s") if bare.endswith("ends") else bare), _SKIP, "")
    period = stem(bare) if bare in _PERIOD else None
    if bare in _NEGATION or low.endswith("n't"):
        return _TokenClass(bare, period, _NEG, "", _SKIP, "")
    plain = (_SKIP, "") if _is_filler_word(bare) or len(bare) < 3 else (_WORD, stem(bare))
    if _is_cap(tok) and bare not in _STOP:
        return _TokenClass(bare, period, _NAME, ("start" if _sentence_start_name(tok) else ""), *plain)
    return _TokenClass(bare, period, *plain, _SKIP, "")


#: One token of a clause as :func:`read_clause` gives it: ``(kind, value, bare, token)``.
ClauseToken = tuple[int, str, str, str]


def read_clause(toks: list[str], first: bool, *, greeted: bool = False,
                after_name: bool = False) -> tuple[list[ClauseToken], list[str], bool]:
    """``(tokens, names, vocative)`` of one clause's tokens (``first``: the clause starts its sentence).

    Each token in order as ``(kind, value, bare, token)``, its :class:`Kind` decided in context: a
    period word after a relative modifier is a date (``last week``), a capitalised word starting a
    sentence is a name only when it looks like one. ``names`` are the clause's names (bare, lower
    case); ``vocative`` is True when they only address someone -- a name alone in its clause, or
    next to greetings and thanks and nothing else (``"Thanks, Maria!"``, ``"Bye Joanna"``), or next
    to nothing but stopwords and small-talk words after a greeting of the same sentence (``greeted``:
    ``"Hey, it's Deb again."``): no fact. A name alone in its clause right after a clause that ends
    with a name (``after_name``) is no vocative but that name's apposition (``"in Austin, Texas"``).
    The one reading of a clause, for the scan behind :func:`extract` and for the bound facts of
    :mod:`memrefine_edge.text._bindings` (their callers pass the context: :func:`clause_context`).
    """
    items: list[ClauseToken] = []
    names: list[str] = []
    other = False  # a non-filler, non-stopword token
    prev = ""
    for tok in toks:
        bare, period, kind, value, fallback, fallback_value = _token_class(tok)
        if period is not None and prev in _REL_MOD:
            kind, value = _DATE, f"{prev} {period}"
        elif kind == _NAME and first and not value:
            kind, value = fallback, fallback_value
        first = False
        if kind == _NAME:
            names.append(bare)
        elif kind != _SKIP:
            other = True
        items.append((kind, value, bare, tok))
        prev = bare
    vocative = False
    if names and not other:  # only then can it be a vocative: the rest of the clause is read only here
        rest = [r for r in (t.lower().replace("'", "").replace("\u2019", "") for t in toks) if r not in names]
        if not rest and after_name:
            return items, names, False  # "Austin, Texas": a place named after the place, not an address
        vocative = ((not rest or greeted or any(r in _VOCATIVE_CUES for r in rest))
                    and all(_is_filler_word(r) for r in rest))
    return items, names, vocative


def clause_context(toks: list[str], items: list[ClauseToken], vocative: bool) -> tuple[bool, bool]:
    """``(greets, ends_with_name)`` of a clause read by :func:`read_clause`: whether it is a greeting
    (a cue such as "hey" or "thanks", and nothing but small-talk words, or a vocative), and whether
    its last token is a name it states -- the ``greeted`` / ``after_name`` context of the next clause
    of the sentence."""
    bare = [t.lower().replace("'", "").replace("\u2019", "") for t in toks]
    greets = vocative or (any(b in _VOCATIVE_CUES for b in bare) and all(_is_filler_word(b) for b in bare))
    return greets, bool(items) and items[-1][0] == _NAME and not vocative


# Clauses as _CLAUSE splits them, but a number stays whole ("7.5", "3:30", "1,000"). Only the bound
# facts read them so: the bags (and the scorer's features) keep the split they were fitted on.
_CLAUSE_WHOLE_NUMBERS = re.compile(r"[!?;\n()\"\u2014\u2013]+|[.,:]+(?!\d)|(?<!\d)[.,:]+|\s-\s|<3")


def clause_tokens(sentence: str) -> list[tuple[list[ClauseToken], bool]]:
    """The clauses of one sentence (speaker prefix off) as :func:`read_clause` reads them:
    ``(tokens, vocative)`` each, empty clauses left out; a number is one token (``7.5``, ``3:30``)."""
    out: list[tuple[list[ClauseToken], bool]] = []
    greeted = after_name = False
    for clause in _CLAUSE_WHOLE_NUMBERS.split(_FILLER_PHRASES.sub(" ", sentence)):
        toks = _TOKEN.findall(clause)
        if toks:
            items, _, vocative = read_clause(toks, not out, greeted=greeted, after_name=after_name)
            greets, after_name = clause_context(toks, items, vocative)
            greeted = greeted or greets
            out.append((items, vocative))
    return out


def word_tokens(text: str) -> list[str]:
    """The extractor's tokens of ``text`` (words and numbers), in order."""
    return _TOKEN.findall(text)


def is_stopword(bare: str) -> bool:
    """True for one of the extractor's stopwords (``bare``: lower case, apostrophes off)."""
    return bare in _STOP


_VIEW_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_FIRST_PERSON = frozenset("i i'm i've i'll i'd my me mine myself we we're we've we'll we'd our us ours".split())
_SECOND_PERSON = frozenset("you your you're you've you'll you'd yours yourself yourselves ya u".split())
_THIRD_PERSON = frozenset("he she they he's she's they're he'll she'll they'll he'd she'd they'd".split())
_LIKES_AFTER = frozenset("i we they he she really also still do does did don't doesn't didn't never".split())
#: A sentence that starts with one of these states its (unwritten) subject's preference: "Loves sushi".
_PREFERENCE_LEADS = frozenset("loves likes prefers hates enjoys dislikes adores can't doesn't don't".split())
_PREFERENCE = frozenset("""love loved loves prefer prefers preferred favourite favorite favourites favorites enjoy
enjoys enjoyed hate hates hated dislike dislikes passion passionate fan obsessed adore adores""".split())
_OPINION = _PREFERENCE | frozenset("best worst better help helps".split())
_LEADS = frozenset("and but so oh well honestly also plus".split())
_REFERS = frozenset("that that's this it it's its these those there there's what what's such how looks look "
                    "sounds sound".split())


def _states_view(sentence: str) -> bool:
    """Whether a sentence with content words states its speaker's preference or view, or something of
    a third party, rather than small talk: the small-talk classifier is not asked about it.

    A preference of the speaker's ("That's when my love for car engineering began!", "I prefer
    planners", "Loves sushi", "Can't stand olives"), a view of a named thing ("Live music is the
    best.", "Planners or schedulers help you stay on top of things.") or a statement about someone
    else ("And so sad she's leaving.") is a
    fact about who holds it (the labelling rules: who felt, preferred what); a reaction to the other
    person's news ("I love your painting!", "That sounds like fun") is not, and is left to the
    classifier.
    """
    toks = _VIEW_TOKEN.findall(sentence.lower().replace("\u2019", "'"))
    if any(t in _SECOND_PERSON and t != "you" for t in toks):
        return False  # "your", "you're": about the listener
    personal = "you" not in toks
    if toks and toks[0] in _PREFERENCE_LEADS and (toks[0].endswith("s") or toks[1:2] in (["stand"], ["like"])):
        return True  # "Loves sushi", "Can't stand olives", "Doesn't like swimming pools"
    likes = any(t in ("like", "likes", "liked") and i and toks[i - 1] in _LIKES_AFTER for i, t in enumerate(toks))
    if personal and (likes or not _PREFERENCE.isdisjoint(toks)) and not _FIRST_PERSON.isdisjoint(toks):
        return True
    if personal and not _THIRD_PERSON.isdisjoint(toks):
        return True
    lead = next((t for t in toks if t not in _LEADS), "")
    if not lead or lead in _REFERS or lead in _FIRST_PERSON or lead.endswith("ing"):
        return False
    return _token_class(lead)[2] == _WORD and not _OPINION.isdisjoint(toks)


#: ``(names, numbers, dates, negated, words, filler-only, states-something)`` of a text body; the last:
#: a sentence that is neither small talk nor a question.
_Scan = tuple[set[str], set[str], set[str], bool, set[str], bool, bool]
_Sentence = tuple[set[str], set[str], set[str], bool, set[str], bool]  # ..., negated, words, question


def _union(kept: list[_Sentence], *, questions_negate: bool = True) -> _Scan:
    names: set[str] = set().union(*(k[0] for k in kept))
    numbers: set[str] = set().union(*(k[1] for k in kept))
    dates: set[str] = set().union(*(k[2] for k in kept))
    words: set[str] = set().union(*(k[4] for k in kept))
    negated = any(k[3] and (questions_negate or not k[5]) for k in kept)
    return names, numbers, dates, negated, words, not kept, any(not k[5] for k in kept)


def _scan(body: str) -> tuple[_Scan, _Scan]:
    """``(names, numbers, dates, negated, words, filler-only, states-something)`` of one text body,
    twice: as the hard fact checks read it, and with the word lists alone (the scorer's features).

    The first view leaves out the sentences the small-talk classifier calls small talk, and the
    negation of a question ("Music's amazing, isn't it?" states no negation). One pass gives both,
    so a text is tokenised once whichever view its callers ask for.
    """
    stated: list[_Sentence] = []  # sentences not small talk ...
    talk: list[bool] = []  # ... and whether the classifier calls each one small talk
    body = _FILLER_PHRASES.sub(" ", body)
    for sentence in _SENTENCE.split(body):
        first = True
        s_names: set[str] = set()
        s_numbers: set[str] = set()
        s_dates: set[str] = set()
        s_words: set[str] = set()
        s_negated = False
        s_filler = True
        greeted = after_name = False
        for clause in _clauses(sentence):
            toks = _TOKEN.findall(clause)
            if not toks:
                continue
            items, c_names, vocative = read_clause(toks, first, greeted=greeted, after_name=after_name)
            greets, after_name = clause_context(toks, items, vocative)
            greeted = greeted or greets
            first = False
            c_other = False  # a non-filler, non-stopword token in this clause
            for kind, value, _bare, _tok in items:
                if kind == _NUM:
                    s_numbers.add(value)
                    c_other = True
                elif kind == _DATE:
                    s_dates.add(value)
                    c_other = True
                elif kind == _NEG:
                    s_negated = True
                    c_other = True
                elif kind == _WORD:
                    s_words.add(value)
                    c_other = True
            if c_names and not vocative:
                s_names.update(c_names)
                s_filler = False
            if c_other:
                s_filler = False
        if s_filler:
            continue
        question = sentence.rstrip().endswith("?")
        stated.append((s_names, s_numbers, s_dates, s_negated, s_words, question))
        # Small talk in ordinary words ("It must feel great!"): no name, number or date, no question,
        # and the learned classifier says it states nothing; it holds no fact, like greetings do.
        # A stated preference or view is no small talk (:func:`_states_view`).
        talk.append(not (s_names or s_numbers or s_dates) and not question
                    and not (s_words and _states_view(sentence)) and is_small_talk(sentence))
    plain = _union(stated)
    if not any(talk) and not any(k[3] and k[5] for k in stated):
        return plain, plain
    return _union([x for x, t in zip(stated, talk, strict=True) if not t], questions_negate=False), plain


def _facts(speaker: str | None, body: str, scan: _Scan, *, stated_speaker: bool) -> tuple[Facts, bool]:
    names, numbers, dates, negated, words, filler, states = scan
    names = set(names)
    # Who said it is a fact only of something worth keeping: the speaker of
    # pure small talk ("Melanie: Hey! What's up?") is no fact to protect, and
    # (``stated_speaker``: the hard checks' view) neither is the speaker of
    # small talk and questions ("Caroline: Thanks, Melanie! You play any
    # instruments?"): a name, number or date in a question still counts.
    if speaker and not filler and (states or not stated_speaker):
        names.add(speaker.lower())
    # A merged entry speaks for several people ("Caroline: ... Melanie: ...");
    # the scan sees a label alone in its clause and would take it for a
    # vocative, so labels after a sentence end count as names here.
    names.update(m.group(1).lower() for m in _INLINE_SPEAKER.finditer(body) if m.group(1).lower() not in _STOP)
    facts = Facts(speaker=speaker.lower() if speaker else None, names=frozenset(names),
                  numbers=frozenset(numbers), dates=frozenset(dates), negated=negated,
                  words=frozenset(words))
    return facts, filler


@lru_cache(maxsize=TEXT_CACHE)
def _extract_cached(text: str) -> tuple[tuple[Facts, bool], tuple[Facts, bool]]:
    """``((facts, filler) with the classifier, (facts, filler) with the word lists alone)``: one slot, one scan."""
    speaker, body = strip_speaker(text)
    classified, plain = _scan(body)
    plain_facts = _facts(speaker, body, plain, stated_speaker=False)
    if classified is plain and (plain[6] or plain[5] or speaker is None):
        return plain_facts, plain_facts  # the same facts: one object in the cache
    return _facts(speaker, body, classified, stated_speaker=True), plain_facts


def extract(text: str, *, classify: bool = True) -> Facts:
    """The facts of one memory text (see the module docstring for the rules).

    ``classify=False`` leaves out the small-talk classifier (:mod:`memrefine_edge.text._smalltalk`): only
    the word lists decide what is small talk.
    """
    return _extract_cached(text)[0 if classify else 1][0]


def is_filler(text: str, *, classify: bool = True) -> bool:
    """True when the text holds only greetings, thanks, praise or small talk (``classify`` as in :func:`extract`)."""
    if not text.strip():
        return True
    return _extract_cached(text)[0 if classify else 1][1]


def coverage_keys(f: Facts) -> set[str]:
    """Every key under which another text's facts count as carried by ``f``."""
    # A strict fact of one text may appear as an ordinary word in the other
    # ("Melanie" vs a lower-cased "melanie ..."), so coverage looks in both.
    return set(f.names) | set(f.numbers) | set(f.dates) | set(f.words) | {stem(n) for n in f.names}


def missing_facts(x: str | Facts, y: str | Facts, *, min_word_cover: float = 0.75) -> list[str]:
    """Facts of ``x`` that ``y`` does not carry (empty list: ``y`` covers ``x``).

    Every strict fact of ``x`` must appear in ``y``; of its content words at
    least ``min_word_cover`` must. When the words fall short, the uncovered
    ones are returned.
    """
    fx = extract(x) if isinstance(x, str) else x
    fy = extract(y) if isinstance(y, str) else y
    have = coverage_keys(fy)
    out: list[str] = []
    for n in sorted(fx.names):
        if n not in have and stem(n) not in have:
            out.append(n)
    out += [n for n in sorted(fx.numbers) if n not in have]
    out += [d for d in sorted(fx.dates) if d not in have]
    if fx.negated and not fy.negated:
        out.append("<not>")
    if fx.words:
        lost = sorted(w for w in fx.words if w not in have)
        if len(lost) > (1.0 - min_word_cover) * len(fx.words):
            out += lost
    return out


def covers(y: str | Facts, x: str | Facts, *, min_word_cover: float = 0.75) -> bool:
    """True when ``y`` carries every fact of ``x`` (so ``x`` may be deleted)."""
    return not missing_facts(x, y, min_word_cover=min_word_cover)


def fact_overlap(a: str | Facts, b: str | Facts) -> float:
    """Share of fact keys the two texts have in common (Jaccard, speaker excluded)."""
    fa = extract(a) if isinstance(a, str) else a
    fb = extract(b) if isinstance(b, str) else b
    ka = fa.keys() - ({fa.speaker} if fa.speaker else set())
    kb = fb.keys() - ({fb.speaker} if fb.speaker else set())
    if not ka and not kb:
        return 1.0
    return len(ka & kb) / len(ka | kb)


def sentence_words(sentence: str, classify: bool = True) -> tuple[bool, frozenset[str]]:
    """``(is_filler(sentence), extract(sentence).words)`` for one sentence of an entry.

    Cached apart from whole entries: an entry's sentences would otherwise push
    the entries themselves out of :func:`extract`'s cache, and on a large store
    the judge would scan each entry again every time it is proposed.
    """
    if not sentence.strip():
        return True, frozenset()
    _, body = strip_speaker(sentence)
    return _sentence_words(body)[0 if classify else 1]


@lru_cache(maxsize=8192)
def _sentence_words(body: str) -> tuple[tuple[bool, frozenset[str]], tuple[bool, frozenset[str]]]:
    classified, plain = _scan(body)
    plain_words = (plain[5], frozenset(plain[4]))
    return (plain_words if classified is plain else (classified[5], frozenset(classified[4]))), plain_words


def sentence_scans(text: str, *, classify: bool = True) -> list[tuple[str, bool, frozenset[str]]]:
    """Each sentence of ``text`` (speaker prefix off, stripped, empty ones dropped) with its
    :func:`sentence_words`: ``(sentence, is_filler, words)``.

    A text of one sentence (most short memories) is read from the whole text's
    scan, which :func:`extract` has cached: the same values, without scanning
    it again or taking a second cache slot.
    """
    _, body = strip_speaker(text)
    pieces = [s for s in (p.strip() for p in _SENTENCE.split(body)) if s]
    if len(pieces) == 1 and strip_speaker(pieces[0])[0] is None:
        # _scan reads a body sentence by sentence, so the body's scan is its one sentence's
        # (the rest of the body is separators); no second speaker prefix to strip.
        facts, filler = _extract_cached(text)[0 if classify else 1]
        return [(pieces[0], filler, facts.words)]
    return [(s, *sentence_words(s, classify)) for s in pieces]


def stated_words(scans: list[tuple[str, bool, frozenset[str]]]) -> frozenset[str]:
    """The words of the sentences (as :func:`sentence_scans` gives them) that state something:
    neither small talk nor a question."""
    return frozenset().union(*(words for s, filler, words in scans if not filler and not s.rstrip().endswith("?")))


def fact_sentences(text: str) -> list[str]:
    """The sentences of ``text`` that carry a fact (filler sentences dropped), speaker prefix kept off."""
    return [s for s, filler, _ in sentence_scans(text) if not filler]
