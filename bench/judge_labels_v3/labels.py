"""The third label set's two labelling passes: their agreement, and the final labels.

    python bench/judge_labels_v3/labels.py agree   # agreement of labels_a and labels_b, by part and kind
    python bench/judge_labels_v3/labels.py final   # labels.jsonl from labels_a, labels_b and settled

The agreement is measured as for the first set (``bench/judge_labels/pairs.py agree``): the ideal action;
the ideal with ``delete_a``/``delete_b``/``delete_any`` as one action; one pass's ideal acceptable to the
other. ``agree`` also writes it to ``bench/results/judge_labels_v3_agreement.json``.

``final`` takes, pair by pair, the agreed label (``acceptable``: what both accept, the ideal always;
``fact_losing``: what either calls fact-losing, the stricter reading) or, where the passes disagree, the
label ``settled.jsonl`` gives (settled by the labelling rules; the rule that decided is recorded).
``supersedes`` (``a``/``b``: the newer entry of an update, read from the text) is kept from either pass.

The scoring (``bench/judge_labels/pairs.py outcome``) reads ``delete_any`` in ``fact_losing`` as *both*
deletes losing a fact, so it is kept there only when both are. Each pass was made in two halves by two
annotators (``labels_a.jsonl`` = A's halves, ``labels_b.jsonl`` = B's), none of whom saw another pass.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench" / "judge_labels"))

from pairs import agreement  # noqa: E402  (the first set's measure)

PAIRS = HERE / "pairs.jsonl"


def _load(name: str) -> dict[str, dict]:
    return {r["id"]: r for r in map(json.loads, (HERE / name).read_text(encoding="utf-8").splitlines())}


def pairs() -> list[dict]:
    """The pairs, in file order."""
    return [json.loads(line) for line in PAIRS.read_text(encoding="utf-8").splitlines()]


def agree() -> dict:
    la, lb = _load("labels_a.jsonl"), _load("labels_b.jsonl")
    rows = pairs()
    groups: dict[str, list[str]] = {"all": [r["id"] for r in rows]}
    groups["all without swaps"] = [r["id"] for r in rows if r["kind"] != "swaps"]
    groups["updates (supersedes marked by either pass)"] = [
        r["id"] for r in rows if "supersedes" in la[r["id"]] or "supersedes" in lb[r["id"]]]
    for kind in dict.fromkeys(r["kind"] for r in rows):
        groups[f"kind {kind}"] = [r["id"] for r in rows if r["kind"] == kind]
    out = {name: agreement(la, lb, ids) for name, ids in groups.items()}
    kinds = {r["id"]: r["kind"] for r in rows}
    pattern: Counter[str] = Counter(f"{kinds[i]}: A {la[i]['ideal']}, B {lb[i]['ideal']}" for i in groups["all"]
                                    if la[i]["ideal"] != lb[i]["ideal"])
    out["disagreements"] = dict(pattern.most_common())
    print(f"{'part':<44} pairs  ideal   deletes as one  A's ideal ok to B  B's ok to A")
    for name, g in out.items():
        if name == "disagreements":
            continue
        print(f"{name:<44} {g['pairs']:>5}  {g['ideal_rate']:>6.1%}  {g['deletes_as_one_rate']:>14.1%}  "
              f"{g['a_ideal_acceptable_to_b_rate']:>17.1%}  {g['b_ideal_acceptable_to_a_rate']:>11.1%}")
    for k, n in list(pattern.most_common())[:8]:
        print(f"  {n:>3}  {k}")
    from memrefine_edge.eval._report import write_json

    write_json(REPO / "bench" / "results" / "judge_labels_v3_agreement.json",
               {**out, "command": "python bench/judge_labels_v3/labels.py agree"})
    return out


def _losing(label: dict) -> set[str]:
    """``label["fact_losing"]`` with ``delete_any`` only where both single-side deletes are in it."""
    out = set(label["fact_losing"])
    if not {"delete_a", "delete_b"} <= out:
        out.discard("delete_any")
    return out


def final() -> None:
    la, lb, settled = _load("labels_a.jsonl"), _load("labels_b.jsonl"), _load("settled.jsonl")
    out = []
    for pair in pairs():
        a, b = la[pair["id"]], lb[pair["id"]]
        if a["ideal"] == b["ideal"]:
            losing = sorted(_losing(a) | _losing(b))
            ok = sorted((set(a["acceptable"]) & set(b["acceptable"]) | {a["ideal"]}) - set(losing))
            label = {"ideal": a["ideal"], "acceptable": ok, "fact_losing": losing, "agreed": True}
        else:
            s = settled[pair["id"]]
            label = {"ideal": s["ideal"], "acceptable": sorted(s["acceptable"]),
                     "fact_losing": sorted(_losing(s)), "agreed": False, "settled_by_rule": s["rule"]}
        newer = a.get("supersedes") or b.get("supersedes")
        extra = {"supersedes": newer} if newer else {}
        out.append({"id": pair["id"], "split": pair["split"], "kind": pair["kind"], "source": pair["source"],
                    **label, **extra})
    (HERE / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in out), encoding="utf-8")
    agreed = sum(r["agreed"] for r in out)
    print(f"wrote {len(out)} labels ({agreed} agreed, {len(out) - agreed} settled) to labels.jsonl")
    order = ("delete_a", "delete_b", "delete_any", "merge", "preserve")
    for kind in dict.fromkeys(r["kind"] for r in out):
        c = Counter(r["ideal"] for r in out if r["kind"] == kind)
        print(f"  {kind}: {sum(c.values())} pairs, " + ", ".join(f"{k} {c[k]}" for k in order))
    c = Counter(r["ideal"] for r in out)
    print(f"  all: {len(out)} pairs, " + ", ".join(f"{k} {c[k]}" for k in order))


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "agree":
        agree()
    elif cmd == "final":
        final()
    else:
        print(__doc__)
        raise SystemExit(2)
