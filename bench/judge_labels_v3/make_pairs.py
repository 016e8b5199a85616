"""Judge pairs of the third label set, drawn from the synthetic stores in ``sources/`` and from ``swaps.jsonl``.

    python bench/judge_labels_v3/make_pairs.py           # writes bench/judge_labels_v3/pairs.jsonl
    python bench/judge_labels_v3/make_pairs.py --check   # fails if pairs.jsonl differs from what it would write

Store pairs are proposed the way the pair heap proposes them: each entry's 8 nearest neighbours under the
default encoder, sampled evenly over six similarity bands (``PER_BAND`` a band, seeded by the store's name),
as ``bench/judge_labels/pairs.py`` draws the first label set. Every pair of the candidates that the store's
own metadata marks as an update (``metadata.supersedes``: the newer entry replaces the older's value of the
same attribute; ``metadata.corrects``: it says the older was wrong) is added too, so that supersession can be
studied; ``drawn`` says which rule took a pair (``band`` or ``relation``), ``relation`` and ``newer`` name the
update where there is one. Swap pairs (``swaps.jsonl``, hand-written) are all taken. The side that comes
first is seeded.

The whole set is a ``test`` part: nothing may be fitted or chosen on it, and a judge is scored on it once.
The text is ours, so the pairs carry it.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))
PAIRS = HERE / "pairs.jsonl"
SOURCES = HERE / "sources"
SWAPS = HERE / "swaps.jsonl"
BANDS = ((-1.0, 0.4), (0.4, 0.5), (0.5, 0.6), (0.6, 0.7), (0.7, 0.8), (0.8, 1.01))
PER_BAND = 5
NEIGHBOURS = 8


def load(name: str) -> list[dict]:
    """A source store's entries, read with the product's ``jsonl`` importer (so the files stay importable)."""
    from memrefine_edge.store import parse_file

    entries, _ = parse_file(SOURCES / f"{name}.jsonl", format="jsonl")
    return [{"id": e.id, "content": e.content, "time": e.timestamps[0] if e.timestamps else None,
             "supersedes": list(e.metadata.get("supersedes", [])), "corrects": list(e.metadata.get("corrects", []))}
            for e in entries]


def build() -> list[dict]:
    import numpy as np

    from memrefine_edge.backends import OnnxEncoder

    encoder = OnnxEncoder()
    out: list[dict] = []
    for path in sorted(SOURCES.glob("*.jsonl")):
        name = path.stem
        store = load(name)
        vecs = np.asarray(encoder.embed([e["content"] for e in store]))
        sims = vecs @ vecs.T
        np.fill_diagonal(sims, -2.0)
        cands = set()
        for i in range(len(store)):
            for j in np.argsort(-sims[i], kind="stable")[:NEIGHBOURS]:
                cands.add((min(i, int(j)), max(i, int(j))))
        index = {e["id"]: k for k, e in enumerate(store)}
        relation = {}  # (older, newer) -> kind
        for k, e in enumerate(store):
            for kind in ("supersedes", "corrects"):
                for old in e[kind]:
                    relation[(min(index[old], k), max(index[old], k))] = (kind, k)
        rng = random.Random(f"v3-{name}")
        chosen: list[tuple[int, int]] = []
        for lo, hi in BANDS:
            band = sorted(p for p in cands if lo <= sims[p] < hi)
            chosen += rng.sample(band, min(PER_BAND, len(band)))
        drawn = dict.fromkeys(chosen, "band")
        for p in sorted(relation):
            if p in cands and p not in drawn:
                drawn[p] = "relation"
        for (i, j), how in drawn.items():
            if rng.random() < 0.5:
                i, j = j, i
            row = {"source": name, "kind": name.split("_")[0], "a_id": store[i]["id"], "b_id": store[j]["id"],
                   "a": store[i]["content"], "b": store[j]["content"], "a_time": store[i]["time"],
                   "b_time": store[j]["time"], "similarity": round(float(sims[i, j]), 4), "drawn": how}
            rel = relation.get((min(i, j), max(i, j)))
            if rel:
                row["relation"] = rel[0]
                row["newer"] = "a" if rel[1] == i else "b"
            row["split"] = "test"
            out.append(row)
    generated = [json.loads(line) for line in SWAPS.read_text(encoding="utf-8").splitlines() if line.strip()]
    rng = random.Random("v3-swaps")
    for r in generated:  # which side comes first, seeded as for the stores
        if rng.random() < 0.5:
            r["a"], r["b"] = r["b"], r["a"]
    vecs = np.asarray(encoder.embed([t for r in generated for t in (r["a"], r["b"])]))
    for n, r in enumerate(generated):
        out.append({"source": "swaps", "kind": "swaps", "generator": r["generator"], "a": r["a"], "b": r["b"],
                    "similarity": round(float(vecs[2 * n] @ vecs[2 * n + 1]), 4), "drawn": "generated",
                    "split": "test"})
    return [{"id": f"v3-{n:04d}", **r} for n, r in enumerate(out, 1)]


def main(argv: list[str]) -> int:
    rows = build()
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    if "--check" in argv:
        same = PAIRS.exists() and PAIRS.read_text() == text
        print("pairs.jsonl is up to date" if same else "pairs.jsonl differs from the sources")
        return 0 if same else 1
    PAIRS.write_text(text)
    print(f"wrote {len(rows)} pairs to {PAIRS.relative_to(REPO)}, all of them test")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
