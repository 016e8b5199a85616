"""A LoCoMo conversation as a stream: its entries session by session, and its questions by the age of their evidence.

The streaming evaluation (:mod:`._stream`) adds a conversation's entries in the
order the assistant would have written them, one session after another:

* ``turns`` and ``observations``: the importer's entries (one per turn or per
  observed fact), grouped by the session their metadata names;
* ``text``: the mem0-style paragraphs carry no session, so each is placed in
  the session whose turns share its rarer words best, keeping file order (the
  paragraphs were written in conversation order): a monotone alignment that
  maximises the summed idf of the words a paragraph shares with its session.

A question's *age* is that of its oldest evidence turn (``D3:5`` is session 3):
a question needs every piece of its evidence, so it depends on the oldest
one surviving. The conversation's sessions are cut into quarters by position;
questions whose evidence names no session of the conversation are ``none``.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memrefine_edge.core import Entry, EvalError, MemRefineError

from ._context import text_tokens
from ._questions import Question, load_questions

__all__ = ["AGE_BUCKETS", "StreamedConversation", "age_buckets", "align_paragraphs", "evidence_sessions",
           "stream_conversation"]

#: Age buckets of a question, oldest first: the quarter of the conversation's sessions its oldest evidence is in.
AGE_BUCKETS: Mapping[str, str] = {
    "q1": "oldest quarter of sessions", "q2": "second quarter", "q3": "third quarter",
    "q4": "newest quarter of sessions", "none": "no evidence in a session",
}

_EVIDENCE_SESSION = re.compile(r"^D(\d+):\d+$")


@dataclass(frozen=True)
class StreamedConversation:
    """One conversation ready to replay: ``batches[i]`` holds the entries of session ``sessions[i]``."""

    sample_id: str
    sessions: tuple[int, ...]
    batches: tuple[tuple[Entry, ...], ...]
    questions: tuple[Question, ...]

    @property
    def entries(self) -> int:
        """How many entries the whole conversation adds."""
        return sum(len(b) for b in self.batches)


def evidence_sessions(question: Question) -> frozenset[int]:
    """The session numbers of a question's evidence ids (``D3:5`` -> 3)."""
    out = set()
    for e in question.evidence:
        m = _EVIDENCE_SESSION.match(e)
        if m:
            out.add(int(m.group(1)))
    return frozenset(out)


def age_buckets(questions: Sequence[Question], sessions: Sequence[int]) -> list[str]:
    """Each question's age bucket (a key of :data:`AGE_BUCKETS`), aligned with ``questions``."""
    rank = {s: i for i, s in enumerate(sorted(sessions))}
    n = len(rank)
    out = []
    for q in questions:
        known = [rank[s] for s in evidence_sessions(q) if s in rank]
        out.append(f"q{1 + 4 * min(known) // n}" if known else "none")
    return out


def align_paragraphs(paragraphs: Sequence[str], sessions: Sequence[str]) -> list[int]:
    """The session index (into ``sessions``, each a session's text) of every paragraph, non-decreasing.

    Maximises the summed idf (over sessions) of the words each paragraph shares with its session, under
    the constraint that paragraphs keep their order.
    """
    if not sessions:
        raise ValueError("no sessions to align with")
    words = [text_tokens(s) for s in sessions]
    df = Counter(w for ws in words for w in ws)
    idf = {w: math.log(len(sessions) / c) for w, c in df.items()}
    prev: list[float] = [0.0] * len(sessions)
    back: list[list[int]] = []
    for paragraph in paragraphs:
        tokens = text_tokens(paragraph)
        score = [sum(idf.get(w, 0.0) for w in tokens & ws) for ws in words]
        best_i, row, cur = 0, [], []
        for s in range(len(sessions)):  # best predecessor among sessions <= s (ties: the earlier session)
            if prev[s] > prev[best_i]:
                best_i = s
            row.append(best_i)
            cur.append(prev[best_i] + score[s])
        back.append(row)
        prev = cur
    at = max(range(len(sessions)), key=lambda i: (prev[i], -i))
    out = [0] * len(paragraphs)
    for p in range(len(paragraphs) - 1, -1, -1):
        out[p] = at
        at = back[p][at]
    return out


def _session_texts(sample: Mapping[str, Any]) -> dict[int, str]:
    conv = sample.get("conversation")
    out: dict[int, str] = {}
    if isinstance(conv, dict):
        for key, turns in conv.items():
            m = re.fullmatch(r"session_(\d{1,9})", key)
            if m and isinstance(turns, list):
                out[int(m.group(1))] = " ".join(t.get("text", "") for t in turns
                                                if isinstance(t, dict) and isinstance(t.get("text"), str))
    return out


def stream_conversation(data: Path, sample: Mapping[str, Any], kind: str, *,
                        text_path: Path | None = None) -> StreamedConversation:
    """The entries of one LoCoMo sample as a store ``kind`` holds them, session by session.

    ``kind`` is ``turns``, ``observations`` or ``text`` (``text_path``: the sample's paragraphs). A file
    the importer refuses is an :class:`EvalError` naming it.
    """
    from memrefine_edge.store import parse_file

    sid = sample["sample_id"]
    texts = _session_texts(sample)
    if not texts:
        raise EvalError(f"{data.name}: sample {sid!r} has no sessions (not a LoCoMo conversation)")
    try:
        if kind == "text":
            if text_path is None:
                raise EvalError("the text store needs the sample's paragraphs (a text file)")
            entries, _ = parse_file(text_path, format="text")
            order = sorted(texts)
            where = align_paragraphs([e.content for e in entries], [texts[s] for s in order])
            session_of = [order[i] for i in where]
        else:
            fmt = {"turns": "locomo-turns", "observations": "locomo-observations"}.get(kind)
            if fmt is None:
                raise EvalError(f"unknown store kind {kind!r}; use one of turns, observations, text")
            entries, _ = parse_file(data, format=fmt, sample_id=sid)
            session_of = [int(e.metadata["session"]) for e in entries]
    except EvalError:
        raise
    except MemRefineError as exc:
        raise EvalError(f"cannot read sample {sid!r} as {kind}: {exc}") from exc
    grouped: dict[int, list[Entry]] = {}
    for entry, s in zip(entries, session_of, strict=True):
        grouped.setdefault(s, []).append(entry)
    sessions = tuple(sorted(set(texts) | set(grouped)))
    return StreamedConversation(sample_id=sid, sessions=sessions,
                                batches=tuple(tuple(grouped.get(s, ())) for s in sessions),
                                questions=tuple(load_questions(sample)))
