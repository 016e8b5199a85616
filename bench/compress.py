"""End-to-end compression benchmark: real stores with the default models, and engine scaling.

Run: ``.venv/bin/python bench/compress.py`` (about 7 minutes on 2 cores).
Writes ``bench/results/compress.json`` and ``bench/results/compress.png``, prints tables.

Every run is a fresh subprocess (``--child SPEC``), so model sessions, caches
and the allocator start clean. Peak RSS is the child's own ``VmHWM`` from
``/proc/self/status``: ``ru_maxrss`` of ``RUSAGE_CHILDREN`` is the maximum
over *all* children waited for so far (and Linux carries the parent's peak
across fork+exec), so it cannot give a per-run number; it is recorded once,
for the whole bench, as a cross-check.

Part 1, real stores (default models as ``memrefine compress`` builds them):

* the bundled sample, memrefine, budget 0.75 (the ``memrefine demo`` setup);
* LoCoMo conv-26 as turns (``../shared/data/locomo`` beside the repository,
  CC BY-NC: read at run time, no text is written out), budget 0.5: rulesim
  and rulepr with the deterministic merger; rulesim again with the packaged
  int8 encoder (the baseline for the default, built int8 encoder, in the same run);
  memrefine with the default configuration (the learned redundancy scorer,
  no LLM; deterministic merges; the last-copy check), the same in strict
  mode and without the last-copy check, with ``--judge-model fact`` (the
  word-coverage fact judge) and with ``--judge-model bundled`` (the bundled
  SmolLM2-135M GGUF behind the fact guard).

``--real-only`` runs part 1 alone and writes ``bench/results/compress_real.json``; ``--no-llm``
leaves out the bundled GGUF judge's run (10-30 minutes).

Part 2, engine scaling: synthetic stores of 1k / 5k / 20k entries (generated
texts: groups of near-duplicate variants of a base fact), ``HashEncoder``
(the encoder is not what is measured; its time is the ``embed`` stage),
compressed to 0.5 with rulesim (deterministic merger) and with a tiny fake
judge (hash of the pair: 50% delete, 25% merge, 25% preserve; concatenating
merger). Per stage and per decision; ``size`` is the time spent in
``store.size`` (the budget check of the loop plus the before/after sizes each
journal write records), timed by wrapping the store instance's method.
Baseline in the same run: one step of the paper's naive argmax recomputed from
scratch (``bench/pairs.py:naive_step``) at N=1k, vs the engine's whole cost per
decision.

Targets (2 cores): one LoCoMo conversation as turns compressed to 50% in
<= 60 s; peak RSS <= 350 MB.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _proc import status_mb  # noqa: E402  (bench/ is the script's folder, first on sys.path)

__all__ = ["main"]

RESULTS = Path(__file__).resolve().parent / "results" / "compress.json"
PLOT = RESULTS.with_suffix(".png")
#: Beside the repository (CI keeps the shared data folder next to the clone).
LOCOMO = REPO.parent / "shared" / "data" / "locomo" / "locomo-dev.json"
#: How results name the encoder-memory reference vectors (a temporary file, removed after the run).
REF_SHOWN = "<tmp>/memrefine-bench-ref.npy"
SAMPLE_ID = "conv-26"
SIZES = (1_000, 5_000, 20_000)
#: Decisions at the largest N (a full run to 0.5 there takes ~10k decisions, ~3-4 min per method); the
#: time to budget is then extrapolated from the per-decision cost (an upper bound: the store shrinks).
CAP = {20_000: 1_500}
TARGET_SECONDS = 60.0
TARGET_RSS_MB = 350.0


# --- child side ---------------------------------------------------------------------


def _hwm_mb() -> float:
    return status_mb("VmHWM")


def _rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def _timed_size(store, clock: Counter) -> None:
    """Wrap ``store.size``, ``store.running_size`` and the journal's apply_* on the instances: each size check is timed.

    ``size_in_apply`` is the part spent inside journal writes (already inside
    the report's ``apply`` stage); the rest is the loop's own budget check.
    """
    state = {"in_apply": False}

    def timed(inner):
        def size(*a, **kw) -> int:
            t = time.perf_counter()
            try:
                return inner(*a, **kw)
            finally:
                dt = time.perf_counter() - t
                clock["size"] += dt
                clock["size_calls"] += 1
                if state["in_apply"]:
                    clock["size_in_apply"] += dt

        return size

    # The loop reads the running totals (running_size); full measurements go through size.
    store.size = timed(store.size)
    store.running_size = timed(store.running_size)
    journal = store.journal
    for name in ("apply", "apply_evict"):
        fn = getattr(journal, name)

        def wrapped(*a, _fn=fn, **kw):
            state["in_apply"] = True
            try:
                return _fn(*a, **kw)
            finally:
                state["in_apply"] = False

        setattr(journal, name, wrapped)


_NAMES = ["Caroline", "Melanie", "Jordan", "Priya", "Tomasz", "Amara", "Kenji", "Rosa", "Ines", "Omar"]
_VERBS = ["visited", "painted", "talked about", "booked", "cooked", "photographed", "ran past", "read about"]
_OBJS = ["the lake", "a museum", "Lisbon", "the climbing gym", "a bakery", "the clinic", "Kyoto", "a bookshop",
         "Harbour Road", "the library", "a concert", "the old bridge"]
_FILL = ["with", "her", "his", "friends", "family", "yesterday", "again", "after", "work", "school", "really",
         "enjoyed", "it", "and", "said", "was", "great", "fun", "quiet", "busy"]


def synthetic_texts(n: int, seed: int = 0) -> list[str]:
    """``n`` texts in groups of 1-4 variants of one base fact (about 60% of entries are near-duplicates)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out: list[str] = []
    g = 0
    while len(out) < n:
        base = [str(rng.choice(_NAMES)), str(rng.choice(_VERBS)), str(rng.choice(_OBJS)), "on", f"day{g}"]
        base += [str(w) for w in rng.choice(_FILL, size=8)] + [f"tag{g}"]
        for v in range(int(rng.integers(1, 5))):
            words = list(base)
            for _ in range(v):  # each later variant changes one more filler word
                words[5 + int(rng.integers(0, 8))] = str(rng.choice(_FILL))
            out.append(" ".join(words) + ".")
        g += 1
    return out[:n]


def _fake_method():
    from memrefine_edge.core import Decision
    from memrefine_edge.methods import Method

    class HashJudge(Method):
        """Decides by a hash of the pair's ids: 50% delete, 25% merge, 25% preserve (no model)."""

        name = "fakejudge"

        def decide(self, pair):
            h = hashlib.blake2b(f"{pair.a.id}\x00{pair.b.id}".encode(), digest_size=2).digest()[0] % 4
            if h < 2:
                return Decision("delete", "ab"[h], reason="fake", source="rule")
            if h == 2:
                return Decision("merge", None, merge_instruction="keep both", reason="fake", source="rule")
            return Decision("preserve", None, reason="fake", source="rule")

    return HashJudge()


def child_sizecheck(spec: dict) -> dict:
    """Cost of one ``store.json_bytes()`` (the loop's size check) at N entries, and with a covering index.

    The index is created on a temporary copy only (bench measurement, no library change).
    """
    import sqlite3
    import statistics

    from memrefine_edge.core import Entry
    from memrefine_edge.store import MemoryStore
    from memrefine_edge.testing import HashEncoder

    tmp = Path(tempfile.mkdtemp(prefix="memrefine-bench-size-"))
    try:
        store = MemoryStore(tmp / "s.db")
        store.add_many([Entry(id=f"s{i}", content=t) for i, t in enumerate(synthetic_texts(spec["n"]))])
        store.ensure_embeddings(HashEncoder())

        def timed(fn, reps: int = 30) -> float:
            fn()
            ts = []
            for _ in range(reps):
                t = time.perf_counter()
                fn()
                ts.append(time.perf_counter() - t)
            return 1000 * statistics.median(ts)

        total = store.json_bytes()
        plain = timed(store.json_bytes)
        # The query plans, read through a connection of the bench's own (the store owns its connection).
        conn = sqlite3.connect(tmp / "s.db")
        query = "EXPLAIN QUERY PLAN SELECT COALESCE(SUM(json_bytes), 0) FROM entries"
        plan = " | ".join(r[-1] for r in conn.execute(query))
        conn.execute("CREATE INDEX IF NOT EXISTS bench_entries_json_bytes ON entries(json_bytes)")
        conn.commit()
        indexed = timed(store.json_bytes)
        plan_ix = " | ".join(r[-1] for r in conn.execute(query))
        conn.close()
        assert store.json_bytes() == total
        store.close()
        return {**spec, "sum_ms": round(plain, 3), "sum_ms_with_index": round(indexed, 3),
                "plan": plan, "plan_with_index": plan_ix}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def child_encmem(spec: dict) -> dict:
    """Encoder-only memory: load the default encoder (session options patched per spec) and embed conv-26's turns.

    Embeds the turns the way ``store.ensure_embeddings`` does (chunks of 64, each
    sorted by length and batched by the encoder's batch size). Session options
    are patched by wrapping ``onnxruntime.InferenceSession`` in this process
    only (no library change).
    """
    import numpy as np
    import onnxruntime as ort

    from memrefine_edge.backends import OnnxEncoder
    from memrefine_edge.store import parse_file

    texts = [e.content for e in parse_file(LOCOMO, format="locomo-turns", sample_id=SAMPLE_ID)[0]]
    base = _rss_mb()
    orig = ort.InferenceSession

    def patched(path, sess_options=None, providers=None):
        for k, v in spec.get("session", {}).items():
            if k == "graph_optimization_level":
                sess_options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, v)
            else:
                setattr(sess_options, k, v)
        return orig(path, sess_options=sess_options, providers=providers)

    ort.InferenceSession = patched
    model = spec.get("model")
    enc = OnnxEncoder(model_path=REPO / "models" / model if model else None, batch_size=spec.get("batch", 1))
    loaded, hwm_load = _rss_mb(), _hwm_mb()
    t = time.perf_counter()
    vecs = np.concatenate([enc.embed(texts[i : i + 64]) for i in range(0, len(texts), 64)])
    embed_s = time.perf_counter() - t
    out = {**spec, "texts": len(texts), "rss_before_load": round(base, 1), "rss_after_load": round(loaded, 1),
           "hwm_after_load": round(hwm_load, 1), "rss_after_embed": round(_rss_mb(), 1), "peak_rss_mb": round(_hwm_mb(), 1),
           "embed_s": round(embed_s, 2)}
    ref = spec.get("ref")
    if ref:
        r = np.load(ref)
        cos = (r * vecs).sum(axis=1)
        out["cos_vs_ref_min"], out["cos_vs_ref_mean"] = round(float(cos.min()), 5), round(float(cos.mean()), 5)
    else:
        np.save(spec["save"], vecs)
    return out


def child(spec: dict) -> dict:
    """One run, in this (fresh) process; returns its result dict."""
    if spec["kind"] == "sizecheck":
        return child_sizecheck(spec)
    if spec["kind"] == "encmem":
        return child_encmem(spec)
    t_start = time.perf_counter()
    marks = {"start": round(_rss_mb(), 1)}
    from memrefine_edge.core import Entry
    from memrefine_edge.engine import Compressor
    from memrefine_edge.store import MemoryStore

    tmp = Path(tempfile.mkdtemp(prefix="memrefine-bench-compress-"))
    clock: Counter = Counter()
    try:
        db = tmp / "store.db"
        store = MemoryStore(db)
        if spec["kind"] == "synthetic":
            from memrefine_edge.judging import GuardedMerger
            from memrefine_edge.testing import FakeMerger, HashEncoder

            texts = synthetic_texts(spec["n"])
            store.add_many([Entry(id=f"s{i}", content=t, timestamps=(f"2024-01-{1 + i % 28:02d}",))
                            for i, t in enumerate(texts)])
            encoder = HashEncoder()
            if spec["method"] == "rulesim":
                method, merger = "rulesim", GuardedMerger(None)
            else:
                method, merger = _fake_method(), FakeMerger()
        else:
            from memrefine_edge.engine import PipelineConfig, build
            from memrefine_edge.judging import parse_judge_model
            from memrefine_edge.store import import_file, load_sample

            if spec["store"] == "sample":
                load_sample(store)
            else:
                import_file(store, LOCOMO, format="locomo-turns", sample_id=SAMPLE_ID)
            enc_model = spec.get("encoder_model")
            judge, judge_model = parse_judge_model(spec.get("judge_model"))  # as --judge-model reads it
            options = {"keep_last_copies": spec["keep_last_copies"]} if "keep_last_copies" in spec else {}
            parts = build(PipelineConfig(method=spec["method"], method_options=options, judge=judge,
                                         judge_model=judge_model,
                                         encoder_model=str(REPO / "models" / enc_model) if enc_model else None))
            encoder, method, merger = parts.encoder, parts.method, parts.merger
        marks["store+models built"] = round(_rss_mb(), 1)
        marks["hwm before run"] = round(_hwm_mb(), 1)
        _timed_size(store, clock)
        first: dict = {}

        def progress(p) -> None:
            if not first:
                first["rss"] = round(_rss_mb(), 1)
                first["hwm"] = round(_hwm_mb(), 1)

        comp = Compressor(store, encoder=encoder, method=method, merger=merger, progress=progress,
                          mode=spec.get("mode", "paper"))
        t = time.perf_counter()
        report = comp.run(budget=spec["budget"], max_decisions=spec.get("max_decisions"))
        run_s = time.perf_counter() - t
        if first:
            marks["first decision (after embed+pairs)"] = first["rss"]
            marks["hwm at first decision"] = first["hwm"]
        marks["end"] = round(_rss_mb(), 1)
        stats = getattr(getattr(comp.method, "judge", None), "stats", None)
        seconds = dict(report.seconds)
        staged = sum(seconds.values())
        seconds["size"] = round(clock["size"], 3)
        seconds["size_in_apply"] = round(clock["size_in_apply"], 3)
        # What the stage clocks do not cover: the loop's own size checks, store.get, progress, loop overhead.
        loop_size = clock["size"] - clock["size_in_apply"]
        seconds["other"] = round(max(0.0, run_s - staged - loop_size), 3)
        d = report.decisions
        engine = run_s - seconds.get("embed", 0.0) - seconds.get("judge", 0.0) - seconds.get("merge", 0.0)
        before, after = report.before["json_bytes"], report.after["json_bytes"]
        out = {
            **spec,
            "entries_before": report.before["entries"], "entries_after": report.after["entries"],
            "json_before": before, "json_after": after, "target_bytes": report.target_bytes,
            "ratio": round(report.realized_ratio, 4), "budget_met": report.budget_met,
            "stop_reason": report.stop_reason, "decisions": d, "actions": report.actions, "sources": report.sources,
            "llm_calls": report.llm_calls, "judge_stats": stats, "seconds": seconds,
            "size_calls": int(clock["size_calls"]), "run_s": round(run_s, 3),
            "wall_s": round(time.perf_counter() - t_start, 3),
            "decisions_per_s": round(d / run_s, 2) if run_s else None,
            "engine_s": round(engine, 3), "engine_ms_per_decision": round(1000 * engine / d, 3) if d else None,
            "peak_rss_mb": round(_hwm_mb(), 1), "rss_marks_mb": marks,
        }
        if spec.get("max_decisions") and d:
            removed = before - after
            need = before - report.target_bytes
            out["progress_to_target"] = round(removed / need, 4) if need > 0 else 1.0
            out["bytes_removed_per_decision"] = round(removed / d, 1)
        store.close()
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# --- parent side --------------------------------------------------------------------


def run_child(spec: dict, env: dict | None = None) -> dict:
    """Run one spec in a fresh interpreter; its JSON is the last stdout line."""
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], capture_output=True, text=True,
                          cwd=REPO, env={**os.environ, **(env or {})})
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-3000:])
        return {**spec, "error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed"}
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"  {spec['label']}: {time.perf_counter() - t:.0f}s", file=sys.stderr)
    return out


def naive_baseline(n: int = 1_000, steps: int = 5) -> dict:
    """Median time of one naive full-recompute argmax step over ``n`` HashEncoder vectors of the synthetic texts."""
    import numpy as np

    sys.path.insert(0, str(REPO / "bench"))
    from pairs import naive_step  # the same baseline bench/pairs.py uses

    from memrefine_edge.testing import HashEncoder

    x = HashEncoder().embed(synthetic_texts(n))
    ts = []
    for _ in range(steps):
        t = time.perf_counter()
        naive_step(x, {(0, 1)})
        ts.append(time.perf_counter() - t)
    return {"n": n, "naive_step_ms": round(1000 * float(np.median(ts)), 3)}


def plot(scaling: list[dict], path: Path) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception:
        return None
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    for method, marker in (("rulesim", "o"), ("fakejudge", "s")):
        rows = sorted((r for r in scaling if r.get("method") == method and "error" not in r), key=lambda r: r["n"])
        if not rows:
            continue
        ns = [r["n"] for r in rows]
        axes[0].plot(ns, [r.get("estimated_run_s_to_budget", r["run_s"]) for r in rows], marker=marker,
                     label=f"{method}: run to 0.5 (largest N estimated)")
        axes[1].plot(ns, [r["engine_ms_per_decision"] for r in rows], marker=marker, label=f"{method}: engine")
        axes[1].plot(ns, [1000 * r["seconds"]["size"] / max(1, r["decisions"]) for r in rows], marker=marker,
                     linestyle=":", label=f"{method}: size checks")
        axes[2].plot(ns, [r["peak_rss_mb"] for r in rows], marker=marker, label=method)
    axes[0].set(xscale="log", yscale="log", xlabel="entries N", ylabel="seconds", title="time to budget 0.5")
    axes[1].set(xscale="log", yscale="log", xlabel="entries N", ylabel="ms / decision",
                title="engine cost per decision")
    axes[2].set(xscale="log", xlabel="entries N", ylabel="MiB", title="peak RSS (VmHWM)")
    axes[2].axhline(TARGET_RSS_MB, color="grey", linestyle=":", label=f"target {TARGET_RSS_MB:.0f} MB")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("memrefine_edge engine scaling (HashEncoder, synthetic stores)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def _stages(r: dict) -> str:
    s = r["seconds"]
    return " ".join(f"{k} {s[k]:.2f}" for k in ("embed", "pairs", "judge", "merge", "apply", "size", "other") if k in s)


def _encoder_memory() -> list[dict]:
    """Encoder-only memory and fidelity per session configuration (conv-26's turns)."""
    encmem: list[dict] = []
    print("encoder memory ...", file=sys.stderr)
    ref_dir = Path(tempfile.mkdtemp(prefix="memrefine-bench-ref-"))
    ref = str(ref_dir / "memrefine-bench-ref.npy")
    packaged = "all-MiniLM-L6-v2-int8.onnx"
    configs = [
        ({"label": "packaged int8, batch 32", "model": packaged, "batch": 32, "save": ref}, None),
        ({"label": "packaged int8, batch 8", "model": packaged, "batch": 8}, None),
        ({"label": "packaged int8, one text per run", "model": packaged, "batch": 1}, None),
        ({"label": "packaged int8, batch 8, graph opt DISABLE_ALL", "model": packaged, "batch": 8,
          "session": {"graph_optimization_level": "ORT_DISABLE_ALL"}}, None),
        ({"label": "default encoder, one text per run", "batch": 1}, None),
        ({"label": "default encoder, batch 8", "batch": 8}, None),
    ]
    for spec, env in configs:
        if "save" not in spec:
            spec["ref"] = ref
        row = run_child({"kind": "encmem", **spec}, env=env)
        for key in ("save", "ref"):  # the results name the temporary file, not its machine path
            if key in row:
                row[key] = REF_SHOWN
        encmem.append(row)
    shutil.rmtree(ref_dir, ignore_errors=True)
    return encmem


def _print_summary(real, scaling, naive, sizecheck, encmem, targets, load_start, load_end, real_only) -> None:
    """The tables a person reads; the JSON holds the same numbers."""
    from memrefine_edge import __version__
    from memrefine_edge.eval._report import machine_info

    print(f"\n{machine_info(__version__)['cpu']}, {os.cpu_count()} cores, load {load_start[0]:.2f} -> {load_end[0]:.2f}")
    print(f"{'run':36} {'N':>4} {'dec':>4} {'LLM':>4} {'ratio':>6} {'met':>3} {'wall s':>7} {'dec/s':>7} "
          f"{'RSS MB':>7}  stages (s)")
    for r in real:
        if "error" in r:
            print(f"{r['label']:36} ERROR {r['error']}")
            continue
        print(f"{r['label']:36} {r['entries_before']:4d} {r['decisions']:4d} {r['llm_calls']:4d} {r['ratio']:6.3f} "
              f"{'yes' if r['budget_met'] else 'no':>3} {r['wall_s']:7.1f} {r['decisions_per_s']:7.1f} "
              f"{r['peak_rss_mb']:7.0f}  {_stages(r)}")
        if "progress_to_target" in r:
            print(f"{'':36} stopped: {r['stop_reason']}; {r['progress_to_target']:.0%} of the way to the target, "
                  f"{r['bytes_removed_per_decision']:.0f} B removed per decision")
    print(f"\n{'synthetic':22} {'dec':>6} {'ratio':>6} {'run s':>7} {'engine':>7} {'ms/dec':>7} {'size ms/dec':>11} "
          f"{'RSS MB':>7}  stages (s)")
    for r in scaling:
        if "error" in r:
            print(f"{r['label']:22} ERROR {r['error']}")
            continue
        print(f"{r['label']:22} {r['decisions']:6d} {r['ratio']:6.3f} {r['run_s']:7.1f} {r['engine_s']:7.1f} "
              f"{r['engine_ms_per_decision']:7.2f} {1000 * r['seconds']['size'] / max(1, r['decisions']):11.2f} "
              f"{r['peak_rss_mb']:7.0f}  {_stages(r)}")
    for r in scaling:
        if "estimated_run_s_to_budget" in r:
            print(f"  {r['label']}: capped at {r['decisions']} decisions; estimated {r['estimated_decisions_to_budget']}"
                  f" decisions, <= {r['estimated_run_s_to_budget']:.0f} s to budget")
    if not real_only:
        print(f"naive full-recompute argmax step at N={naive['n']}: {naive['naive_step_ms']:.1f} ms")
    print("\nsize check (SELECT SUM(json_bytes) FROM entries), median ms:")
    for r in sizecheck:
        if "error" not in r:
            print(f"  N={r['n']:>6}: {r['sum_ms']:.2f} ms ({r['plan']}); with a covering index on json_bytes "
                  f"{r['sum_ms_with_index']:.2f} ms")
    if encmem:
        print(f"\n{'encoder only, conv-26 turns':42} {'load':>6} {'load hwm':>8} {'peak':>6} {'embed s':>7} {'cos min':>8}")
        for r in encmem:
            if "error" in r:
                print(f"{r['label']:42} ERROR {r['error']}")
                continue
            cos = f"{r['cos_vs_ref_min']:.4f}" if "cos_vs_ref_min" in r else "ref"
            print(f"{r['label']:42} {r['rss_after_load']:6.0f} {r['hwm_after_load']:8.0f} {r['peak_rss_mb']:6.0f} "
                  f"{r['embed_s']:7.2f} {cos:>8}")
    print(f"targets: {json.dumps(targets)}")


def main() -> int:
    from memrefine_edge import __version__
    from memrefine_edge.eval._report import machine_info

    try:
        import psutil  # noqa: F401  (every child measures its RSS with it)
    except ImportError:
        print("bench/compress.py needs the bench extra: .venv/bin/pip install -e '.[bench]'", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    load_start = list(os.getloadavg())
    real_specs = [
        {"label": "sample memrefine b0.75", "kind": "real", "store": "sample", "method": "memrefine", "budget": 0.75},
        {"label": "conv-26 rulesim b0.5", "kind": "real", "store": SAMPLE_ID, "method": "rulesim", "budget": 0.5},
        {"label": "conv-26 rulesim b0.5 packaged encoder", "kind": "real", "store": SAMPLE_ID, "method": "rulesim",
         "budget": 0.5, "encoder_model": "all-MiniLM-L6-v2-int8.onnx"},
        {"label": "conv-26 rulepr b0.5", "kind": "real", "store": SAMPLE_ID, "method": "rulepr", "budget": 0.5},
        {"label": "conv-26 memrefine b0.5", "kind": "real", "store": SAMPLE_ID, "method": "memrefine", "budget": 0.5},
        {"label": "conv-26 memrefine b0.5 strict", "kind": "real", "store": SAMPLE_ID, "method": "memrefine",
         "budget": 0.5, "mode": "strict"},
        {"label": "conv-26 memrefine b0.5 no last-copy check", "kind": "real", "store": SAMPLE_ID,
         "method": "memrefine", "budget": 0.5, "keep_last_copies": False},
        {"label": "conv-26 memrefine b0.5 judge fact", "kind": "real", "store": SAMPLE_ID, "method": "memrefine",
         "budget": 0.5, "judge_model": "fact"},
        {"label": "conv-26 memrefine b0.5 judge bundled", "kind": "real", "store": SAMPLE_ID, "method": "memrefine",
         "budget": 0.5, "judge_model": "bundled"},
    ]
    real_only = "--real-only" in sys.argv[1:]
    if "--no-llm" in sys.argv[1:]:  # the bundled GGUF judge takes 10-30 minutes on this store
        real_specs = [s for s in real_specs if s.get("judge_model") != "bundled"]
    if not LOCOMO.is_file():
        print(f"no LoCoMo file at {LOCOMO}: conv-26 runs skipped", file=sys.stderr)
        real_specs = real_specs[:1]
    print("real stores ...", file=sys.stderr)
    real = [run_child(s) for s in real_specs]
    print("scaling ...", file=sys.stderr)
    scaling = [] if real_only else [
        run_child({"label": f"synthetic {n} {m}", "kind": "synthetic", "n": n, "method": m, "budget": 0.5,
                   **({"max_decisions": CAP[n]} if n in CAP else {})})
        for n in SIZES for m in ("rulesim", "fakejudge")]
    for r in scaling:
        if "error" in r or r["budget_met"]:
            continue
        full = [f for f in scaling if f.get("method") == r["method"] and f.get("budget_met")]
        if full:  # decisions per entry of the largest full run, scaled to this N
            ref = max(full, key=lambda f: f["n"])
            need = ref["decisions"] / ref["n"] * r["n"]
            per = (r["run_s"] - r["seconds"].get("embed", 0) - r["seconds"].get("pairs", 0)) / r["decisions"]
            r["estimated_decisions_to_budget"] = round(need)
            r["estimated_run_s_to_budget"] = round(r["seconds"].get("embed", 0) + r["seconds"].get("pairs", 0)
                                                   + need * per, 1)
    naive = {"n": None, "naive_step_ms": float("nan")} if real_only else naive_baseline()
    for r in scaling:
        if r.get("n") == naive["n"] and r.get("engine_ms_per_decision"):
            r["naive_step_over_engine_per_decision"] = round(naive["naive_step_ms"] / r["engine_ms_per_decision"], 1)
    print("size checks ...", file=sys.stderr)
    sizecheck = [] if real_only else [run_child({"label": f"size check {n}", "kind": "sizecheck", "n": n})
                                      for n in SIZES]
    encmem = [] if real_only or not LOCOMO.is_file() else _encoder_memory()
    load_end = list(os.getloadavg())
    children_maxrss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024

    # --- targets ---
    conv = [r for r in real if r.get("store") == SAMPLE_ID and "error" not in r]
    reaching = [r for r in conv if r["budget_met"]]
    targets = {
        "time_to_50pct_le_60s": {r["label"]: (r["wall_s"], r["wall_s"] <= TARGET_SECONDS) for r in reaching},
        "peak_rss_le_350mb": {r["label"]: (r["peak_rss_mb"], r["peak_rss_mb"] <= TARGET_RSS_MB)
                              for r in real if "error" not in r},
    }

    _print_summary(real, scaling, naive, sizecheck, encmem, targets, load_start, load_end, real_only)

    png = None if real_only else plot(scaling, PLOT)
    out = {
        "machine": machine_info(__version__),
        "loadavg_start": load_start, "loadavg_end": load_end,
        "note": ("each run a fresh subprocess; peak_rss_mb is the child's VmHWM; wall_s includes imports, "
                 "store import and model construction; run_s is Compressor.run; stage seconds from the report, "
                 "plus 'size' (store.size calls, timed by wrapping; those inside journal writes are also in "
                 "'apply') and 'other'; engine_s = run_s - embed - judge - merge; shared machine: see loadavg"),
        "targets": {"conv_turns_to_50pct_s": f"<= {TARGET_SECONDS}", "peak_rss_mb": f"<= {TARGET_RSS_MB}",
                    "measured": targets},
        "real": real,
        "scaling": scaling,
        "naive_baseline": naive,
        "size_check": sizecheck,
        "encoder_memory": encmem,
        "rusage_children_maxrss_mb": round(children_maxrss_mb, 1),
        "plot": png and str(Path(png).relative_to(REPO)),
        "total_s": round(time.perf_counter() - t0, 1),
    }
    dest = RESULTS.with_name("compress_real.json") if real_only else RESULTS
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(".tmp")
    tmp.write_text(json.dumps(out, indent=1) + "\n")
    os.replace(tmp, dest)
    print(f"wrote {dest}" + (f" and {png}" if png else "") + f" ({out['total_s']:.0f}s)")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        print(json.dumps(child(json.loads(sys.argv[2]))))
        raise SystemExit(0)
    raise SystemExit(main())
