"""Rendering of a streaming evaluation: the pooled summary, pass/fail lines and ``report.md``.

Utility is pooled the way the one-shot evaluation pools it (micro-averages over every question of the
pooled conversations), over the conversations whose upkeep replay finished, so every method is compared
on the same questions. The upkeep replay's caller-side figures are the worst conversation's (the
largest p99 and maximum add latency, the largest overshoot), with totals of passes and decisions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["TARGETS", "summarize_stream", "render_stream_markdown", "write_stream_report"]

_METHODS = ("upkeep", "fifo", "random", "oneshot")

#: The lines the live store is held to: add latency, overshoot at idle, work per pass, file size.
TARGETS = {"add_ms_p99": 10.0, "add_ms_max": 100.0, "decisions_per_added_entry": 64.0, "file_over_json": 6.0,
           "recall_vs_oneshot": 0.02}


def _div(a: float, b: float) -> float | None:
    return a / b if b else None


def _max(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return max(vals) if vals else None


def _pool(records: Sequence[Mapping[str, Any]], sizes: Sequence[str]) -> dict[str, Any]:
    """Utility of one method pooled over conversations: recall@C and presence, overall and by evidence age."""
    out: dict[str, Any] = {"conversations": len(records)}
    if not records:
        return out
    for c in sizes:
        ctx = [r["context"][c] for r in records]
        out[f"answer_recall@{c}"] = _div(sum(x["answer_sum"] for x in ctx), sum(x["answer_n"] for x in ctx))
        out[f"evidence_recall@{c}"] = _div(sum(x["evidence_sum"] for x in ctx), sum(x["evidence_n"] for x in ctx))
        ages: dict[str, list[float]] = {}
        for r in records:
            for bucket, v in r["context_by_age"][c].items():
                acc = ages.setdefault(bucket, [0.0, 0])
                acc[0] += v["answer_sum"]
                acc[1] += v["answer_n"]
        out[f"answer_recall@{c}_by_age"] = {b: {"recall": _div(s, n), "n": int(n)}
                                            for b, (s, n) in sorted(ages.items())}
    out["presence"] = _div(sum(r["presence"]["present"] for r in records), sum(r["presence"]["n"] for r in records))
    pres: dict[str, list[int]] = {}
    for r in records:
        for bucket, v in r["presence_by_age"].items():
            counts = pres.setdefault(bucket, [0, 0])
            counts[0] += v["present"]
            counts[1] += v["n"]
    out["presence_by_age"] = {b: {"presence": _div(p, n), "n": n} for b, (p, n) in sorted(pres.items())}
    out["ratio_json"] = sum(r["ratio_json"] for r in records) / len(records)
    out["entries"] = sum(r["entries"] for r in records) / len(records)
    if any("budget_met" in r for r in records):
        out["budget_met"] = sum(bool(r.get("budget_met")) for r in records)
    return out


def _live(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The upkeep replays' caller-side figures: worst conversation, and totals."""
    if not records:
        return {}
    files = [r["file_bytes"] / r["json_bytes"] for r in records if r.get("json_bytes")]
    return {
        "conversations": len(records), "finished": sum(bool(r["finished"]) for r in records),
        "adds": sum(r["adds"] for r in records), "seconds": round(sum(r["seconds"] for r in records), 1),
        "add_ms_p50_max": _max([r["add_ms"]["p50"] for r in records]),
        "add_ms_p99_max": _max([r["add_ms"]["p99"] for r in records]),
        "add_ms_max": _max([r["add_ms"]["max"] for r in records]),
        "overshoot_at_add_max": _max([r["overshoot_at_add"]["max"] for r in records]),
        "adds_over_share": _div(sum(r["overshoot_at_add"]["share_over"] * r["adds"] for r in records),
                                sum(r["adds"] for r in records)),
        "overshoot_at_idle_max": _max([r["overshoot_at_idle"]["max"] for r in records]),
        "idle_points_over": sum(round(r["overshoot_at_idle"]["share_over"] * r["overshoot_at_idle"]["points"])
                                for r in records),
        "idle_points": sum(r["overshoot_at_idle"]["points"] for r in records),
        "passes": sum(r["passes"] for r in records), "decisions": sum(r["decisions"] for r in records),
        "decisions_per_added_entry_max": _max([r["decisions_per_added_entry"]["max"] for r in records]),
        "pass_seconds_max": _max([r["pass_seconds"]["max"] for r in records]),
        "file_over_json_max": max(files) if files else None,
        "file_over_json_mean": sum(files) / len(files) if files else None,
    }


def _verdicts(methods: Mapping[str, Mapping[str, Any]], live: Mapping[str, Any], c0: str) -> dict[str, bool | None]:
    key = f"answer_recall@{c0}"
    up, out = methods["upkeep"].get(key), {}
    for floor in ("fifo", "random"):
        other = methods[floor].get(key)
        out[f"upkeep {key} above {floor}"] = None if up is None or other is None else up > other
    one = methods["oneshot"].get(key)
    out[f"upkeep {key} within {TARGETS['recall_vs_oneshot']} of oneshot"] = (
        None if up is None or one is None else abs(up - one) <= TARGETS["recall_vs_oneshot"])
    if live:
        out["every upkeep replay finished"] = live["finished"] == live["conversations"]
        out["budget holds at idle (overshoot 0 at every session end)"] = live["overshoot_at_idle_max"] == 0
        out[f"add p99 <= {TARGETS['add_ms_p99']:g} ms"] = (live["add_ms_p99_max"] or 0) <= TARGETS["add_ms_p99"]
        out[f"add max <= {TARGETS['add_ms_max']:g} ms"] = (live["add_ms_max"] or 0) <= TARGETS["add_ms_max"]
        d = live["decisions_per_added_entry_max"]
        out[f"decisions per pass <= {TARGETS['decisions_per_added_entry']:g} x entries added"] = (
            None if d is None else d <= TARGETS["decisions_per_added_entry"])
        f = live["file_over_json_max"]
        out[f"file <= {TARGETS['file_over_json']:g}x json"] = None if f is None else f <= TARGETS["file_over_json"]
    return out


def summarize_stream(results: Mapping[str, Any]) -> dict[str, Any]:
    """Pooled figures per budget and method, the upkeep replays' live figures and the pass/fail lines."""
    sizes = [str(c) for c in results["config"]["context_bytes"]]
    samples = results["samples"]
    out: dict[str, Any] = {"base": _pool([s["base"] | {"ratio_json": 1.0} for s in samples.values()], sizes),
                           "budgets": {}}
    for b in results["config"]["budgets"]:
        key = f"{b:g}"
        cells = [s["budgets"][key] for s in samples.values() if key in s["budgets"]]
        done = [c for c in cells if c["upkeep_finished"]]
        methods = {m: _pool([c["methods"][m] for c in done], sizes) for m in _METHODS}
        live = _live([c["methods"]["upkeep"] for c in cells])
        out["budgets"][key] = {"conversations": len(cells), "upkeep_finished": len(done), "methods": methods,
                               "upkeep_live": live, "verdicts": _verdicts(methods, live, sizes[0])}
    return out


def _f(x: Any, digits: int = 3) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def _table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head), *("| " + " | ".join(r) + " |" for r in rows)]


def render_stream_markdown(results: Mapping[str, Any]) -> str:
    """``report.md`` of a streaming evaluation."""
    cfg, summary = results["config"], results["summary"]
    sizes = [str(c) for c in cfg["context_bytes"]]
    c0 = sizes[0]
    ages = [a for a in results["age_buckets"] if a != "none"]
    lines = [f"# Streaming evaluation: {cfg['store']} store, {len(results['samples'])} conversations", "",
             f"Command: `{results['command']}`", "",
             f"Machine: {results['machine']['cpu']}, {results['machine']['cores']} cores; encoder "
             f"`{results['encoder']}`; elapsed {results.get('elapsed_s', 0):.0f} s"
             + ("" if results.get("finished_at") else " (**stopped before the end**)") + ".", "",
             "Each conversation is added session by session into a store held at the budget (a share of the json "
             "size of the whole conversation's store). upkeep: the library's Upkeep (high watermark the budget, low "
             f"{cfg['headroom']:.0%} below it); fifo, random: after each add above the size the upkeep store ended "
             "with, evict the oldest / random entries until the store fits; oneshot: no upkeep, one compression "
             "to that size at the end. Utility pooled over the conversations whose upkeep replay finished; "
             "ratio: final json size / the whole conversation's.", ""]
    base = summary["base"]
    files = [s["base"]["file_bytes"] / s["base"]["json_bytes"] for s in results["samples"].values()]
    p99 = _max([s["base"]["add_ms"]["p99"] for s in results["samples"].values()])
    lines += [f"Base (every entry, no upkeep): answer recall@{c0} {_f(base.get(f'answer_recall@{c0}'))}, presence "
              f"{_f(base.get('presence'))}; file / json {_f(max(files) if files else None, 1)} at most; add p99 "
              f"{_f(p99, 1)} ms at most (the same adds with nothing kept: what the machine gives).", ""]
    for key, cell in summary["budgets"].items():
        lines += [f"## Budget {float(key):.0%}: upkeep finished on {cell['upkeep_finished']} of "
                  f"{cell['conversations']} conversations", ""]
        head = ["method", f"answer recall@{c0}", *[f"@{c0} {a}" for a in ages], "presence",
                *[f"presence {a}" for a in ages], "ratio (json)"]
        rows = []
        for m, p in cell["methods"].items():
            by_age = p.get(f"answer_recall@{c0}_by_age", {})
            pres_age = p.get("presence_by_age", {})
            rows.append([m, _f(p.get(f"answer_recall@{c0}")),
                         *[_f(by_age.get(a, {}).get("recall")) for a in ages], _f(p.get("presence")),
                         *[_f(pres_age.get(a, {}).get("presence")) for a in ages], _f(p.get("ratio_json"))])
        lines += _table(head, rows) + [""]
        live = cell["upkeep_live"]
        if live:
            lines += ["Upkeep, as the caller sees it (worst conversation; totals):", ""]
            lines += _table(
                ["adds", "add ms p50 / p99 / max", "overshoot at add (max; adds over)", "overshoot at idle (max; "
                 "points over)", "passes", "decisions", "decisions per added entry (max)", "pass s (max)",
                 "file / json (max, mean)", "seconds"],
                [[str(live["adds"]), f"{_f(live['add_ms_p50_max'], 1)} / {_f(live['add_ms_p99_max'], 1)} / "
                  f"{_f(live['add_ms_max'], 1)}",
                  f"{_f(live['overshoot_at_add_max'])}; {_f(live['adds_over_share'])}",
                  f"{_f(live['overshoot_at_idle_max'])}; {live['idle_points_over']}/{live['idle_points']}",
                  str(live["passes"]), str(live["decisions"]), _f(live["decisions_per_added_entry_max"], 1),
                  _f(live["pass_seconds_max"], 2),
                  f"{_f(live['file_over_json_max'], 1)}, {_f(live['file_over_json_mean'], 1)}",
                  _f(live["seconds"], 0)]]) + [""]
        lines += ["Checks:", ""]
        lines += [f"- {'PASS' if v else ('n/a' if v is None else 'FAIL')}: {k}" for k, v in cell["verdicts"].items()]
        lines.append("")
    lines += ["## Per conversation", ""]
    rows = []
    for sid, s in results["samples"].items():
        for key, cell in s["budgets"].items():
            up = cell["methods"]["upkeep"]
            recall = {m: (_f(r["context"][c0]["answer_sum"] / r["context"][c0]["answer_n"])
                          if "context" in r and r["context"][c0]["answer_n"] else "–")
                      for m, r in cell["methods"].items()}
            rows.append([sid, key, "yes" if up["finished"] else f"no ({up['adds']}/{up['adds_total']} adds)",
                         _f(up["seconds"], 0), _f(up["add_ms"]["p99"], 1), _f(up["add_ms"]["max"], 0),
                         _f(up["overshoot_at_idle"]["max"]), str(up["decisions"]),
                         _f(up["file_bytes"] / max(1, up["json_bytes"]), 1), *[recall[m] for m in _METHODS]])
    lines += _table(["conversation", "budget", "upkeep finished", "s", "add p99 ms", "add max ms",
                     "idle overshoot", "decisions", "file/json", *[f"{m} @{c0}" for m in _METHODS]], rows)
    return "\n".join(lines) + "\n"


def write_stream_report(results: Mapping[str, Any], out: Path) -> None:
    """Write ``report.md`` (atomically)."""
    import os

    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "report.md.tmp"
    tmp.write_text(render_stream_markdown(results), encoding="utf-8")
    os.replace(tmp, out / "report.md")
