"""Train the small-talk classifier on the *tune* sentences (never on test); score test with ``--test``.

    python bench/smalltalk/train.py          # cross-validate, fit, write the weights
    python bench/smalltalk/train.py --test   # the same, then score the test sentences (once per version)

A logistic regression (:mod:`memrefine_edge.text._smalltalk`): one weight per word and per first word seen
at least twice in the training sentences, and the standardised shape features. The L2 penalty and the
decision threshold are chosen by leave-one-conversation-out cross-validation on the tune conversations:
the setting that finds the most small talk while calling at most ``MAX_FACT_DROPPED`` of the fact
sentences small talk (a fact sentence called small talk can be dropped from a merge or let its entry be
deleted, so this rate is what the classifier may cost). Writes ``memrefine_edge/data/smalltalk_weights.json``
and ``bench/results/smalltalk_training.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

from sentences import resolve  # noqa: E402

from memrefine_edge import __version__  # noqa: E402
from memrefine_edge.eval._report import machine_info, write_json  # noqa: E402
from memrefine_edge.text import SmallTalkModel  # noqa: E402
from memrefine_edge.text._smalltalk import DENSE, sentence_features

L2_GRID = (0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0)
THRESHOLDS = tuple(round(0.5 + 0.025 * i, 3) for i in range(19))  # 0.5 .. 0.95
MAX_FACT_DROPPED = 0.05
WEIGHTS = REPO / "memrefine_edge" / "data" / "smalltalk_weights.json"


def load(split: str) -> list[dict]:
    rows = [r for r in map(json.loads, (HERE / "labels.jsonl").read_text().splitlines()) if r["split"] == split]
    for r in rows:
        r["sentence"] = resolve(r["id"])[0]
    return rows


def fit(rows: list[dict], l2: float, *, iters: int = 3000, lr: float = 0.05) -> SmallTalkModel:
    """Weights from labelled rows (deterministic full-batch Adam)."""
    feats = [sentence_features(r["sentence"]) for r in rows]
    words = Counter(t for toks, _ in feats for t in set(toks))
    firsts = Counter(toks[0] for toks, _ in feats if toks)
    vocab = sorted(w for w, c in words.items() if c >= 2)
    first_vocab = sorted(w for w, c in firsts.items() if c >= 2)
    wi = {w: i for i, w in enumerate(vocab)}
    fi = {w: len(vocab) + i for i, w in enumerate(first_vocab)}
    nd = len(DENSE)
    dense = np.array([[d[k] for k in DENSE] for _, d in feats])
    mean = dense.mean(axis=0)
    scale = dense.std(axis=0)
    scale[scale < 1e-9] = 1.0
    x = np.zeros((len(rows), len(vocab) + len(first_vocab) + nd + 1))
    for n, (toks, _) in enumerate(feats):
        for t in set(toks):
            if t in wi:
                x[n, wi[t]] = 1.0
        if toks and toks[0] in fi:
            x[n, fi[toks[0]]] = 1.0
    x[:, -nd - 1:-1] = (dense - mean) / scale
    x[:, -1] = 1.0
    y = np.array([r["label"] == "small_talk" for r in rows], dtype=float)
    w = np.zeros(x.shape[1])
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    for t in range(1, iters + 1):
        p = 1.0 / (1.0 + np.exp(-(x @ w)))
        g = x.T @ (p - y) / len(rows)
        g[:-1] += l2 * w[:-1]
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        w -= lr * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
    return SmallTalkModel(
        words={k: round(float(w[i]), 5) for k, i in wi.items()},
        first={k: round(float(w[i]), 5) for k, i in fi.items()},
        dense={k: round(float(w[len(vocab) + len(first_vocab) + j]), 5) for j, k in enumerate(DENSE)},
        mean={k: round(float(mean[j]), 6) for j, k in enumerate(DENSE)},
        scale={k: round(float(scale[j]), 6) for j, k in enumerate(DENSE)},
        bias=round(float(w[-1]), 5), threshold=0.5)


def rates(probs: list[float], rows: list[dict], threshold: float) -> dict[str, float]:
    """Accuracy, the share of small talk found, and the share of fact sentences called small talk."""
    said = [p >= threshold for p in probs]
    talk = [r["label"] == "small_talk" for r in rows]
    n_talk = sum(talk) or 1
    n_fact = (len(rows) - sum(talk)) or 1
    return {"accuracy": round(sum(s == t for s, t in zip(said, talk, strict=True)) / len(rows), 4),
            "small_talk_found": round(sum(s and t for s, t in zip(said, talk, strict=True)) / n_talk, 4),
            "facts_called_small_talk": round(sum(s and not t for s, t in zip(said, talk, strict=True)) / n_fact, 4)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--test", action="store_true", help="score the test sentences with the fitted weights")
    args = ap.parse_args()
    rows = load("tune")
    convs = sorted({r["sample"] for r in rows})
    cv: dict[str, dict] = {}
    for l2 in L2_GRID:
        held = [r for conv in convs for r in rows if r["sample"] == conv]
        models = {conv: fit([r for r in rows if r["sample"] != conv], l2) for conv in convs}
        probs = [models[r["sample"]].probability(r["sentence"]) for r in held]
        for th in THRESHOLDS:
            cv[f"l2={l2:g} threshold={th:g}"] = {"l2": l2, "threshold": th, **rates(probs, held, th)}
    safe = [c for c in cv.values() if c["facts_called_small_talk"] <= MAX_FACT_DROPPED]
    chosen = max(safe, key=lambda c: (c["small_talk_found"], c["accuracy"], c["threshold"]))
    print(f"chose l2={chosen['l2']:g}, threshold={chosen['threshold']:g}: cross-validated small talk found "
          f"{chosen['small_talk_found']:.3f}, facts called small talk {chosen['facts_called_small_talk']:.3f}, "
          f"accuracy {chosen['accuracy']:.3f}")
    model = fit(rows, chosen["l2"])
    raw = {"words": model.words, "first": model.first, "dense": model.dense, "mean": model.mean,
           "scale": model.scale, "bias": model.bias, "threshold": chosen["threshold"],
           "trained_on": "bench/smalltalk tune split (" + ", ".join(convs) + ")", "sentences": len(rows),
           "cv": {k: chosen[k] for k in ("accuracy", "small_talk_found", "facts_called_small_talk")},
           "script": "bench/smalltalk/train.py"}
    WEIGHTS.write_text(json.dumps(raw, indent=0, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {WEIGHTS.relative_to(REPO)}")
    out = {"trained_on": "tune", "conversations": convs, "sentences": len(rows), "cv": cv, "chosen": chosen,
           "max_facts_called_small_talk": MAX_FACT_DROPPED, "machine": machine_info(__version__),
           "command": "python bench/smalltalk/train.py" + (" --test" if args.test else "")}
    if args.test:
        model = SmallTalkModel.from_dict(raw)
        test = load("test")
        out["test"] = {"sentences": len(test), "conversations": sorted({r["sample"] for r in test}),
                       **rates([model.probability(r["sentence"]) for r in test], test, model.threshold)}
        print(f"test: {out['test']}")
    write_json(REPO / "bench" / "results" / "smalltalk_training.json", out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
