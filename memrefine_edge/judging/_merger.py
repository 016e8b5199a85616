"""The merger: one entry that carries the facts of two.

:class:`LlamaMerger` asks a local GGUF model for ``{"content", "keywords"}``
(schema-constrained by default: a 135M model's free JSON is often invalid).
:class:`GuardedMerger` wraps any merger and checks the result with
:func:`memrefine_edge.text._bindings.lost_facts`: the merged text must state the
facts of both entries, each bound as it was (a number with what it counts, a
name in its role and said by its speaker, a negation on its statement). If it
does not, the missing fact-bearing sentences of the source
entries are appended (``source="repair"``); if the inner merger fails twice,
a deterministic concatenation of both entries minus filler is used
(``source="concat"``). Only when even that cannot carry the facts, or the
result would be longer than :data:`MAX_MERGED_CHARS`, is
:class:`MergeOutputError` raised, and the caller preserves the pair.

Entries are never cut: the fact check, the repair and the concatenation all
work on the full texts. Only the *prompt* of an LLM merger quotes each entry
up to the judge's prompt limit; whatever the model drops there is caught by
the check on the full texts and repaired or replaced by the concatenation.
"""

from __future__ import annotations

import abc
import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from memrefine_edge.core import Entry, MergeOutputError
from memrefine_edge.text import (
    extract,
    fact_sentences,
    is_filler,
    lost_facts,
    opens_as_small_talk,
    sentence_scans,
    strip_speaker,
    surface_forms,
)

from ._prompts import MERGE_SCHEMA, build_merge_messages

__all__ = [
    "MergedEntry", "Merger", "LlamaMerger", "GuardedMerger", "MAX_MERGED_CHARS", "concat_merge", "parse_merged",
    "default_keywords", "merged_entry_id", "build_merged_entry",
]

#: The longest entry a merge may write (characters). A pair whose merge would
#: be longer is preserved instead: both entries stay whole, nothing is cut.
#: 8,000 characters is about 2,000 tokens, the whole context of the default
#: judge; a longer entry could no longer be read by the judge that decides on it.
MAX_MERGED_CHARS = 8000


@dataclass(frozen=True)
class MergedEntry:
    """The merged content, its keywords, and who produced it (``llm``, ``repair``, ``concat`` ...)."""

    content: str
    keywords: tuple[str, ...] = ()
    source: str = "llm"

    def __post_init__(self) -> None:
        if not isinstance(self.content, str) or not self.content.strip():
            raise ValueError("merged content is empty")


class Merger(abc.ABC):
    """Writes one entry from two: one abstract method, :meth:`merge`; :meth:`load` and :attr:`stats` are
    hooks with defaults (nothing to load, nothing counted)."""

    @abc.abstractmethod
    def merge(self, a: str, b: str, instruction: str) -> MergedEntry:
        """The merged entry for contents ``a`` and ``b`` following the judge's ``instruction``."""

    def load(self) -> None:
        """Load any model now, so a broken model file fails before a run records anything."""

    @property
    def stats(self) -> dict[str, int]:
        """What the merger counted so far (``llm_calls`` among them, if it calls a model); default: nothing."""
        return {}

    def least_bytes(self, a: str, b: str) -> int | None:
        """A lower bound on the UTF-8 bytes of the text :meth:`merge` would write for ``a`` and ``b``, when
        one is known cheaply (a run then skips a merge that could not free enough); default: None, unknown."""
        return None


def default_keywords(text: str, limit: int = 6) -> tuple[str, ...]:
    """Keywords from the facts of a text: names, dates, numbers, then content words."""
    f = extract(text)
    forms = surface_forms(text)
    ordered = sorted(f.names) + sorted(f.dates) + sorted(f.numbers) + sorted(f.words, key=lambda w: (-len(w), w))
    out: list[str] = []
    seen: set[str] = set()
    for k in ordered:
        if len(out) == limit:
            break
        word = forms.get(k, k)
        if word.lower() not in seen:
            seen.add(word.lower())
            out.append(word)
    return tuple(out)


def parse_merged(raw: str) -> MergedEntry:
    """Parse model output into a MergedEntry; :class:`MergeOutputError` when it does not fit."""
    m = re.search(r"\{.*\}", raw, re.DOTALL)
    if not m:
        raise MergeOutputError("merge output holds no JSON object", raw=raw)
    try:
        obj = json.loads(m.group(0))
    except json.JSONDecodeError as exc:
        raise MergeOutputError(f"merge output is not valid JSON ({exc.msg})", raw=raw) from exc
    content = obj.get("content") if isinstance(obj, dict) else None
    if not isinstance(content, str) or not content.strip():
        raise MergeOutputError("merge output has no content", raw=raw)
    kws = obj.get("keywords", [])
    if not isinstance(kws, list):
        kws = []
    keywords = tuple(dict.fromkeys(str(k).strip() for k in kws if isinstance(k, (str, int)) and str(k).strip()))
    return MergedEntry(content=content.strip(), keywords=keywords[:12], source="llm")


def _attributed(text: str) -> tuple[str, str | None, str | None]:
    """``(part, first, last)``: the fact sentences of an entry, the entry's speaker before them, and the
    speakers the part opens and ends with.

    A merged entry's labels (``"... Melanie: ..."``) stay with their sentences; the label of a part
    whose first sentences are small talk moves to its first fact sentence, so no sentence changes
    speaker when small talk is dropped. Small talk here is what the word lists call it (greetings,
    thanks, praise), not the learned classifier: a sentence it would call small talk ("All passed.",
    "Staircase done.") may state a fact, and a merge keeps every fact of both entries. Of the word
    lists' small talk only what opens as greetings, thanks and reactions do goes
    (:func:`memrefine_edge.text.opens_as_small_talk`).
    """
    speaker, _ = strip_speaker(text)
    first = last = speaker
    pending = speaker  # a label still to write, before the next fact sentence
    pieces: list[str] = []
    for sentence, filler, _ in sentence_scans(text, classify=False):
        label, body = strip_speaker(sentence)
        if label:
            pending = label
        if filler and opens_as_small_talk(sentence):
            continue
        if pending and (pending != last or not pieces):
            body = f"{pending}: {body}"
        if not pieces:
            first = pending
        last = pending or last
        pending = None
        pieces.append(body)
    if not pieces:
        return "", None, None
    return " ".join(pieces), first, last


def _concat_content(a: str, b: str, *, limit: int | None = None) -> str | None:
    """The text :func:`concat_merge` writes; None as soon as it is known to be longer than ``limit``."""
    part_a, _, last = _attributed(a)
    parts = [part_a] if part_a else []
    if limit is not None and parts and len(parts[0].strip()) > limit:
        return None  # A's fact sentences are always kept: the concatenation is longer still
    part, first, _ = _attributed(b)
    if part:
        if first and last == first and part.startswith(f"{first}: "):
            part = part[len(first) + 2:]  # A ends with B's speaker: say it once
        joined = " ".join(parts)
        # B adds nothing only when A states all of it (its word-list facts: the learned small-talk
        # classifier's calls are not trusted to drop a sentence), each fact bound as B binds it.
        if not parts or lost_facts(b, joined, min_word_cover=1.0, classify=False):
            parts.append(part)
    content = " ".join(p for p in parts if p).strip()
    if not content:  # both entries were filler: keep the shorter as is
        content = min((a.strip(), b.strip()), key=len) or "(empty)"
    return None if limit is not None and len(content) > limit else content


def concat_merge(a: str, b: str) -> MergedEntry:
    """Deterministic merge: the fact sentences of A, then those of B that A does not already cover."""
    content = _concat_content(a, b)
    assert content is not None  # no limit given
    return MergedEntry(content=content, keywords=default_keywords(content), source="concat")


class LlamaMerger(Merger):
    """A merger backed by a local GGUF model (shared loader of :mod:`memrefine_edge.backends._llama`)."""

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        constrained: bool = True,
        n_threads: int = 1,
        n_ctx: int = 2048,
        max_tokens: int = 256,
        seed: int = 1234,
    ) -> None:
        from memrefine_edge.backends import LlamaModel

        # The path is checked now: a wrong one fails before a run commits decisions.
        self.model = LlamaModel(model_path, n_ctx=n_ctx, n_threads=n_threads, seed=seed)
        self.model_path = model_path
        self.constrained = constrained
        self.max_tokens = max_tokens

    def load(self) -> None:
        """Load the GGUF now (:class:`ModelLoadError` for a file llama.cpp cannot load)."""
        self.model.load()

    def merge(self, a: str, b: str, instruction: str) -> MergedEntry:
        """Ask the model for the merged entry; raises :class:`MergeOutputError` on unusable output."""
        # Only the prompt is shortened (quote_entry cuts each entry); GuardedMerger
        # checks the answer against the full texts.
        prompt = self.model.chat(build_merge_messages(a, b, instruction))
        out = self.model.complete(prompt, max_tokens=self.max_tokens, stop=["<|im_end|>"],
                                  schema=MERGE_SCHEMA if self.constrained else None)
        merged = parse_merged(out.text)
        if not merged.keywords:
            merged = MergedEntry(merged.content, default_keywords(merged.content), merged.source)
        return merged


class GuardedMerger(Merger):
    """Checks that the merged text carries the facts of both entries; repairs, falls back, or raises.

    ``inner=None`` always uses :func:`concat_merge`. ``fallback="raise"``
    raises :class:`MergeOutputError` instead of concatenating when the inner
    merger fails twice. ``stats`` counts calls, invalid outputs, repairs and
    fallbacks.
    """

    def __init__(
        self,
        inner: Merger | None,
        *,
        min_word_cover: float = 0.75,
        fallback: Literal["concat", "raise"] = "concat",
        retries: int = 1,
    ) -> None:
        if fallback not in ("concat", "raise"):
            raise ValueError("fallback must be 'concat' or 'raise'")
        self.inner = inner
        self.min_word_cover = min_word_cover
        self.fallback = fallback
        self.retries = retries
        self._stats: dict[str, int] = {k: 0 for k in ("merges", "llm_calls", "invalid_outputs", "repairs",
                                                      "fallbacks", "failures")}

    @property
    def stats(self) -> dict[str, int]:
        """Merges asked for, model calls, invalid outputs, repairs, fallbacks to the concatenation, failures."""
        return self._stats

    def invented(self, merged: str, a: str, b: str) -> list[str]:
        """Names and numbers in ``merged`` that neither entry has (model hallucination or prompt echo)."""
        fm, fa, fb = extract(merged), extract(a), extract(b)
        known = fa.names | fb.names | fa.numbers | fb.numbers | fa.words | fb.words
        return sorted(k for k in fm.names | fm.numbers if k not in known)

    def missing(self, merged: str, a: str, b: str) -> list[str]:
        """Facts of ``a`` or ``b`` that ``merged`` does not carry, or carries bound otherwise (a number
        with another unit, a name in another role or said by someone else:
        :func:`memrefine_edge.text._bindings.lost_facts`)."""
        return (lost_facts(a, merged, min_word_cover=self.min_word_cover)
                + lost_facts(b, merged, min_word_cover=self.min_word_cover))

    def load(self) -> None:
        """Load the inner merger's model now."""
        if self.inner is not None:
            self.inner.load()

    def least_bytes(self, a: str, b: str) -> int | None:
        """Without an inner merger the merge is the concatenation (or none): its bytes; else None."""
        if self.inner is not None or len(a) + len(b) > 2 * MAX_MERGED_CHARS:
            return None
        content = _concat_content(a, b, limit=MAX_MERGED_CHARS)
        return None if content is None else len(content.encode("utf-8"))

    def merge(self, a: str, b: str, instruction: str) -> MergedEntry:
        """Merge with the inner merger, then check and repair (see the class docstring)."""
        self.stats["merges"] += 1
        if len(a) + len(b) > 2 * MAX_MERGED_CHARS:
            # Nothing short enough could carry both: don't ask a model to try.
            self.stats["failures"] += 1
            raise MergeOutputError(f"the two entries ({len(a):,} + {len(b):,} characters) are too long to merge "
                                   f"within {MAX_MERGED_CHARS:,} characters; preserve the pair", raw="")
        merged: MergedEntry | None = None
        last: MergeOutputError | None = None
        if self.inner is not None:
            for _ in range(1 + max(0, self.retries)):
                self.stats["llm_calls"] += 1
                try:
                    merged = self.inner.merge(a, b, instruction)
                    break
                except MergeOutputError as exc:
                    self.stats["invalid_outputs"] += 1
                    last = exc
            if merged is None and self.fallback == "raise":
                self.stats["failures"] += 1
                raise MergeOutputError("merger output invalid twice", raw=last.raw if last else "")
        # The concatenation is the fallback and the yardstick of a repair. Its keywords (and its
        # fact check) wait until it is used: a pair of long entries often gives one over the
        # limit, known from its length alone.
        fallback = _concat_content(a, b, limit=MAX_MERGED_CHARS)
        if merged is not None and self.invented(merged.content, a, b):
            self.stats["invalid_outputs"] += 1  # made-up names/numbers: not a usable merge
            merged = None
        if merged is not None:
            if not self.missing(merged.content, a, b) and len(merged.content) <= MAX_MERGED_CHARS:
                return merged
            repaired = self._repair(merged, a, b)
            # A repair longer than the plain concatenation saves nothing over it.
            if (repaired is not None and len(repaired.content) <= MAX_MERGED_CHARS
                    and (fallback is None or len(repaired.content) <= len(fallback))):
                self.stats["repairs"] += 1
                return repaired
        self.stats["fallbacks"] += 1
        if fallback is None:
            self.stats["failures"] += 1
            raise MergeOutputError(f"a merge that keeps both entries' facts would be longer than "
                                   f"{MAX_MERGED_CHARS:,} characters; preserve the pair", raw="")
        if self.missing(fallback, a, b):
            self.stats["failures"] += 1
            raise MergeOutputError("no merge carries the facts of both entries; preserve the pair",
                                   raw=merged.content if merged else "")
        return MergedEntry(content=fallback, keywords=default_keywords(fallback), source="concat")

    def _repair(self, merged: MergedEntry, a: str, b: str) -> MergedEntry | None:
        # Append, sentence by sentence, the source sentences holding facts the
        # merged text lacks; give up (-> concat) if that still is not enough.
        content = merged.content.strip()
        if is_filler(content):
            return None
        for src in (a, b):
            speaker, _ = strip_speaker(src)
            for sentence in fact_sentences(src):
                if lost_facts(sentence, content, min_word_cover=1.0):
                    # Said by the source's speaker: labelled unless the text so far ends with them.
                    last = _attributed(content)[2]
                    piece = f"{speaker}: {sentence}" if speaker and speaker != last else sentence
                    content = f"{content} {piece}"
        if self.missing(content, a, b):
            return None
        kws = merged.keywords or default_keywords(content)
        return MergedEntry(content=content, keywords=kws, source="repair")


# --- the merged entry -------------------------------------------------------------


def merged_entry_id(a_id: str, b_id: str, *, taken: Callable[[str], bool] | None = None) -> str:
    """Deterministic id of the entry that replaces ``a_id`` and ``b_id``: ``m-`` and 16 hex digits.

    The first candidate is a hash of the two sorted ids; while ``taken``
    says a candidate is in use (a compressor passes
    :meth:`RunJournal.id_in_use <memrefine_edge.store._journal.RunJournal.id_in_use>`:
    live, or named by the audit log), the next one is the hash of the ids
    and a counter. So ids users reuse, or an ``m-`` id someone wrote
    beforehand, never collide, and the same store state gives the same id.
    """
    key = "\x00".join(sorted((a_id, b_id)))
    n = 0
    while True:
        candidate = "m-" + hashlib.sha256((key if n == 0 else f"{key}\x00{n}").encode("utf-8")).hexdigest()[:16]
        if taken is None or not taken(candidate):
            return candidate
        n += 1  # ends: only finitely many ids are in use


def build_merged_entry(a: Entry, b: Entry, *, content: str, keywords: tuple[str, ...],
                       entry_id: str | None = None) -> Entry:
    """The merged entry's fields, per the paper's store update rule.

    Links: union of both entries' links, duplicates and self-loops (and the
    pair itself) removed. Timestamps: every original timestamp is kept, the
    earlier-inserted entry's first, duplicates dropped; ``timestamp`` (the
    first) is therefore the older entry's. Provenance: union. Metadata: the
    earlier entry's, filled in with keys only the later one has, plus
    ``merged_from``. ``entry_id``: the id to give it (default: the first
    candidate of :func:`merged_entry_id`).
    """
    new_id = entry_id if entry_id is not None else merged_entry_id(a.id, b.id)
    links = tuple(dict.fromkeys(link for link in (*a.links, *b.links) if link not in (a.id, b.id, new_id)))
    metadata = {**dict(b.metadata), **dict(a.metadata), "merged_from": [a.id, b.id]}
    return Entry(
        id=new_id,
        content=content,
        keywords=tuple(dict.fromkeys(keywords)) or tuple(dict.fromkeys((*a.keywords, *b.keywords))),
        links=links,
        timestamps=tuple(dict.fromkeys((*a.timestamps, *b.timestamps))),
        metadata=metadata,
        provenance=tuple(dict.fromkeys((*a.provenance, *b.provenance))),
    )
