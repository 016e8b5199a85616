"""LoCoMo questions: reading a sample file, evidence ids, and a reproducible stratified subset."""

from __future__ import annotations

import json
import random
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memrefine_edge.core import EvalError

from ._metrics import CATEGORY_NAMES

__all__ = ["Question", "evidence_ids", "load_samples", "load_questions", "stratified_sample"]

_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")


@dataclass(frozen=True)
class Question:
    """One LoCoMo question: its position in the sample's ``qa`` list, category and evidence ids."""

    index: int
    text: str
    category: int
    evidence: frozenset[str]
    record: Mapping[str, Any] = field(repr=False, compare=False)


def evidence_ids(raw: Iterable[Any]) -> frozenset[str]:
    """Normalised evidence dia_ids: ``"D8:6; D9:17"`` splits, ``"D:11:26"`` reads as ``D11:26``."""
    out: set[str] = set()
    for item in raw or ():
        if isinstance(item, str):
            out.update(f"D{a}:{b}" for a, b in _EVIDENCE.findall(item))
    return frozenset(out)


def load_samples(path: Path) -> list[dict[str, Any]]:
    """The samples of a LoCoMo file (a list of samples, or one); a clear :class:`EvalError` otherwise."""
    if not path.is_file():
        raise EvalError(f"no LoCoMo file at {path}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise EvalError(f"{path} is not a readable LoCoMo JSON file: {exc}") from exc
    samples = data if isinstance(data, list) else [data]
    if not all(isinstance(s, dict) and isinstance(s.get("sample_id"), str) and isinstance(s.get("qa"), list)
               for s in samples):
        raise EvalError(f"{path} is not a LoCoMo file (expected a list of samples with 'sample_id' and 'qa')")
    return samples


def load_questions(sample: Mapping[str, Any]) -> list[Question]:
    """The sample's questions with a known category, in file order."""
    out = []
    for i, rec in enumerate(sample.get("qa", [])):
        if isinstance(rec, dict) and rec.get("category") in CATEGORY_NAMES and isinstance(rec.get("question"), str):
            out.append(Question(i, rec["question"], int(rec["category"]), evidence_ids(rec.get("evidence") or ()), rec))
    return out


def stratified_sample(questions: Sequence[Question], limit: int | None, *, seed: int, key: str = "") -> list[Question]:
    """At most ``limit`` questions, stratified by category (largest remainder), reproducible.

    Each category gets its proportional share (every present category at
    least one while ``limit`` allows); within a category the questions are
    drawn with a ``random.Random`` seeded by ``(seed, key, category)``. The
    result keeps file order.
    """
    if limit is None or limit >= len(questions):
        return list(questions)
    groups: dict[int, list[Question]] = defaultdict(list)
    for q in questions:
        groups[q.category].append(q)
    cats = sorted(groups)
    exact = {c: limit * len(groups[c]) / len(questions) for c in cats}
    quota = {c: min(len(groups[c]), max(1 if limit >= len(cats) else 0, int(exact[c]))) for c in cats}
    # Largest remainders fill what is left, ties by category id: deterministic.
    for c in sorted(cats, key=lambda c: (-(exact[c] - int(exact[c])), c)) * limit:
        if sum(quota.values()) >= limit:
            break
        if quota[c] < len(groups[c]):
            quota[c] += 1
    while sum(quota.values()) > limit:  # the minimum of one can overshoot: trim the largest
        quota[max(cats, key=lambda c: (quota[c], -c))] -= 1
    chosen: list[Question] = []
    for c in cats:
        rng = random.Random(f"{seed}:{key}:{c}")
        chosen.extend(rng.sample(groups[c], quota[c]))
    return sorted(chosen, key=lambda q: q.index)
