"""Does a local GGUF model add to the judgement? Per-pair next-token scores of yes/no questions, and their table.

    python bench/judge_labels/llm_scores.py score --model smollm [--split test|tune|all] [--limit N]
    python bench/judge_labels/llm_scores.py table

``score`` asks one model, for each labelled pair (a, b), short questions it can answer with one token and
records P(yes) = p(yes tokens) / (p(yes tokens) + p(no tokens)) from the next-token distribution after the
model's own chat template, plus ``mass`` (how much of the distribution the yes/no tokens hold):

- form ``adds``: "Does Memory B state any fact that Memory A does not? Answer yes or no." asked both ways:
  ``p_yes_ab`` = b states a fact a lacks (b adds), ``p_yes_ba`` = a states a fact b lacks (a adds);
- form ``adds_fewshot``: the same question after four worked examples (written for this test, none from the
  labelled pairs or their source conversations);
- form ``same``: "Do Memory A and Memory B say the same thing (is one redundant)?": ``p_yes_ab`` only.

Rows hold numbers only (ids, probabilities, milliseconds; never the text) in
``bench/results/judge_llm/<model>.jsonl``, one per (pair, form); a rerun skips the rows already there.
The test split is scored first. ``table`` computes, per model and form, on the test split (tune for
reference): AUC of each score for "ideal is a delete" and for "ideal is preserve", the LLM-alone decision
rule's accuracy (threshold 0.5 and one chosen on tune), its fact-losing rate, and whether the scores add to
cosine in a logistic model fitted on tune. Writes bench/results/judge_llm_table.json and .md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

from pairs import PAIRS, auc, outcome, resolve  # noqa: E402

from memrefine_edge import __version__  # noqa: E402
from memrefine_edge.eval._report import machine_info, write_json  # noqa: E402

OUT = REPO / "bench" / "results" / "judge_llm"
TABLE = REPO / "bench" / "results" / "judge_llm_table"
#: model name -> GGUF file in models/ (the two Qwen files are optional entries of `memrefine models fetch`).
MODELS = {
    "smollm-135m": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "qwen-0.5b": "Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf",
    "qwen-1.5b": "Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf",
}
FORMS = ("adds", "same", "adds_fewshot")
SYSTEM = "You compare two notes from an assistant's memory about a user's life. Answer with one word: yes or no."
#: The questions come after both memories, so the three questions about one pair share its prompt up to them
#: (the KV cache evaluates the pair once, then only each question).
ADDS_B = "Does Memory B state any fact that Memory A does not? Answer yes or no."
ADDS_A = "Does Memory A state any fact that Memory B does not? Answer yes or no."
SAME_Q = "Do Memory A and Memory B say the same thing, so that one of them is redundant? Answer yes or no."
#: Worked examples for ``adds_fewshot`` (made up here; not from the labelled pairs or their conversations).
FEWSHOT = (
    ("Maria adopted a grey cat named Pixel in March.", "Maria has a cat called Pixel.", ADDS_B, "no"),
    ("Tom works as a nurse at the city hospital.", "Tom is a nurse and plays the cello on weekends.", ADDS_B, "yes"),
    ("Priya's brother lives in Toronto.", "Priya is moving to Lisbon next month.", ADDS_A, "yes"),
    ("Sam: Thanks, that sounds great!", "Sam: Great, thank you so much!", ADDS_A, "no"),
)


def _user(a: str, b: str, question: str) -> str:
    return f"Memory A: {a}\nMemory B: {b}\n\nQuestion: {question}"


def _messages(fewshot: bool, a: str, b: str, question: str) -> list[dict[str, str]]:
    msgs = [{"role": "system", "content": SYSTEM}]
    if fewshot:
        for xa, xb, xq, ans in FEWSHOT:
            msgs += [{"role": "user", "content": _user(xa, xb, xq)}, {"role": "assistant", "content": ans}]
    msgs.append({"role": "user", "content": _user(a, b, question)})
    return msgs


class Scorer:
    """One GGUF model answering yes/no: P(yes) over the first tokens of the yes and no spellings."""

    def __init__(self, path: Path, n_threads: int) -> None:
        from memrefine_edge.backends import LlamaModel

        self.model = LlamaModel(path, n_ctx=2048, n_threads=n_threads)
        self.model.load()
        self.yes = sorted(self._first_tokens(("yes", "Yes", " yes", " Yes", "YES")))
        self.no = sorted(self._first_tokens(("no", "No", " no", " No", "NO")))
        if set(self.yes) & set(self.no):
            raise SystemExit(f"yes and no share a first token: {set(self.yes) & set(self.no)}")

    def _first_tokens(self, words: tuple[str, ...]) -> set[int]:
        return {self.model.llm.tokenize(w.encode(), add_bos=False, special=False)[0] for w in words}

    def p_yes(self, messages: list[dict[str, str]]) -> tuple[float, float]:
        """(P(yes | yes or no), p(yes) + p(no)) for the next token after the chat's generation prompt."""
        lp = self.model.next_token_logprobs(self.model.tokenize(self.model.chat(messages)))
        py, pn = float(np.exp(lp[self.yes]).sum()), float(np.exp(lp[self.no]).sum())
        return py / max(py + pn, 1e-30), py + pn


def _pairs() -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    pairs = {r["id"]: r for r in map(json.loads, PAIRS.read_text().splitlines())}
    labels = {r["id"]: r for r in map(json.loads, (HERE / "labels.jsonl").read_text().splitlines())}
    return pairs, labels


def score(model: str, split: str, limit: int | None, every: int, n_threads: int, forms: list[str]) -> None:
    pairs, labels = _pairs()
    OUT.mkdir(parents=True, exist_ok=True)
    out = OUT / f"{model}.jsonl"
    done = set()
    if out.is_file():
        done = {(r["id"], r["form"]) for r in map(json.loads, out.read_text().splitlines()) if r}
    order = sorted(labels, key=lambda i: (labels[i]["split"] != "test", i))  # test first
    order = [i for i in order if split == "all" or labels[i]["split"] == split]
    order = order[::every]
    if limit:
        order = order[:limit]
    scorer = Scorer(REPO / "models" / MODELS[model], n_threads)
    t_start, n_new = time.perf_counter(), 0
    # adds and same share each pair's prompt up to the question; adds_fewshot (another fixed prefix, kept in
    # the KV cache across pairs) runs after them
    phases = [[f for f in ("adds", "same") if f in forms], [f for f in ("adds_fewshot",) if f in forms]]
    t_start, n_new = time.perf_counter(), 0
    with open(out, "a", encoding="utf-8") as fh:
        for phase in phases:
            for pid in order:
                todo = [f for f in phase if (pid, f) not in done]
                if not todo:
                    continue
                a, b = resolve(pairs[pid]["a"]), resolve(pairs[pid]["b"])
                for form in todo:
                    t0 = time.perf_counter()
                    row: dict[str, Any] = {"id": pid, "model": model, "form": form, "split": labels[pid]["split"]}
                    if form == "same":
                        row["p_yes_ab"], row["mass_ab"] = scorer.p_yes(_messages(False, a, b, SAME_Q))
                    else:
                        few = form == "adds_fewshot"
                        row["p_yes_ab"], row["mass_ab"] = scorer.p_yes(_messages(few, a, b, ADDS_B))
                        row["p_yes_ba"], row["mass_ba"] = scorer.p_yes(_messages(few, a, b, ADDS_A))
                    row["ms"] = round((time.perf_counter() - t0) * 1000, 1)
                    row["loadavg1"] = round(os.getloadavg()[0], 2)
                    for k in ("p_yes_ab", "p_yes_ba", "mass_ab", "mass_ba"):
                        if k in row:
                            row[k] = round(row[k], 6)
                    fh.write(json.dumps(row) + "\n")
                    fh.flush()
                    n_new += 1
                    if n_new % 50 == 0:
                        el = time.perf_counter() - t_start
                        print(f"{model}: {n_new} rows, {el / n_new:.2f} s/row", file=sys.stderr, flush=True)


# --- the table --------------------------------------------------------------------------------------------


def _decide(b_adds: float, a_adds: float, thr: float, len_a: int, len_b: int) -> str:
    """The LLM-alone rule: neither adds -> delete the shorter; only b adds -> delete_a; only a -> delete_b."""
    ba, aa = b_adds >= thr, a_adds >= thr
    if ba and aa:
        return "preserve"
    if ba:
        return "delete_a"
    if aa:
        return "delete_b"
    return "delete_a" if len_a <= len_b else "delete_b"


def _rule_metrics(rows: list[dict[str, Any]], labels: dict[str, dict[str, Any]], lengths: dict[str, tuple[int, int]],
                  thr: float) -> dict[str, Any]:
    hits = ok = losing = 0
    for r in rows:
        lab = labels[r["id"]]
        action = _decide(r["p_yes_ab"], r["p_yes_ba"], thr, *lengths[r["id"]])
        hit, acceptable, lost = outcome(action, lab)
        hits += hit
        ok += acceptable
        losing += lost
    n = max(1, len(rows))
    return {"threshold": round(thr, 3), "accuracy": round(hits / n, 4), "acceptable": round(ok / n, 4),
            "fact_losing": round(losing / n, 4), "n": len(rows)}


def _baseline_rules(ids: list[str], labels: dict[str, dict[str, Any]]) -> dict[str, Any]:
    out = {}
    for action in ("preserve", "merge"):
        hits = sum(labels[i]["ideal"] == action for i in ids)
        losing = sum(action in labels[i]["fact_losing"] for i in ids)  # (neither action is a delete)
        out[f"always_{action}"] = {"accuracy": round(hits / len(ids), 4), "fact_losing": round(losing / len(ids), 4)}
    return out


def _logit_fit(x: np.ndarray, y: np.ndarray, l2: float = 1e-2, steps: int = 3000) -> tuple[np.ndarray, np.ndarray,
                                                                                          np.ndarray]:
    """Logistic regression by gradient descent on standardised features: (weights, mean, scale)."""
    mu, sd = x.mean(0), x.std(0) + 1e-9
    z = np.c_[np.ones(len(x)), (x - mu) / sd]
    w = np.zeros(z.shape[1])
    for _ in range(steps):
        p = 1 / (1 + np.exp(-z @ w))
        w -= 0.5 * (z.T @ (p - y) / len(y) + l2 * np.r_[0, w[1:]])
    return w, mu, sd


def _logit_apply(w: np.ndarray, mu: np.ndarray, sd: np.ndarray, x: np.ndarray) -> np.ndarray:
    return np.c_[np.ones(len(x)), (x - mu) / sd] @ w


def _logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


def _features(rows: dict[str, dict[str, Any]], pid: str, sim: float) -> list[float]:
    r = rows[pid]
    f = [sim, _logit(r["p_yes_ab"])]
    if "p_yes_ba" in r:
        f += [_logit(r["p_yes_ba"])]
    return f


_WORD = re.compile(r"[a-z0-9']+")


KINDS = ("turns", "observations", "text")


def _text_features(a: str, b: str, sim: float, kind: str) -> list[float]:
    """A plain text-feature scorer's inputs: cosine, word Jaccard, containment both ways, log length ratio,
    log total length, and the store kind (one-hot)."""
    wa, wb = set(_WORD.findall(a.lower())), set(_WORD.findall(b.lower()))
    inter = len(wa & wb)
    return [sim, inter / max(1, len(wa | wb)), inter / max(1, len(wa)), inter / max(1, len(wb)),
            math.log((len(a) + 1) / (len(b) + 1)), math.log(len(a) + len(b) + 2)] + [float(kind == k) for k in KINDS]


def _auc_within_kind(scores: dict[str, float], target: dict[str, bool], ids: list[str],
                     kind: dict[str, str]) -> float | None:
    """AUC within each store kind, averaged weighted by pairs: what a score adds beyond telling kinds apart."""
    total, weight = 0.0, 0
    for k in KINDS:
        sub = [i for i in ids if kind[i] == k]
        area = auc([scores[i] for i in sub], [target[i] for i in sub])
        if area is not None:
            total, weight = total + area * len(sub), weight + len(sub)
    return round(total / weight, 4) if weight else None


def table(commands: list[str]) -> None:
    pairs, labels = _pairs()
    lengths, text_x = {}, {}
    for pid in labels:
        a, b = resolve(pairs[pid]["a"]), resolve(pairs[pid]["b"])
        lengths[pid] = (len(a), len(b))
        text_x[pid] = _text_features(a, b, float(pairs[pid]["similarity"]), pairs[pid]["kind"])
    is_del = {i: labels[i]["ideal"].startswith("delete") for i in labels}
    is_pre = {i: labels[i]["ideal"] == "preserve" for i in labels}
    sim = {i: float(pairs[i]["similarity"]) for i in labels}
    kind = {i: pairs[i]["kind"] for i in labels}
    result: dict[str, Any] = {
        "commands": commands,
        "machine": machine_info(__version__),
        "targets": {"delete": "ideal is delete_a, delete_b or delete_any", "preserve": "ideal is preserve"},
        "scores": {"p_yes_ab": "P(yes): b states a fact a lacks (form same: a and b say the same thing)",
                   "p_yes_ba": "P(yes): a states a fact b lacks",
                   "min_adds": "min(p_yes_ab, p_yes_ba): low when either side adds nothing",
                   "max_adds": "max(p_yes_ab, p_yes_ba)"},
        "splits": {},
    }
    for split in ("test", "tune"):
        ids = sorted(i for i in labels if labels[i]["split"] == split)
        s: dict[str, Any] = {"n": len(ids),
                             "cosine": {"auc_delete": auc([sim[i] for i in ids], [is_del[i] for i in ids]),
                                        "auc_preserve": auc([-sim[i] for i in ids], [is_pre[i] for i in ids]),
                                        "auc_delete_within_kind": _auc_within_kind(sim, is_del, ids, kind),
                                        "auc_preserve_within_kind": _auc_within_kind(
                                            {i: -sim[i] for i in ids}, is_pre, ids, kind)},
                             "baselines": _baseline_rules(ids, labels), "models": {}}
        result["splits"][split] = s
    tune_ids = sorted(i for i in labels if labels[i]["split"] == "tune")
    test_ids = sorted(i for i in labels if labels[i]["split"] == "test")
    # cosine alone in the same logistic form, for the "adds to cosine" comparison
    for target, lab in (("delete", is_del), ("preserve", is_pre)):
        w, mu, sd = _logit_fit(np.array([[sim[i]] for i in tune_ids]), np.array([lab[i] for i in tune_ids], float))
        pred = _logit_apply(w, mu, sd, np.array([[sim[i]] for i in test_ids]))
        result["splits"]["test"]["cosine"][f"logistic_auc_{target}"] = auc(list(pred), [lab[i] for i in test_ids])
    for target, lab in (("delete", is_del), ("preserve", is_pre)):
        w, mu, sd = _logit_fit(np.array([text_x[i] for i in tune_ids]), np.array([lab[i] for i in tune_ids], float))
        pred = _logit_apply(w, mu, sd, np.array([text_x[i] for i in test_ids]))
        result["splits"]["test"]["text_features"] = result["splits"]["test"].get("text_features", {})
        result["splits"]["test"]["text_features"][f"logistic_auc_{target}"] = auc(list(pred),
                                                                                 [lab[i] for i in test_ids])
    for model in MODELS:
        path = OUT / f"{model}.jsonl"
        if not path.is_file():
            continue
        all_rows = [r for r in map(json.loads, path.read_text().splitlines()) if r]
        for form in FORMS:
            rows = {r["id"]: r for r in all_rows if r["form"] == form}
            if not rows:
                continue
            per_split: dict[str, Any] = {}
            for split in ("test", "tune"):
                ids = sorted(i for i in rows if labels[i]["split"] == split)
                if not ids:
                    continue
                m: dict[str, Any] = {"n": len(ids),
                                     "ms_per_pair_median": float(np.median([rows[i]["ms"] for i in ids])),
                                     "ms_per_pair_mean": round(float(np.mean([rows[i]["ms"] for i in ids])), 1),
                                     "loadavg1_mean": round(float(np.mean([rows[i]["loadavg1"] for i in ids])), 2),
                                     "yes_no_mass_mean": round(float(np.mean([rows[i]["mass_ab"] for i in ids])), 4),
                                     "mean_p_yes_ab": round(float(np.mean([rows[i]["p_yes_ab"] for i in ids])), 4)}
                m["pearson_logit_p_yes_ab_vs_cosine"] = round(float(np.corrcoef(
                    [_logit(rows[i]["p_yes_ab"]) for i in ids], [sim[i] for i in ids])[0, 1]), 3)
                cand = {"p_yes_ab": {i: rows[i]["p_yes_ab"] for i in ids}}
                if form != "same":
                    cand["p_yes_ba"] = {i: rows[i]["p_yes_ba"] for i in ids}
                    cand["min_adds"] = {i: min(rows[i]["p_yes_ab"], rows[i]["p_yes_ba"]) for i in ids}
                    cand["max_adds"] = {i: max(rows[i]["p_yes_ab"], rows[i]["p_yes_ba"]) for i in ids}
                # a delete is likely when little is added (low P(adds)), or when the model says "same"
                sign = 1.0 if form == "same" else -1.0
                m["auc_delete"] = {k: auc([sign * v[i] for i in ids], [is_del[i] for i in ids])
                                   for k, v in cand.items()}
                m["auc_preserve"] = {k: auc([-sign * v[i] for i in ids], [is_pre[i] for i in ids])
                                     for k, v in cand.items()}
                m["cosine_same_pairs"] = {
                    "auc_delete": auc([sim[i] for i in ids], [is_del[i] for i in ids]),
                    "auc_delete_within_kind": _auc_within_kind(sim, is_del, ids, kind),
                    "auc_preserve": auc([-sim[i] for i in ids], [is_pre[i] for i in ids]),
                    "auc_preserve_within_kind": _auc_within_kind({i: -sim[i] for i in ids}, is_pre, ids, kind)}
                m["auc_delete_within_kind"] = {k: _auc_within_kind({i: sign * v[i] for i in ids}, is_del, ids, kind)
                                               for k, v in cand.items()}
                m["auc_preserve_within_kind"] = {k: _auc_within_kind({i: -sign * v[i] for i in ids}, is_pre, ids,
                                                                     kind) for k, v in cand.items()}
                if form != "same":
                    m["rule_at_0.5"] = _rule_metrics([rows[i] for i in ids], labels, lengths, 0.5)
                per_split[split] = m
            if form != "same" and "tune" in per_split and "test" in per_split:
                tune_rows = [rows[i] for i in rows if labels[i]["split"] == "tune"]
                # quantiles of the tune scores, and the two ends (0: always preserve; 1.01: always delete the shorter)
                grid = sorted({0.0, 1.01} | {round(float(q), 3) for q in np.quantile(
                    [v for r in tune_rows for v in (r["p_yes_ab"], r["p_yes_ba"])], np.linspace(0.02, 0.98, 49))})
                best = max(grid, key=lambda t: (_rule_metrics(tune_rows, labels, lengths, t)["accuracy"], -abs(t - .5)))
                per_split["tune"]["rule_at_tuned"] = _rule_metrics(tune_rows, labels, lengths, best)
                per_split["test"]["rule_at_tuned"] = _rule_metrics(
                    [rows[i] for i in rows if labels[i]["split"] == "test"], labels, lengths, best)
            if "tune" in per_split and "test" in per_split:
                tr = [i for i in tune_ids if i in rows]
                te = [i for i in test_ids if i in rows]
                added = {}
                for target, lab in (("delete", is_del), ("preserve", is_pre)):
                    xtr = np.array([_features(rows, i, sim[i]) for i in tr])
                    xte = np.array([_features(rows, i, sim[i]) for i in te])
                    ytr = np.array([lab[i] for i in tr], float)
                    w, mu, sd = _logit_fit(xtr, ytr)
                    w0, mu0, sd0 = _logit_fit(xtr[:, :1], ytr)
                    ttr = np.array([text_x[i] + _features(rows, i, sim[i])[1:] for i in tr])
                    tte = np.array([text_x[i] + _features(rows, i, sim[i])[1:] for i in te])
                    nt = len(text_x[tr[0]])
                    wt0, mut0, sdt0 = _logit_fit(ttr[:, :nt], ytr)
                    wt, mut, sdt = _logit_fit(ttr, ytr)
                    yte = [lab[i] for i in te]
                    added[target] = {
                        "n_tune": len(tr), "n_test": len(te),
                        "text_only_auc": auc(list(_logit_apply(wt0, mut0, sdt0, tte[:, :nt])), yte),
                        "text_plus_llm_auc": auc(list(_logit_apply(wt, mut, sdt, tte)), yte),
                        "cosine_only_auc": auc(list(_logit_apply(w0, mu0, sd0, xte[:, :1])), [lab[i] for i in te]),
                        "cosine_plus_llm_auc": auc(list(_logit_apply(w, mu, sd, xte)), [lab[i] for i in te]),
                        "llm_weights_standardised": [round(float(v), 3) for v in w[2:]],
                        "cosine_weight_standardised": round(float(w[1]), 3)}
                per_split["test"]["logistic_fitted_on_tune"] = added
            for split, m in per_split.items():
                result["splits"][split]["models"].setdefault(model, {})[form] = m
    write_json(TABLE.with_suffix(".json"), result)
    TABLE.with_suffix(".md").write_text(_markdown(result), encoding="utf-8")
    print(TABLE.with_suffix(".md").read_text())


def _f(x: Any) -> str:
    return "-" if x is None else (f"{x:.3f}" if isinstance(x, float) else str(x))


def _markdown(res: dict[str, Any]) -> str:
    lines = ["# Does a local GGUF model add to the judge? (labelled pairs)", "",
             "Produced by:", "", "```"] + res["commands"] + ["```", "",
             f"Machine: {res['machine'].get('cpu', '')}, {res['machine'].get('cores', '')} cores; "
             "llama.cpp with n_threads=1, n_ctx=2048, other work running (1-minute load average per row below).",
             "",
             "AUC delete: the score separates pairs whose ideal is a delete from the rest, oriented as the "
             "question means it (adds: a low P(yes) says delete; same: a high P(yes) says delete); AUC below "
             "0.5 means the score runs backwards. ms/pair: the form's own time per pair; `same` reuses the "
             "pair's prompt evaluated for `adds` and is timed only for its question.", ""]
    for split in ("test", "tune"):
        s = res["splits"][split]
        lines += [f"## {split} split ({s['n']} pairs)", "",
                  f"Cosine: AUC delete {_f(s['cosine']['auc_delete'])} (within kind "
                  f"{_f(s['cosine']['auc_delete_within_kind'])}), AUC preserve {_f(s['cosine']['auc_preserve'])} "
                  f"(within kind {_f(s['cosine']['auc_preserve_within_kind'])}). Always preserve: accuracy "
                  f"{_f(s['baselines']['always_preserve']['accuracy'])}, fact-losing "
                  f"{_f(s['baselines']['always_preserve']['fact_losing'])}.", "",
                  "| model | form | n | cosine on these pairs: AUC delete, within kind, AUC preserve, within kind "
                  "| AUC delete (ab / ba / min / max) | within kind | AUC preserve "
                  "(ab / ba / min / max) | within kind | rule@0.5 acc / fact-losing | rule@tuned thr: acc / "
                  "fact-losing | yes+no mass | ms/pair | load |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for model, forms in s["models"].items():
            for form, m in forms.items():
                ad = " / ".join(_f(v) for v in m["auc_delete"].values())
                ap = " / ".join(_f(v) for v in m["auc_preserve"].values())
                cs = ", ".join(_f(v) for v in m["cosine_same_pairs"].values())
                adk = " / ".join(_f(v) for v in m["auc_delete_within_kind"].values())
                apk = " / ".join(_f(v) for v in m["auc_preserve_within_kind"].values())
                r5 = m.get("rule_at_0.5")
                rt = m.get("rule_at_tuned")
                lines.append(
                    f"| {model} | {form} | {m['n']} | {cs} | {ad} | {adk} | {ap} | {apk} | "
                    + (f"{_f(r5['accuracy'])} / {_f(r5['fact_losing'])}" if r5 else "-") + " | "
                    + (f"{_f(rt['threshold'])}: {_f(rt['accuracy'])} / {_f(rt['fact_losing'])}" if rt else "-")
                    + f" | {_f(m['yes_no_mass_mean'])} | {m['ms_per_pair_median']:.0f} | {_f(m['loadavg1_mean'])} |")
        lines.append("")
        timing = {model: sum(m["ms_per_pair_mean"] for form, m in forms.items() if form != "adds_fewshot")
                  for model, forms in s["models"].items()}
        if timing:
            lines += ["Mean ms per pair for adds + same (three questions): "
                      + ", ".join(f"{k} {v:.0f}" for k, v in timing.items()) + ".", ""]
        if split == "test":
            tf = s.get("text_features", {})
            lines += ["Logistic models fitted on tune, AUC on test (same pairs): cosine alone vs cosine + the form's "
                      "LLM scores (logit P(yes)); text features (cosine, word Jaccard, containment both ways, log "
                      "length ratio, log total length, store kind) alone vs + the LLM scores. "
                      "Text features on all test pairs: AUC delete "
                      f"{_f(tf.get('logistic_auc_delete'))}, preserve {_f(tf.get('logistic_auc_preserve'))}.", "",
                      "| model | form | n tune / test | delete: cosine / +LLM | delete: text / +LLM "
                      "| preserve: cosine / +LLM | preserve: text / +LLM |", "|---|---|---|---|---|---|---|"]
            for model, forms in s["models"].items():
                for form, m in forms.items():
                    lg = m.get("logistic_fitted_on_tune")
                    if lg:
                        d, p = lg["delete"], lg["preserve"]
                        lines.append(f"| {model} | {form} | {d['n_tune']} / {d['n_test']} | "
                                     f"{_f(d['cosine_only_auc'])} / {_f(d['cosine_plus_llm_auc'])} | "
                                     f"{_f(d['text_only_auc'])} / {_f(d['text_plus_llm_auc'])} | "
                                     f"{_f(p['cosine_only_auc'])} / {_f(p['cosine_plus_llm_auc'])} | "
                                     f"{_f(p['text_only_auc'])} / {_f(p['text_plus_llm_auc'])} |")
            lines.append("")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sc = sub.add_parser("score", help="score the pairs with one model (resumable)")
    sc.add_argument("--model", choices=sorted(MODELS), required=True)
    sc.add_argument("--split", choices=("test", "tune", "all"), default="all")
    sc.add_argument("--limit", type=int, default=None)
    sc.add_argument("--every", type=int, default=1, help="score every k-th pair (a spread sample)")
    sc.add_argument("--threads", type=int, default=1)
    sc.add_argument("--form", action="append", choices=FORMS, help="forms to score, in order [default: all]")
    tb = sub.add_parser("table", help="the metrics table from the scores files")
    tb.add_argument("--command", action="append", default=[], help="a command that produced the scores (recorded)")
    args = ap.parse_args()
    if args.cmd == "score":
        score(args.model, args.split, args.limit, args.every, args.threads, args.form or list(FORMS))
    else:
        table(args.command or ["python bench/judge_labels/llm_scores.py table"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
