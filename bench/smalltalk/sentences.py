"""Labelled sentences for the small-talk classifier: draw them, show their text, check and settle labels.

    python bench/smalltalk/sentences.py draw             # writes bench/smalltalk/sentences.jsonl (ids only)
    python bench/smalltalk/sentences.py show OUT.jsonl   # with their text, for labelling (never commit)
    python bench/smalltalk/sentences.py agree A.jsonl B.jsonl   # agreement of two independent labellings
    python bench/smalltalk/sentences.py final            # labels.jsonl from labels_a, labels_b and settled

The sentences are the ones the fact extractor's word lists cannot decide: sentences of the 7 dev
conversations' stores (turns, observations, mem0-style text) that are not small talk by the word lists,
not questions, and hold no name, number or date (those stay facts whatever a classifier says). Seeded,
per conversation. Only references are committed (LoCoMo is CC BY-NC): ``<kind>:<sample>:<entry id>#<n>``,
the ``n``-th sentence of the entry as :func:`memrefine_edge.text._facts.sentence_scans` splits it, resolved at
run time by importing the store again. Split by conversation as the judge's pairs: conv-26, conv-30,
conv-41, conv-42 tune; conv-43, conv-44, conv-47 test. A label is ``fact`` or ``small_talk`` by rule 1 of
../shared/docs/judge-labelling.md.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench" / "judge_labels"))

from pairs import TEST, entries  # noqa: E402  (the judge's pairs: same stores, same split)

from memrefine_edge.text import extract, is_filler, sentence_scans  # noqa: E402

SENTENCES = HERE / "sentences.jsonl"
SAMPLES = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43", "conv-44", "conv-47")
PER_KIND = {"turns": 100, "observations": 15, "text": 15}
LABELS = ("fact", "small_talk")


def candidate_sentences(text: str) -> list[tuple[int, str, bool]]:
    """Each sentence of ``text`` as the fact extractor splits it, ``(index, sentence, undecided)``.

    ``undecided``: the word lists cannot tell it from small talk (not small talk by them, not a question,
    no name, number or date): the sentences the classifier decides.
    """
    out = []
    for n, (sentence, _filler, _words) in enumerate(sentence_scans(text)):
        f = extract(sentence, classify=False)
        undecided = (not is_filler(sentence, classify=False) and not sentence.rstrip().endswith("?")
                     and not (f.names or f.numbers or f.dates))
        out.append((n, sentence, undecided))
    return out


def resolve(ref: str) -> tuple[str, str]:
    """``(sentence, the whole entry)`` of a reference."""
    head, n = ref.rsplit("#", 1)
    kind, sample, entry_id = head.split(":", 2)
    content = entries(kind, sample)[entry_id]
    return candidate_sentences(content)[int(n)][1], content


def draw() -> None:
    rows = []
    rng = random.Random(20261207)
    for sample in SAMPLES:
        for kind, k in PER_KIND.items():
            pool = [f"{kind}:{sample}:{eid}#{n}" for eid, content in entries(kind, sample).items()
                    for n, (_i, _s, candidate) in enumerate(candidate_sentences(content)) if candidate]
            for ref in sorted(rng.sample(pool, min(k, len(pool)))):
                rows.append({"id": ref, "sample": sample, "kind": kind,
                             "split": "test" if sample in TEST else "tune"})
    SENTENCES.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    print(f"wrote {len(rows)} sentences to {SENTENCES.relative_to(REPO)}")


def show(out: str) -> None:
    with open(out, "w", encoding="utf-8") as fh:
        for r in map(json.loads, SENTENCES.read_text().splitlines()):
            sentence, content = resolve(r["id"])
            fh.write(json.dumps({"id": r["id"], "sentence": sentence, "entry": content}, ensure_ascii=False) + "\n")


def _read(path: Path) -> dict[str, str]:
    out = {}
    for r in map(json.loads, path.read_text().splitlines()):
        if r["label"] not in LABELS:
            raise SystemExit(f"{path.name}: {r['id']}: label {r['label']!r} is not one of {LABELS}")
        out[r["id"]] = r["label"]
    return out


def agree(a: str, b: str) -> dict[str, float]:
    la, lb = _read(Path(a)), _read(Path(b))
    both = sorted(set(la) & set(lb))
    same = sum(la[i] == lb[i] for i in both)
    pa = sum(la[i] == "fact" for i in both) / len(both)
    pb = sum(lb[i] == "fact" for i in both) / len(both)
    chance = pa * pb + (1 - pa) * (1 - pb)
    kappa = (same / len(both) - chance) / (1 - chance)
    res = {"sentences": len(both), "agreed": same, "agreement": round(same / len(both), 4),
           "cohen_kappa": round(kappa, 4)}
    print(json.dumps(res))
    return res


def final() -> None:
    la, lb = _read(HERE / "labels_a.jsonl"), _read(HERE / "labels_b.jsonl")
    settled = {r["id"]: r for r in map(json.loads, (HERE / "settled.jsonl").read_text().splitlines())}
    rows = []
    for r in map(json.loads, SENTENCES.read_text().splitlines()):
        i = r["id"]
        if la[i] == lb[i]:
            label, how = la[i], "agreed"
        elif i in settled:
            label, how = settled[i]["label"], "settled"
        else:
            raise SystemExit(f"{i}: the labellings disagree and settled.jsonl has no label for it")
        rows.append({**r, "label": label, "how": how})
    (HERE / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    print(f"wrote {len(rows)} labels")


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "draw":
        draw()
    elif cmd == "show" and len(sys.argv) == 3:
        show(sys.argv[2])
    elif cmd == "agree" and len(sys.argv) == 4:
        agree(sys.argv[2], sys.argv[3])
    elif cmd == "final":
        final()
    else:
        raise SystemExit(__doc__)
