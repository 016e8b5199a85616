"""Utility within a context budget: what an assistant that reads C bytes of memory gets from a store.

Counting "the top 10 entries" rewards packing: ten merged entries carry more
turns than ten original ones, and a store concatenated into one entry would
find everything. An assistant reads a prompt of limited size instead, so the
measures here build that prompt:

* **context@C**: live entries ranked by cosine to the question, taken whole,
  in rank order, while their content fits in ``C`` UTF-8 bytes; the first
  entry alone larger than ``C`` is cut to ``C`` bytes (and nothing follows).
* **evidence recall@C**: the share of a question's evidence ids in the
  provenance of the context's entries. A cut entry counts each of its ids
  with the share of its bytes that made it into the context, so one giant
  entry cannot claim evidence it did not show.
* **answer recall@C**: the share of the gold answer's tokens (the official
  LoCoMo normalisation: lower case, punctuation and articles removed, Porter
  stems) that occur in the context's text; categories 1-4 (adversarial
  questions have no answer in the conversation).
* **answer presence**: whether every gold token occurs somewhere in the live
  store, whatever the retriever does: did compression delete the fact, or
  only make it harder to find?
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ._metrics import gold_answer, stemmed_tokens

__all__ = ["ANSWER_CATEGORIES", "answer_tokens", "text_tokens", "build_context", "StoreText", "ContextScores",
           "score_context", "answer_presence"]

#: Question categories with a gold answer in the conversation (5, adversarial, has none).
ANSWER_CATEGORIES = (1, 2, 3, 4)


def text_tokens(text: str) -> frozenset[str]:
    """The normalised, stemmed tokens of a text (as the LoCoMo scorer tokenises answers)."""
    return frozenset(stemmed_tokens(text))


def answer_tokens(question: dict) -> frozenset[str]:
    """The gold answer's tokens of a LoCoMo question; empty for category 5 or a missing answer."""
    if question.get("category") not in ANSWER_CATEGORIES or "answer" not in question:
        return frozenset()
    return text_tokens(gold_answer(question))


def _cut(text: str, limit: int) -> str:
    """The first ``limit`` UTF-8 bytes of ``text`` (a character split in two is dropped)."""
    return text.encode("utf-8")[:limit].decode("utf-8", errors="ignore")


def build_context(order: Sequence[int], sizes: Sequence[int], budget: int) -> list[tuple[int, float]]:
    """The context of ``budget`` bytes: ``(entry index, share of its bytes shown)`` in rank order.

    Whole entries while they fit; the first entry, when it alone is larger
    than the budget, is cut to it (share ``budget / size``) and ends the context.
    """
    out: list[tuple[int, float]] = []
    used = 0
    for i in order:
        size = sizes[i]
        if used + size <= budget:
            out.append((int(i), 1.0))
            used += size
            continue
        if not out:
            out.append((int(i), budget / size if size else 1.0))
        break
    return out


@dataclass
class StoreText:
    """One store's entries as the context measures read them (built once per measured store)."""

    contents: list[str]
    provenance: list[frozenset[str]]
    sizes: list[int]
    tokens: list[frozenset[str]]
    all_tokens: frozenset[str]

    @classmethod
    def of(cls, contents: Sequence[str], provenance: Sequence[Iterable[str]]) -> StoreText:
        """Sizes and token sets of ``contents`` (aligned with ``provenance``)."""
        tokens = [text_tokens(c) for c in contents]
        return cls(list(contents), [frozenset(p) for p in provenance], [len(c.encode("utf-8")) for c in contents],
                   tokens, frozenset().union(*tokens) if tokens else frozenset())

    def context_tokens(self, context: Sequence[tuple[int, float]], budget: int) -> frozenset[str]:
        """The tokens of the context's text (a cut entry: of its first ``budget`` bytes only)."""
        out: set[str] = set()
        for i, share in context:
            out |= self.tokens[i] if share >= 1.0 else text_tokens(_cut(self.contents[i], budget))
        return frozenset(out)


@dataclass
class ContextScores:
    """Sums and counts per question category, pooled later over samples."""

    evidence_sum: dict[int, float]
    evidence_n: dict[int, int]
    answer_sum: dict[int, float]
    answer_n: dict[int, int]

    def as_dict(self) -> dict[str, object]:
        """JSON form: totals and ``by_category``."""
        cats = sorted(set(self.evidence_n) | set(self.answer_n))
        return {
            "evidence_sum": sum(self.evidence_sum.values()), "evidence_n": sum(self.evidence_n.values()),
            "answer_sum": sum(self.answer_sum.values()), "answer_n": sum(self.answer_n.values()),
            "by_category": {str(c): {"evidence_sum": self.evidence_sum.get(c, 0.0),
                                     "evidence_n": self.evidence_n.get(c, 0),
                                     "answer_sum": self.answer_sum.get(c, 0.0), "answer_n": self.answer_n.get(c, 0)}
                            for c in cats},
        }


def score_context(store: StoreText, orders: np.ndarray, categories: Sequence[int],
                  evidence: Sequence[frozenset[str]], gold: Sequence[frozenset[str]], budget: int,
                  *, has_provenance: bool = True) -> ContextScores:
    """Evidence and answer recall@``budget`` for every question (row ``q`` of ``orders`` ranks the entries)."""
    scores = ContextScores({}, {}, {}, {})
    for q, cat in enumerate(categories):
        context = build_context(orders[q], store.sizes, budget) if len(store.sizes) else []
        if has_provenance and evidence[q]:
            credit: dict[str, float] = {}
            for i, share in context:
                for e in store.provenance[i] & evidence[q]:
                    credit[e] = max(credit.get(e, 0.0), share)
            scores.evidence_sum[cat] = scores.evidence_sum.get(cat, 0.0) + sum(credit.values()) / len(evidence[q])
            scores.evidence_n[cat] = scores.evidence_n.get(cat, 0) + 1
        if gold[q]:
            shown = store.context_tokens(context, budget)
            scores.answer_sum[cat] = scores.answer_sum.get(cat, 0.0) + len(gold[q] & shown) / len(gold[q])
            scores.answer_n[cat] = scores.answer_n.get(cat, 0) + 1
    return scores


def answer_presence(store: StoreText, categories: Sequence[int],
                    gold: Sequence[frozenset[str]]) -> dict[str, object]:
    """How many answerable questions have every gold token somewhere in the live store."""
    present: dict[int, int] = {}
    n: dict[int, int] = {}
    for cat, tokens in zip(categories, gold, strict=True):
        if tokens:
            n[cat] = n.get(cat, 0) + 1
            present[cat] = present.get(cat, 0) + int(tokens <= store.all_tokens)
    return {"present": sum(present.values()), "n": sum(n.values()),
            "by_category": {str(c): {"present": present.get(c, 0), "n": n[c]} for c in sorted(n)}}
