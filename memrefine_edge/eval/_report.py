"""Rendering of an evaluation's results: pooled summary, ``report.md`` and a utility-vs-budget PNG.

Numbers are pooled over samples the way the paper pools LoCoMo: recall and
QA scores are micro-averages over every question of every sample; storage
(ratio, entries, bytes) is the mean per sample; seconds and LLM calls are
totals and per-sample means.
"""

from __future__ import annotations

import json
import math
import os
import platform
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ._metrics import CATEGORY_NAMES, CATEGORY_REPORT_ORDER

__all__ = ["summarize", "render_markdown", "render_plot", "write_report", "machine_info", "cpu_model", "write_json",
           "portable"]


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (or what :mod:`platform` knows)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def portable(path: str | os.PathLike[str]) -> str:
    """A path as results record it: relative to the working folder when inside it, else the file name.

    Results are committed; a machine's absolute paths must not be.
    """
    p = Path(path)
    if not p.is_absolute():
        return str(p)
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return p.name


def machine_info(version: str) -> dict[str, Any]:
    """CPU model, cores, OS and the versions that matter for the numbers."""
    import numpy as np

    cpu = cpu_model()
    versions: dict[str, str | None] = {"memrefine-edge": version, "python": platform.python_version(),
                                       "numpy": np.__version__}
    for pkg in ("llama_cpp_python", "onnxruntime"):
        try:
            from importlib.metadata import version as v

            versions[pkg] = v(pkg)
        except Exception:
            versions[pkg] = None
    return {"cpu": cpu, "cores": os.cpu_count(), "platform": platform.platform(), "versions": versions}


def write_json(path: Path, data: Any) -> None:
    """Write JSON atomically (temporary file, then rename)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _div(a: float, b: float) -> float | None:
    return a / b if b else None


def _pool(records: list[Mapping[str, Any]]) -> dict[str, Any]:
    """Pool measurements of one (method, budget) over samples."""
    out: dict[str, Any] = {"samples": len(records)}
    for key in ("entries", "json_bytes", "disk_bytes", "ratio_json", "ratio_disk"):
        vals = [r[key] for r in records if key in r]
        out[key] = sum(vals) / len(vals) if vals else None
    for key in ("seconds", "seconds_cumulative", "llm_calls", "llm_calls_cumulative"):
        vals = [r[key] for r in records if key in r]
        if vals:
            out[key + "_total"] = sum(vals)
            out[key + "_mean"] = sum(vals) / len(vals)
    if any("budget_met" in r for r in records):
        out["budget_met"] = sum(bool(r.get("budget_met")) for r in records)
    recs = [r["recall"] for r in records if r.get("recall")]
    if recs:
        out["recall"] = _div(sum(r["sum"] for r in recs), sum(r["n"] for r in recs))
        out["recall_n"] = sum(r["n"] for r in recs)
        cats: dict[str, list[float]] = {}
        for r in recs:
            for c, v in r["by_category"].items():
                cats.setdefault(c, [0.0, 0])
                cats[c][0] += v["sum"]
                cats[c][1] += v["n"]
        out["recall_by_category"] = {c: {"recall": _div(s, n), "n": n} for c, (s, n) in sorted(cats.items())}
    qas = [r["qa"] for r in records if r.get("qa")]
    if qas:
        n = sum(q["n"] for q in qas)
        out["f1"], out["em"], out["qa_n"] = _div(sum(q["f1_sum"] for q in qas), n), _div(
            sum(q["em_sum"] for q in qas), n), n
        qc: dict[str, list[float]] = {}
        for q in qas:
            for c, v in q["by_category"].items():
                qc.setdefault(c, [0.0, 0.0, 0])
                qc[c][0] += v["f1_sum"]
                qc[c][1] += v["em_sum"]
                qc[c][2] += v["n"]
        out["qa_by_category"] = {c: {"f1": _div(f, n), "em": _div(e, n), "n": n} for c, (f, e, n) in sorted(qc.items())}
    attrs = [r["attribution"] for r in records if r.get("attribution")]
    if attrs:
        out["attribution"] = _merge_attr(attrs)
    out.update(_pool_context(records))
    return out


def _pool_context(records: list[Mapping[str, Any]]) -> dict[str, Any]:
    """Pool the context-budget measures (``.context``) and answer presence over samples."""
    out: dict[str, Any] = {}
    budgets = sorted({c for r in records for c in (r.get("context") or {})}, key=int)
    for c in budgets:
        ctx = [r["context"][c] for r in records if c in (r.get("context") or {})]
        out[f"answer_recall@{c}"] = _div(sum(x["answer_sum"] for x in ctx), sum(x["answer_n"] for x in ctx))
        out[f"evidence_recall@{c}"] = _div(sum(x["evidence_sum"] for x in ctx), sum(x["evidence_n"] for x in ctx))
        cats: dict[str, list[float]] = {}
        for x in ctx:
            for cat, v in x["by_category"].items():
                acc = cats.setdefault(cat, [0.0, 0, 0.0, 0])
                acc[0] += v["answer_sum"]
                acc[1] += v["answer_n"]
                acc[2] += v["evidence_sum"]
                acc[3] += v["evidence_n"]
        out[f"context_by_category@{c}"] = {cat: {"answer": _div(a, an), "answer_n": an, "evidence": _div(e, en),
                                                 "evidence_n": en} for cat, (a, an, e, en) in sorted(cats.items())}
    pres = [r["presence"] for r in records if r.get("presence")]
    if pres:
        out["presence"] = _div(sum(x["present"] for x in pres), sum(x["n"] for x in pres))
    return out


def _merge_attr(attrs: list[Mapping[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"samples": len(attrs), "questions_lost": 0, "evidence_ids_lost": 0, "fate": {},
                           "by_decision": {}, "by_category": {}}
    for a in attrs:
        out["questions_lost"] += a["questions_lost"]
        out["evidence_ids_lost"] += a["evidence_ids_lost"]
        for key in ("fate", "by_decision"):
            for k, v in a[key].items():
                out[key][k] = out[key].get(k, 0) + v
        for c, d in a["by_category"].items():
            tgt = out["by_category"].setdefault(c, {})
            for k, v in d.items():
                tgt[k] = tgt.get(k, 0) + v
    return out


def summarize(results: Mapping[str, Any]) -> dict[str, Any]:
    """Pooled numbers: ``{"base": {...}, "methods": {name: {budget: {...}}}}``."""
    samples = results["samples"]
    summary: dict[str, Any] = {"base": _pool([s["base"] for s in samples.values()]), "methods": {}}
    for name in results["config"]["methods"]:
        per: dict[str, Any] = {}
        for b in results["budgets"]:
            key = f"{b:g}"
            recs = [s["methods"][name][key] for s in samples.values() if key in s["methods"].get(name, {})]
            if recs:
                per[key] = _pool(recs)
        summary["methods"][name] = per
    return summary


def _f(x: Any, digits: int = 4) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(r) + " |" for r in rows]


def render_markdown(results: Mapping[str, Any], summary: Mapping[str, Any], plot: str | None) -> str:
    """The report: Table 1 shape (method × metric, base and budgets), storage, categories, evidence loss."""
    cfg, budgets = results["config"], results["budgets"]
    keys = [f"{b:g}" for b in budgets]
    cols = ["Method", "Metric", "Base"] + [f"{round(b * 100)}%" for b in budgets]
    base, methods = summary["base"], summary["methods"]
    has_recall, has_qa = results.get("has_recall", True), base.get("f1") is not None
    lines = [f"# LoCoMo storage–utility evaluation ({cfg['store']} store)", ""]
    commands = results.get("commands", [results["command"]])
    lines += ["Commands that produced these numbers:", ""] + [f"    {c}" for c in commands]
    m = results["machine"]
    lines += ["", f"Machine: {m['cpu']}, {m['cores']} cores, {m['platform']}; versions "
              + ", ".join(f"{k} {v}" for k, v in m["versions"].items()) + ".",
              f"Encoder: `{results['encoder']}`. Answerer: {results.get('answerer') or 'none (--no-qa)'}. "
              f"Retrieval: cosine top-{cfg['k']}. Budget metric: {cfg['metric']}, mode {cfg['mode']}, "
              f"merger {cfg['merger']}"
              + (f" (merged texts at most {cfg['max_merged_bytes']} bytes)" if cfg.get("max_merged_bytes") else "")
              + f", {'chained' if cfg['chain'] else 'independent'} compressions.",
              f"Samples: {', '.join(results['samples'])} ({sum(s['questions'] for s in results['samples'].values())}"
              f" questions). Elapsed: {results.get('elapsed_s', 0):.0f} s.", "",
              "LoCoMo category ids (metrics.CATEGORY_NAMES, the official scorer's mapping): "
              + ", ".join(f"{c} = {n}" for c, n in CATEGORY_NAMES.items()) + ".", ""]
    if not has_recall:
        lines += ["Evidence recall is **not available** for the text store: its entries carry no provenance.", ""]
    lines += _context_section(results, summary)
    lines += ["## Table 1 shape: utility by budget (recall@10 favours packed entries)", ""]
    metrics: list[tuple[str, str]] = ([("Recall@10", "recall")] if has_recall else []) + (
        [("F1", "f1"), ("EM", "em")] if has_qa else []) + [("Storage (json)", "ratio_json"), ("Entries", "entries")]
    rows = []
    for name, per in methods.items():
        for label, key in metrics:
            basev = 1.0 if key == "ratio_json" else base.get(key)
            rows.append([name, label, _f(basev, 1 if key == "entries" else 4)]
                        + [_f(per.get(k, {}).get(key), 1 if key == "entries" else 4) for k in keys])
    lines += _table(cols, rows) + [""]
    lines += ["## Realized storage and cost (mean per sample; seconds and LLM calls per compression from base)", ""]
    srows = []
    for name, per in methods.items():
        for k in keys:
            p = per.get(k)
            if not p:
                continue
            srows.append([name, f"{float(k):.0%}", _f(p["ratio_json"]), _f(p["ratio_disk"]), _f(p["entries"], 1),
                          _f(p["json_bytes"] / 1024, 1), _f(p["disk_bytes"] / 1024, 1),
                          _f(p.get("seconds_cumulative_mean"), 1), _f(p.get("llm_calls_cumulative_mean"), 1),
                          f"{p.get('budget_met', 0)}/{p['samples']}"])
    lines += [f"Base: {_f(base['entries'], 1)} entries, {_f(base['json_bytes'] / 1024, 1)} KiB json, "
              f"{_f(base['disk_bytes'] / 1024, 1)} KiB disk (mean per sample).", ""]
    lines += _table(["Method", "Budget", "Ratio json", "Ratio disk", "Entries", "json KiB", "disk KiB",
                     "Seconds", "LLM calls", "Budget met"], srows) + [""]
    order = [str(c) for c in CATEGORY_REPORT_ORDER]
    for title, field, sub, avail in (("Evidence recall@10 by category", "recall_by_category", "recall", has_recall),
                                     ("QA F1 by category", "qa_by_category", "f1", has_qa)):
        if not avail:
            continue
        lines += [f"## {title}", ""]
        crow = []
        for name, per in methods.items():
            for c in order:
                if c not in (base.get(field) or {}):
                    continue
                crow.append([name, f"{c} {CATEGORY_NAMES[int(c)]} (n={base[field][c]['n']})",
                             _f(base[field][c][sub])]
                            + [_f(per.get(k, {}).get(field, {}).get(c, {}).get(sub)) for k in keys])
        lines += _table(["Method", "Category", "Base"] + cols[3:], crow) + [""]
    if has_recall:
        lines += ["## Evidence recall@10 per sample", ""]
        prow = []
        for sid, s in results["samples"].items():
            b = s["base"]["recall"]
            for name in methods:
                runs = s["methods"].get(name, {})
                prow.append([sid, name, _f(b["sum"] / b["n"] if b["n"] else None)]
                            + [_f(runs[k]["recall"]["sum"] / runs[k]["recall"]["n"]
                                  if k in runs and runs[k]["recall"]["n"] else None) for k in keys])
        lines += _table(["Sample", "Method", "Base"] + cols[3:], prow) + [""]
    lines += _loss_section(results, summary)
    if plot:
        lines += ["## Plot", "", f"![utility vs budget]({plot})", ""]
    return "\n".join(lines)


def _context_section(results: Mapping[str, Any], summary: Mapping[str, Any]) -> list[str]:
    """The primary table: utility within a context of C bytes, against realized storage."""
    sizes = [str(c) for c in results["config"].get("context_bytes") or ()]
    if not sizes:
        return []
    c0, base = sizes[0], summary["base"]
    has_recall = results.get("has_recall", True)
    out = ["## Utility within a context budget (primary; answer recall@C over categories 1-4)", "",
           "An assistant reads a prompt of C bytes: the live entries ranked by cosine to the question, taken "
           "whole while they fit (the first entry alone larger than C is cut to C). *Answer@C*: share of the gold "
           "answer's tokens in that context; *evidence@C*: share of the evidence ids in its entries' provenance "
           "(a cut entry counts with the share of its bytes shown); *presence*: questions whose gold tokens are "
           "all somewhere in the store. *Recall@10* counts provenance in the top 10 entries and favours packing.",
           ""]
    head = ["Method", "Budget", "Ratio json", "Met"] + [f"Answer@{c}" for c in sizes] + (
        [f"Evidence@{c0}"] if has_recall else []) + ["Presence", "Seconds", "LLM calls"] + (
        ["Recall@10 (packing)"] if has_recall else [])

    def row(name: str, label: str, p: Mapping[str, Any], met: str) -> list[str]:
        return ([name, label, _f(p.get("ratio_json", 1.0)), met] + [_f(p.get(f"answer_recall@{c}")) for c in sizes]
                + ([_f(p.get(f"evidence_recall@{c0}"))] if has_recall else [])
                + [_f(p.get("presence")), _f(p.get("seconds_mean"), 1), _f(p.get("llm_calls_mean"), 1)]
                + ([_f(p.get("recall"))] if has_recall else []))

    rows = [row("base", "100%", {**base, "ratio_json": 1.0}, "–")]
    for name, per in summary["methods"].items():
        for k, p in per.items():
            rows.append(row(name, f"{float(k):.0%}", p, f"{p.get('budget_met', 0)}/{p['samples']}"))
    out += _table(head, rows) + [""]
    if results.get("context_plot"):
        out += [f"![answer recall against realized storage]({results['context_plot']})", ""]
    out += [f"### Answer recall@{c0} by category", ""]
    order = [str(c) for c in CATEGORY_REPORT_ORDER]
    cat_base = base.get(f"context_by_category@{c0}") or {}
    keys = [f"{b:g}" for b in results["budgets"]]
    crow = []
    for name, per in summary["methods"].items():
        for c in order:
            if c not in cat_base or not cat_base[c]["answer_n"]:
                continue
            crow.append([name, f"{c} {CATEGORY_NAMES[int(c)]} (n={cat_base[c]['answer_n']})",
                         _f(cat_base[c]["answer"])]
                        + [_f(per.get(k, {}).get(f"context_by_category@{c0}", {}).get(c, {}).get("answer"))
                           for k in keys])
    out += _table(["Method", "Category", "Base"] + [f"{float(k):.0%}" for k in keys], crow) + [""]
    return out


def _loss_section(results: Mapping[str, Any], summary: Mapping[str, Any]) -> list[str]:
    cfg = results["config"]
    key = f"{cfg['attribution_budget']:g}"
    out = [f"## Where evidence was lost at the {float(key):.0%} budget", "",
           f"Analysed when a method's recall@10 at this budget is more than {cfg['attribution_drop'] * 100:g} "
           "points below base. A question *lost* evidence when a dia_id retrieved at base is no longer retrieved; "
           "each lost id's fate is read from the audit log (`store.journal.decisions()`).", ""]
    base = summary["base"].get("recall")
    any_attr = False
    for name, per in summary["methods"].items():
        p = per.get(key)
        if not p or p.get("recall") is None or base is None:
            continue
        drop = (base - p["recall"]) * 100
        if "attribution" not in p:
            out += [f"- **{name}**: recall {p['recall']:.4f} vs base {base:.4f} ({-drop:+.1f} points): "
                    + ("no analysis needed." if drop <= cfg["attribution_drop"] * 100 else "not analysed.")]
            continue
        any_attr = True
        a = p["attribution"]
        out += [f"- **{name}**: recall {p['recall']:.4f} vs base {base:.4f} ({-drop:+.1f} points); "
                f"{a['questions_lost']} questions lost {a['evidence_ids_lost']} evidence ids.",
                "  - fate of each lost id (unique ids): " + ", ".join(f"{k} {v}" for k, v in sorted(a["fate"].items())),
                "  - decisions (each counted once) that removed an entry carrying a lost id, by action/source: "
                + (", ".join(f"{k} {v}" for k, v in sorted(a["by_decision"].items())) or "none"),
                "  - per category (questions; fates per question × lost id): " + "; ".join(
                    f"{c} {CATEGORY_NAMES[int(c)]}: " + ", ".join(f"{k} {v}" for k, v in d.items())
                    for c, d in a["by_category"].items())]
    if any_attr:
        out += ["", "*kept, outranked*: the entry is unchanged but other (often merged) entries now rank above it; "
                "*merged (source), outranked*: the fact survives inside a merged entry that is not in the top-10; "
                "*deleted (source)*: no live entry carries it, the last carrier was deleted by that decision source."]
    return out + [""]


def _pyplot() -> Any:
    """matplotlib's pyplot on the file-only backend, or None where the ``eval`` extra is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def _save(plt: Any, fig: Any, path: Path) -> str:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


def render_plot(summary: Mapping[str, Any], budgets: list[float], path: Path) -> str | None:
    """PNG of recall@10 (and F1 if measured) vs budget per method; None if matplotlib is missing."""
    plt = _pyplot()
    if plt is None:
        return None
    base = summary["base"]
    panels = [k for k in ("recall", "f1") if base.get(k) is not None]
    if not panels:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4), squeeze=False)
    xs = [1.0] + list(budgets)
    for ax, key in zip(axes[0], panels, strict=True):
        for name, per in summary["methods"].items():
            ys = [base[key]] + [per.get(f"{b:g}", {}).get(key) for b in budgets]
            pts = [(x * 100, y) for x, y in zip(xs, ys, strict=True) if y is not None]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
        ax.set_xlabel("storage budget (% of base, json bytes)")
        ax.set_ylabel({"recall": "evidence recall@10", "f1": "QA token F1"}[key])
        ax.invert_xaxis()
        ax.grid(alpha=0.3)
        ax.legend()
    return _save(plt, fig, path)


def render_context_plot(summary: Mapping[str, Any], sizes: list[str], store: str, path: Path) -> str | None:
    """PNG of answer recall@C against realized storage ratio, one line per method; None without matplotlib."""
    plt = _pyplot()
    if plt is None:
        return None
    base = summary["base"]
    if not sizes or base.get(f"answer_recall@{sizes[0]}") is None:
        return None
    fig, axes = plt.subplots(1, len(sizes), figsize=(5.5 * len(sizes), 4), squeeze=False)
    for ax, c in zip(axes[0], sizes, strict=True):
        key = f"answer_recall@{c}"
        for name, per in summary["methods"].items():
            pts = [(1.0, base[key])] + sorted(((p["ratio_json"], p[key]) for p in per.values()
                                               if p.get(key) is not None), reverse=True)
            ax.plot([x * 100 for x, _ in pts], [y for _, y in pts], marker="o", label=name)
        ax.set_xlabel("realized storage (% of base, json bytes)")
        ax.set_ylabel(f"answer recall within {c} bytes of context")
        ax.set_title(f"{store} store")
        ax.invert_xaxis()
        ax.grid(alpha=0.3)
        ax.legend()
    return _save(plt, fig, path)


def write_report(results: dict[str, Any], out: Path, *, log: Callable[[str], None]) -> None:
    """Summarize, write the PNGs (if matplotlib is installed) and ``report.md``."""
    summary = summarize(results)
    results["summary"] = summary
    sizes = [str(c) for c in results["config"].get("context_bytes") or ()]
    results["context_plot"] = render_context_plot(summary, sizes, results["config"]["store"],
                                                  out / "answer_recall_vs_ratio.png")
    plot = render_plot(summary, results["budgets"], out / "utility_vs_budget.png")
    if plot is None:
        log("no PNG plot: matplotlib is not installed (pip install 'memrefine-edge[bench]') or nothing to plot")
    (out / "report.md").write_text(render_markdown(results, summary, plot), encoding="utf-8")
