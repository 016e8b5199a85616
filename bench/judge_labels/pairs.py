"""Labelled judge pairs drawn from what the compressor proposes: draw them, show their text, check labels.

    python bench/judge_labels/pairs.py draw          # writes bench/judge_labels/pairs.jsonl (ids only)
    python bench/judge_labels/pairs.py show OUT.jsonl  # the pairs with their text, for labelling (never commit)
    python bench/judge_labels/pairs.py agree A.jsonl B.jsonl   # agreement of two independent labellings
    python bench/judge_labels/pairs.py final          # labels.jsonl from labels_a, labels_b and settled

Pairs come from the three store kinds (turns, observations, the mem0-style text stores) of the 7 dev
conversations: each entry's 8 nearest neighbours under the default encoder (the candidates the pair heap
proposes), sampled evenly over similarity bands, seeded. Only references are committed (LoCoMo is CC BY-NC):
``<kind>:<sample>:<entry id>``, resolved at run time by importing the store again (importers are
deterministic). Split by conversation: conv-26, conv-30, conv-41, conv-42 tune; conv-43, conv-44, conv-47 test.
Labels follow ../shared/docs/judge-labelling.md: ``ideal``, ``acceptable``, ``fact_losing``.
"""

from __future__ import annotations

import json
import os
import random
import sys
from functools import lru_cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from memrefine_edge.eval._harness import STORE_KINDS as KINDS  # noqa: E402  (the evaluation's three store kinds)

HERE = Path(__file__).resolve().parent
PAIRS = HERE / "pairs.jsonl"
TEST = ("conv-43", "conv-44", "conv-47")
BANDS = ((-1.0, 0.4), (0.4, 0.5), (0.5, 0.6), (0.6, 0.7), (0.7, 0.8), (0.8, 1.01))
PER_BAND = 6
ACTIONS = ("delete_a", "delete_b", "delete_any", "merge", "preserve")


def _locomo() -> Path:
    env = os.environ.get("MEMREFINE_LOCOMO")
    return Path(env) if env else REPO.parent / "shared" / "data" / "locomo"


@lru_cache(maxsize=None)
def entries(kind: str, sample: str) -> dict[str, str]:
    """``{entry id: content}`` of one store, imported as ``memrefine import`` does."""
    from memrefine_edge.store import parse_file

    if kind == "text":
        parsed = parse_file(_locomo() / "mem0-style-stores" / f"{sample}.txt", format="text")
    else:
        parsed = parse_file(_locomo() / "locomo-dev.json", format=KINDS[kind], sample_id=sample)
    return {e.id: e.content for e in parsed[0]}


def resolve(ref: str) -> str:
    kind, sample, entry_id = ref.split(":", 2)
    return entries(kind, sample)[entry_id]


def outcome(action: str, label: dict) -> tuple[bool, bool, bool]:
    """Whether ``action`` (``delete_a``/``delete_b``/``merge``/``preserve``) is the label's ideal action, an
    acceptable one and a fact-losing one; an ideal, acceptable or fact-losing ``delete_any`` counts for either
    delete."""
    def listed(actions: list[str]) -> bool:
        return action in actions or (action.startswith("delete") and "delete_any" in actions)

    ideal = label["ideal"]
    return (action == ideal or (ideal == "delete_any" and action.startswith("delete")),
            listed(label["acceptable"]), listed(label["fact_losing"]))


def auc(scores: list[float], positive: list[bool]) -> float | None:
    """Area under the ROC curve of ``scores`` for ``positive`` (ties count half), to 4 decimals.

    None when one class is empty.
    """
    pos = [s for s, y in zip(scores, positive, strict=True) if y]
    neg = [s for s, y in zip(scores, positive, strict=True) if not y]
    if not pos or not neg:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return round(wins / (len(pos) * len(neg)), 4)


def draw() -> None:
    import numpy as np

    from memrefine_edge.backends import OnnxEncoder

    encoder = OnnxEncoder()
    samples = [s["sample_id"] for s in json.loads((_locomo() / "locomo-dev.json").read_text())]
    out, n = [], 0
    for kind in KINDS:
        for sample in samples:
            store = entries(kind, sample)
            ids = list(store)
            vecs = encoder.embed([store[i] for i in ids])
            sims = vecs @ vecs.T
            np.fill_diagonal(sims, -2.0)
            cands = set()
            for i in range(len(ids)):
                for j in np.argsort(-sims[i], kind="stable")[:8]:
                    cands.add((min(i, int(j)), max(i, int(j))))
            rng = random.Random(f"{kind}-{sample}")
            for lo, hi in BANDS:
                band = sorted(p for p in cands if lo <= sims[p] < hi)
                for i, j in rng.sample(band, min(PER_BAND, len(band))):
                    n += 1
                    out.append({"id": f"jp-{n:04d}", "kind": kind, "sample": sample,
                                "a": f"{kind}:{sample}:{ids[i]}", "b": f"{kind}:{sample}:{ids[j]}",
                                "similarity": round(float(sims[i, j]), 4),
                                "split": "test" if sample in TEST else "tune"})
    PAIRS.write_text("".join(json.dumps(r) + "\n" for r in out))
    print(f"wrote {len(out)} pairs to {PAIRS.relative_to(REPO)}")


def show(dest: Path) -> None:
    rows = [json.loads(line) for line in PAIRS.read_text().splitlines()]
    with open(dest, "w") as fh:
        for r in rows:
            fh.write(json.dumps({"id": r["id"], "similarity": r["similarity"], "a": resolve(r["a"]),
                                 "b": resolve(r["b"])}, ensure_ascii=False) + "\n")
    print(f"wrote {len(rows)} pairs with text to {dest} (LoCoMo text: never commit it)")


def _accepts(label: dict, action: str) -> bool:
    """Whether ``label`` accepts ``action`` (an ideal action of another labelling): a one-side delete
    is accepted by an accepted ``delete_any``; ``delete_any`` (either side may go) only when both
    deletes are."""
    ok = label["acceptable"]
    if action == "delete_any":
        return "delete_any" in ok or {"delete_a", "delete_b"} <= set(ok)
    return action in ok or (action.startswith("delete") and "delete_any" in ok)


def agreement(la: dict[str, dict], lb: dict[str, dict], ids: list[str]) -> dict:
    """Agreement of two labellings on ``ids``: the ideal action; the ideal with the three deletes as one
    action; the first labelling's ideal acceptable to the second (and the other way round)."""
    n = len(ids)
    coarse = lambda x: "delete" if x.startswith("delete") else x  # noqa: E731
    same = sum(la[i]["ideal"] == lb[i]["ideal"] for i in ids)
    deletes = sum(coarse(la[i]["ideal"]) == coarse(lb[i]["ideal"]) for i in ids)
    a_ok = sum(_accepts(lb[i], la[i]["ideal"]) for i in ids)
    b_ok = sum(_accepts(la[i], lb[i]["ideal"]) for i in ids)
    share = lambda k: round(k / max(1, n), 4)  # noqa: E731
    return {"pairs": n, "ideal": same, "ideal_rate": share(same), "deletes_as_one": deletes,
            "deletes_as_one_rate": share(deletes), "a_ideal_acceptable_to_b": a_ok,
            "a_ideal_acceptable_to_b_rate": share(a_ok), "b_ideal_acceptable_to_a": b_ok,
            "b_ideal_acceptable_to_a_rate": share(b_ok)}


def agree(path_a: Path, path_b: Path) -> None:
    la = {r["id"]: r for r in map(json.loads, path_a.read_text().splitlines())}
    lb = {r["id"]: r for r in map(json.loads, path_b.read_text().splitlines())}
    both = sorted(set(la) & set(lb))
    g = agreement(la, lb, both)
    print(f"{len(both)} pairs labelled twice; ideal action agrees on {g['ideal']} ({g['ideal_rate']:.1%}); "
          f"{g['deletes_as_one']} ({g['deletes_as_one_rate']:.1%}) with the three deletes as one action; "
          f"the first labelling's ideal is acceptable to the second on {g['a_ideal_acceptable_to_b']} "
          f"({g['a_ideal_acceptable_to_b_rate']:.1%}), the second's to the first on {g['b_ideal_acceptable_to_a']} "
          f"({g['b_ideal_acceptable_to_a_rate']:.1%})")


def final() -> None:
    """``labels.jsonl``: the agreed ideal where both labellings agree, the settled label where they did not.

    Where they agree, ``acceptable`` is what both accept (the ideal always) and ``fact_losing`` what either
    calls fact-losing: the stricter reading of the two.
    """
    load = lambda name: {r["id"]: r for r in map(json.loads, (HERE / name).read_text().splitlines())}  # noqa: E731
    la, lb, settled = load("labels_a.jsonl"), load("labels_b.jsonl"), load("settled.jsonl")
    pairs = [json.loads(line) for line in PAIRS.read_text().splitlines()]
    out = []
    for pair in pairs:
        a, b = la[pair["id"]], lb[pair["id"]]
        if a["ideal"] == b["ideal"]:
            losing = sorted(set(a["fact_losing"]) | set(b["fact_losing"]))
            ok = sorted((set(a["acceptable"]) & set(b["acceptable"]) | {a["ideal"]}) - set(losing))
            label = {"ideal": a["ideal"], "acceptable": ok, "fact_losing": losing, "agreed": True}
        else:
            s = settled[pair["id"]]
            label = {"ideal": s["ideal"], "acceptable": sorted(s["acceptable"]),
                     "fact_losing": sorted(s["fact_losing"]), "agreed": False, "settled_by_rule": s["rule"]}
        out.append({"id": pair["id"], "split": pair["split"], "kind": pair["kind"], **label})
    (HERE / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in out))
    agreed = sum(r["agreed"] for r in out)
    print(f"wrote {len(out)} labels ({agreed} agreed, {len(out) - agreed} settled) to labels.jsonl")


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "draw":
        draw()
    elif cmd == "show":
        show(Path(sys.argv[2]))
    elif cmd == "final":
        final()
    elif cmd == "agree":
        agree(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        print(__doc__)
        raise SystemExit(2)
