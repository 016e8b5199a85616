"""What the synthetic label sets (``bench/judge_labels_v2/``, ``_v3/``, ``_v4/``) share: pairs drawn from
their source stores as the pair heap proposes them, and, from two labelling passes, their agreement and the
final labels. The sets that are a test part only (``_v3/``, ``_v4/``) run whole through
:func:`test_set_pairs_main` and :func:`test_set_labels_main`.

Store pairs: each entry's ``NEIGHBOURS`` nearest neighbours under the default encoder, ``PER_BAND`` sampled
from each cosine band of ``BANDS`` (seeded by the set's tag and the store's name), then every candidate
pair that the store's metadata marks as an update (``supersedes``: the newer entry replaces the older's
value of the same attribute; ``corrects``: it says the older was wrong); ``drawn`` says which rule took a
pair (``band`` or ``relation``), ``relation`` and ``newer`` name the update where there is one. The side
that comes first is seeded.

Final labels: the agreed label where the passes agree (``acceptable``: what both accept, the ideal always;
``fact_losing``: what either calls fact-losing, the stricter reading), else the settled one
(``settled.jsonl``, with the rule that decided); ``supersedes`` from either pass. The scoring
(``pairs.py outcome``) reads ``delete_any`` in ``fact_losing`` as *both* deletes losing a fact, so it is
kept there only when both are.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pairs import agreement  # the first set's measure

BANDS = ((-1.0, 0.4), (0.4, 0.5), (0.5, 0.6), (0.6, 0.7), (0.7, 0.8), (0.8, 1.01))
PER_BAND = 5
NEIGHBOURS = 8


def load_store(path: Path) -> list[dict]:
    """A source store's entries, read with the product's ``jsonl`` importer (so the files stay importable)."""
    from memrefine_edge.store import parse_file

    entries, _ = parse_file(path, format="jsonl")
    return [{"id": e.id, "content": e.content, "time": e.timestamps[0] if e.timestamps else None,
             "supersedes": list(e.metadata.get("supersedes", [])), "corrects": list(e.metadata.get("corrects", []))}
            for e in entries]


def store_pairs(sources: Path, tag: str, split_of: Callable[[str], str], encoder: Any) -> list[dict]:
    """The pairs of every store in ``sources`` (see the module docstring); ``split_of(store name)``."""
    import numpy as np

    out: list[dict] = []
    for path in sorted(sources.glob("*.jsonl")):
        name = path.stem
        store = load_store(path)
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
        rng = random.Random(f"{tag}-{name}")
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
            row["split"] = split_of(name)
            out.append(row)
    return out


def swap_pairs(generated: list[dict], split_of: Callable[[str], str], encoder: Any) -> list[dict]:
    """Generated swap pairs (``generator``, ``a``, ``b``) as pair rows; ``split_of(generator)``."""
    import numpy as np

    vecs = np.asarray(encoder.embed([t for r in generated for t in (r["a"], r["b"])]))
    return [{"source": "swaps", "kind": "swaps", "generator": r["generator"], "a": r["a"], "b": r["b"],
             "similarity": round(float(vecs[2 * n] @ vecs[2 * n + 1]), 4), "drawn": "generated",
             "split": split_of(r["generator"])} for n, r in enumerate(generated)]


def write_pairs(rows: list[dict], tag: str, path: Path, argv: list[str]) -> tuple[int, list[dict]]:
    """Number ``rows`` (``<tag>-0001`` ...) and write them to ``path``, or with ``--check`` only compare;
    the exit code and the numbered rows."""
    rows = [{"id": f"{tag}-{n:04d}", **r} for n, r in enumerate(rows, 1)]
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    if "--check" in argv:
        same = path.exists() and path.read_text() == text
        print("pairs.jsonl is up to date" if same else "pairs.jsonl differs from the sources")
        return (0 if same else 1), rows
    path.write_text(text)
    return 0, rows


def _load(folder: Path, name: str) -> dict[str, dict]:
    return {r["id"]: r for r in map(json.loads, (folder / name).read_text(encoding="utf-8").splitlines())}


def _pairs(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "pairs.jsonl").read_text(encoding="utf-8").splitlines()]


def agree(folder: Path, tag: str, parts: tuple[str, ...] = ()) -> dict:
    """The agreement of ``labels_a.jsonl`` and ``labels_b.jsonl`` in ``folder``: all, each of ``parts``
    (splits), without the swaps, the updates and each kind; printed, and written to
    ``bench/results/judge_labels_<tag>_agreement.json``."""
    la, lb = _load(folder, "labels_a.jsonl"), _load(folder, "labels_b.jsonl")
    rows = _pairs(folder)
    groups: dict[str, list[str]] = {"all": [r["id"] for r in rows]}
    for part in parts:
        groups[part] = [r["id"] for r in rows if r["split"] == part]
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

    write_json(folder.parents[1] / "bench" / "results" / f"judge_labels_{tag}_agreement.json",
               {**out, "command": f"python bench/judge_labels_{tag}/labels.py agree"})
    return out


def _losing(label: dict) -> set[str]:
    """``label["fact_losing"]`` with ``delete_any`` only where both single-side deletes are in it."""
    out = set(label["fact_losing"])
    if not {"delete_a", "delete_b"} <= out:
        out.discard("delete_any")
    return out


def final(folder: Path) -> list[dict]:
    """Write ``labels.jsonl`` in ``folder`` (see the module docstring); the labels."""
    la, lb, settled = _load(folder, "labels_a.jsonl"), _load(folder, "labels_b.jsonl"), _load(folder, "settled.jsonl")
    out = []
    for pair in _pairs(folder):
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
    (folder / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in out), encoding="utf-8")
    agreed = sum(r["agreed"] for r in out)
    print(f"wrote {len(out)} labels ({agreed} agreed, {len(out) - agreed} settled) to labels.jsonl")
    return out


def print_ideals(rows: list[dict], key: str, values: tuple[str, ...] | None = None) -> None:
    """One line per value of ``rows``' ``key`` (in ``values``' order, else as met): the pairs and their
    ideal actions."""
    order = ("delete_a", "delete_b", "delete_any", "merge", "preserve")
    for value in values or tuple(dict.fromkeys(r[key] for r in rows)):
        c = Counter(r["ideal"] for r in rows if r[key] == value)
        print(f"  {value}: {sum(c.values())} pairs, " + ", ".join(f"{k} {c[k]}" for k in order))


# --- the sets that are a test part only (the third, the fourth) -------------------------------------


def test_set_pairs(folder: Path, tag: str) -> list[dict]:
    """The pairs of a set that is a test part only: its stores' pairs (:func:`store_pairs`) and every swap
    of ``swaps.jsonl`` (hand-written; which side comes first seeded by ``<tag>-swaps``), all ``test``."""
    from memrefine_edge.backends import OnnxEncoder

    encoder = OnnxEncoder()
    rows = store_pairs(folder / "sources", tag, lambda name: "test", encoder)
    text = (folder / "swaps.jsonl").read_text(encoding="utf-8")
    generated = [json.loads(line) for line in text.splitlines() if line.strip()]
    rng = random.Random(f"{tag}-swaps")
    for r in generated:  # which side comes first, seeded as for the stores
        if rng.random() < 0.5:
            r["a"], r["b"] = r["b"], r["a"]
    return rows + swap_pairs(generated, lambda g: "test", encoder)


def test_set_pairs_main(folder: Path, tag: str, argv: list[str]) -> int:
    """``make_pairs.py`` of such a set: write ``pairs.jsonl`` (``--check``: only compare); the exit code."""
    path = folder / "pairs.jsonl"
    code, rows = write_pairs(test_set_pairs(folder, tag), tag, path, argv)
    if "--check" not in argv:
        print(f"wrote {len(rows)} pairs to {path.relative_to(folder.parents[1])}, all of them test")
    return code


def test_set_labels_main(folder: Path, tag: str, argv: list[str]) -> int:
    """``labels.py`` of such a set: ``agree`` (:func:`agree`) or ``final`` (:func:`final`, then the ideal
    actions by kind and split); the exit code (2: neither asked)."""
    cmd = argv[0] if argv else ""
    if cmd == "agree":
        agree(folder, tag, ())
    elif cmd == "final":
        rows = final(folder)
        print_ideals(rows, "kind")
        print_ideals(rows, "split")
    else:
        return 2
    return 0
