"""Judge dev set: labelled LoCoMo pairs, text rebuilt at run time.

``bench/judge_devset/labels.jsonl`` holds only source ids and labels (no
LoCoMo text is committed; the data is CC BY-NC). Each side of a pair is a
reference resolved against ``locomo-dev.json`` in the folder ``$MEMREFINE_LOCOMO``
(default: ``../shared/data/locomo/locomo-dev.json`` from the repository root):

``T:<sample>:<dia_id>``                   a dialogue turn, as ``Speaker: text``
``O:<sample>:<session>:<speaker>:<i>``    the i-th observation of a speaker in a session
``E:<sample>:<session>:<speaker>:<i>``    the i-th event-summary item

An optional ``|transform`` suffix builds near-duplicates the way stores get
them: ``lower`` (lower case), ``strip`` (punctuation removed), ``ws`` (extra
whitespace), ``sent0`` (first sentence only, prefix kept), ``noprefix``
(speaker prefix removed).

Labels: ``ideal`` lists the ideal action(s) among ``delete_a``, ``delete_b``,
``merge``, ``preserve`` (two deletes when both copies are equal; preserve and
merge when the pair is borderline); ``fact_losing`` lists the actions that
would drop a fact held by only one side. A merge is counted as fact-safe at
the judge level (the merger has its own guard, :mod:`memrefine_edge.judging._merger`).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

__all__ = ["DevPair", "load_devset", "resolve_ref", "LABELS", "ACTIONS"]

LABELS = Path(__file__).resolve().parent / "judge_devset" / "labels.jsonl"
ACTIONS = ("delete_a", "delete_b", "merge", "preserve")
#: The shared data folder sits beside the repository.
_DEFAULT_LOCOMO = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "locomo" / "locomo-dev.json"


@dataclass(frozen=True)
class DevPair:
    """One labelled pair with its text."""

    id: str
    category: str
    a: str
    b: str
    ideal: tuple[str, ...]
    fact_losing: tuple[str, ...]
    ref_a: str
    ref_b: str
    note: str = ""


def _locomo_path() -> Path:
    env = os.environ.get("MEMREFINE_LOCOMO")
    return Path(env) / "locomo-dev.json" if env else _DEFAULT_LOCOMO


@lru_cache(maxsize=1)
def _samples() -> dict[str, dict]:
    data = json.loads(_locomo_path().read_text(encoding="utf-8"))
    return {s["sample_id"]: s for s in data}


def _transform(text: str, how: str) -> str:
    if how == "lower":
        return text.lower()
    if how == "strip":
        return re.sub(r"[^\w\s:]", "", text)
    if how == "ws":
        return "  " + re.sub(r" ", "   ", text) + " \n"
    if how == "sent0":
        m = re.match(r"(.+?[.!?])(\s|$)", text)
        return m.group(1) if m else text
    if how == "noprefix":
        return re.sub(r"^[A-Z][\w'-]*: ", "", text)
    raise ValueError(f"unknown transform {how!r}")


def resolve_ref(ref: str) -> str:
    """The text a source reference stands for."""
    base, _, how = ref.partition("|")
    kind, sample, rest = base.split(":", 2)
    s = _samples()[sample]
    if kind == "T":
        for key, turns in s["conversation"].items():
            if isinstance(turns, list):
                for t in turns:
                    if t["dia_id"] == rest:
                        text = f"{t['speaker']}: {t['text']}"
                        break
                else:
                    continue
                break
        else:
            raise KeyError(ref)
    else:
        session, speaker, idx = rest.split(":")
        if kind == "O":
            text = s["observation"][f"session_{session}_observation"][speaker][int(idx)][0]
        elif kind == "E":
            text = s["event_summary"][f"events_session_{session}"][speaker][int(idx)]
        else:
            raise ValueError(f"unknown reference kind in {ref!r}")
    return _transform(text, how) if how else text


def load_devset(path: Path = LABELS) -> list[DevPair]:
    """All labelled pairs, text resolved."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        out.append(DevPair(id=r["id"], category=r["category"], a=resolve_ref(r["a"]), b=resolve_ref(r["b"]),
                           ideal=tuple(r["ideal"]), fact_losing=tuple(r["fact_losing"]),
                           ref_a=r["a"], ref_b=r["b"], note=r.get("note", "")))
    return out


if __name__ == "__main__":  # print the set for review
    for p in load_devset():
        print(f"{p.id} [{p.category}] ideal={','.join(p.ideal)} losing={','.join(p.fact_losing) or '-'}  {p.note}")
        print(f"   A: {p.a}\n   B: {p.b}")
