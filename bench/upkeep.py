"""Upkeep benchmark: a store kept under its budget while an assistant keeps adding to it.

Run: ``.venv/bin/python bench/upkeep.py`` (both streams at 1k, 10k and 100k entries, the real
encoder and the default judge; each run capped in time) or e.g. ``--sizes 1000 --streams facts``.
Writes ``bench/results/upkeep.json`` and a markdown summary beside it (``--out`` for another name).

The store is kept exactly as the docs' Upkeep example keeps one::

    Upkeep(Compressor(store, encoder=OnnxEncoder(threads=2), method=MemRefineMethod(judge=default_judge()),
                      merger=GuardedMerger(None)), high_bytes=..., low_bytes=...).install()

with watermarks scaled to the stream: high = 25% of the json size of the whole stream, low = 5/6 of
high (1,500 facts of ~160 bytes with 60,000 / 50,000 bytes is the same shape). Two streams:

* ``facts``: distinct short facts, deterministic: four sentence templates over 60 names, 40 hobbies,
  40 cities and 45 years, each combination used once (a fixed permutation of the index space), so
  no entry repeats another; in sessions of 50 adds. What an assistant mostly accumulates.
* ``locomo``: the turns of the 7 LoCoMo dev conversations (``../shared/data/locomo``, or
  ``MEMREFINE_LOCOMO``), in their sessions, then again with the speakers renamed (other people's
  conversations of the same shape) until the size is reached.

Each (stream, size) runs in a fresh subprocess (its peak RSS is its own ``VmHWM``), through the same
replay loop as ``memrefine eval locomo --stream`` (:func:`memrefine_edge.eval.replay`): every add
timed, the size read at its return (overshoot = how far above the high watermark, over it), the
keeper let settle at each session's end (overshoot *at idle*). Every ``n / 300`` adds a search is
timed right after an add, as an assistant that searches every turn would meet it: the adds before
are caught up first, untimed (their embeddings, and a search that brings the search index up to
them), so the timed search pays for one add's change and what the worker did meanwhile; then once
more with no write in between. (Before the catch-up search was added, the timed search also read
every change of the ``n / 300`` adds since the previous search: at 100,000 entries that measured
about 333 adds' changes, not one.) Passes: their decisions, their measured phase seconds, and decisions
per entry added since the previous pass. File bytes (pages in use) against the json bytes at the end: of
the live entries (``file_over_json``), and of the live entries with those the undo history keeps
(``file_over_kept_json``).

A run stops at its time cap between two adds; an add that blocks longer is ended by killing the
process at the cap plus a grace period, and the last progress it wrote is reported, with how long
the add had then been blocked at least. Sizes and caps are recorded; nothing is asserted: the targets
are printed as pass/fail lines.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _proc import status_mb  # noqa: E402  (bench/ is the script's folder, first on sys.path)

__all__ = ["distinct_facts", "locomo_stream", "main"]

RESULTS = Path(__file__).resolve().parent / "results" / "upkeep.json"
SIZES = (1_000, 10_000, 100_000)
CAPS = {1_000: 600.0, 10_000: 600.0, 100_000: 900.0}
HIGH_SHARE, LOW_OF_HIGH = 0.25, 5 / 6
TARGETS = {"add_ms_p99": 10.0, "add_ms_max": 100.0, "decisions_per_added_entry": 64.0, "file_over_json": 6.0,
           "search_after_add_ms_p99_100k": 20.0}
GRACE_S = 120.0

NAMES = ("Ana", "Ben", "Clara", "Dev", "Elena", "Farid", "Grace", "Hugo", "Ines", "Jonas", "Kira", "Liam", "Maya",
         "Nils", "Olga", "Pablo", "Quinn", "Rosa", "Sami", "Tara", "Umar", "Vera", "Wes", "Xenia", "Yusuf", "Zoe",
         "Aiko", "Bruno", "Chloe", "Diego", "Emma", "Felix", "Gina", "Hiro", "Ivy", "Jack", "Lena", "Marco", "Nora",
         "Omar", "Petra", "Raul", "Sofia", "Tomas", "Uma", "Viktor", "Wanda", "Yara", "Zane", "Alba", "Boris",
         "Carmen", "Dario", "Edith", "Fiona", "Gus", "Hana", "Ivan", "Julia", "Karl")
HOBBIES = ("pottery", "chess", "rock climbing", "watercolour painting", "the violin", "birdwatching",
           "sourdough baking", "salsa dancing", "archery", "knitting", "kayaking", "astronomy", "calligraphy",
           "fencing", "beekeeping",
           "origami", "surfing", "woodworking", "photography", "the cello", "bouldering", "gardening", "judo",
           "sailing", "embroidery", "trail running", "jazz piano", "glassblowing", "tai chi", "skateboarding",
           "mosaic tiling", "falconry", "the harp", "cross-country skiing", "bookbinding", "rowing", "ceramics",
           "mountain biking", "opera singing", "stand-up comedy")
CITIES = ("Lisbon", "Porto", "Kyoto", "Oslo", "Lima", "Accra", "Hanoi", "Quebec", "Tbilisi", "Seville", "Gdansk",
          "Cusco", "Nairobi", "Tallinn", "Valparaiso", "Krakow", "Bergen", "Hobart", "Ljubljana", "Cork", "Leipzig",
          "Marrakesh", "Busan", "Salta", "Zadar", "Tromso", "Malmo", "Antwerp", "Bologna", "Graz", "Dakar", "Perth",
          "Sapporo", "Cuenca", "Tartu", "Galway", "Lyon", "Bilbao", "Turku", "Plovdiv")
YEARS = tuple(range(1980, 2025))
TEMPLATES = ("{name} took up {hobby} in {city} in {year}.",
             "In {year}, {name} moved to {city} and joined a {hobby} club.",
             "{name} has practised {hobby} since {year}, mostly in {city}.",
             "{name} met a {hobby} teacher in {city} in {year}.")


# --- the streams ------------------------------------------------------------------------------


def distinct_facts(n: int, *, seed: int = 0) -> Iterator[dict]:
    """``n`` distinct facts as entry dicts (id, content), deterministic, made as they are read (the
    stream's text does not sit in the measured process); at most 4 x 60 x 40 x 40 x 45."""
    space = len(TEMPLATES) * len(NAMES) * len(HOBBIES) * len(CITIES) * len(YEARS)
    if n > space:
        raise ValueError(f"at most {space:,} distinct facts")
    step = 2_654_435_761  # coprime with the space (odd and not a multiple of 3 or 5): a permutation
    assert all(step % p for p in (2, 3, 5)), "the step must be coprime with the index space"
    offset = random.Random(seed).randrange(space)
    for i in range(n):
        j = (offset + i * step) % space
        j, y = divmod(j, len(YEARS))
        j, c = divmod(j, len(CITIES))
        j, h = divmod(j, len(HOBBIES))
        t, m = divmod(j, len(NAMES))
        text = TEMPLATES[t].format(name=NAMES[m], hobby=HOBBIES[h], city=CITIES[c], year=YEARS[y])
        yield {"id": f"fact-{i}", "content": text[0].upper() + text[1:]}


def _locomo_json() -> Path:
    folder = Path(os.environ.get("MEMREFINE_LOCOMO") or REPO.parent / "shared" / "data" / "locomo")
    return folder / "locomo-dev.json" if folder.is_dir() else folder


def locomo_stream(n: int, path: Path) -> Iterator[list[dict]]:
    """The dev conversations' turns in sessions (entry dicts), repeated with renamed speakers up to ``n``."""
    from memrefine_edge.store import parse_file

    samples = json.loads(path.read_text(encoding="utf-8"))
    entries, _ = parse_file(path, format="locomo-turns")
    speakers = {s["sample_id"]: (s["conversation"]["speaker_a"], s["conversation"]["speaker_b"]) for s in samples}
    session: list[dict] = []
    total, rnd = 0, 0
    while total < n:
        current: tuple[str, int] | None = None
        for e in entries:
            if total >= n:
                break
            sid = e.metadata["sample_id"]
            content = e.content
            if rnd:  # other people's conversations of the same shape
                for k, old in enumerate(speakers[sid]):
                    new = NAMES[(rnd * 7 + k * 31 + len(sid)) % len(NAMES)]
                    content = re.sub(rf"\b{re.escape(old)}\b", new, content)
            key = (sid, int(e.metadata["session"]))
            if key != current and session:
                yield session
                session = []
            current = key
            pid = f"r{rnd}:{e.id}" if rnd else e.id
            session.append({"id": pid, "content": content, "timestamps": list(e.timestamps),
                            "provenance": list(e.provenance), "metadata": dict(e.metadata)})
            total += 1
        rnd += 1
    if session:
        yield session


def _sessions(stream: str, n: int) -> Iterator[list[dict]]:
    """The stream's sessions, made as they are read: facts in sessions of 50, LoCoMo in its own."""
    if stream == "locomo":
        yield from locomo_stream(n, _locomo_json())
        return
    session: list[dict] = []
    for fact in distinct_facts(n):
        session.append(fact)
        if len(session) == 50:
            yield session
            session = []
    if session:
        yield session


def _queries(stream: str) -> list[str]:
    if stream == "facts":
        return [f"What does {NAMES[i % len(NAMES)]} do in {CITIES[(i * 7) % len(CITIES)]}?" for i in range(64)]
    samples = json.loads(_locomo_json().read_text(encoding="utf-8"))
    return [q["question"] for s in samples for q in s["qa"][:10]]


# --- the measured child -------------------------------------------------------------------------


def _entry(d: dict):
    from memrefine_edge import Entry

    return Entry(id=d["id"], content=d["content"], timestamps=tuple(d.get("timestamps", ())),
                 provenance=tuple(d.get("provenance", ())), metadata=d.get("metadata", {}))


def child(spec: dict) -> dict:
    """One (stream, size) run; writes progress to ``spec['progress']`` every 2 s and returns the result."""
    from memrefine_edge import (
        Compressor,
        GuardedMerger,
        MemoryStore,
        MemRefineMethod,
        OnnxEncoder,
        Upkeep,
        default_judge,
    )
    from memrefine_edge.eval import UpkeepKeeper, passes_summary, percentile, replay

    batches = ([_entry(d) for d in s] for s in _sessions(spec["stream"], spec["n"]))
    queries = _queries(spec["stream"])
    every = max(2, spec["n"] // 300)
    search_ms: list[float] = []
    search_quiet_ms: list[float] = []
    catch_up_ms: list[float] = []
    progress = Path(spec["progress"])
    store = MemoryStore(spec["db"])
    encoder = OnnxEncoder(threads=2)
    compressor = Compressor(store, encoder=encoder, method=MemRefineMethod(judge=default_judge()),
                            merger=GuardedMerger(None))
    keeper = UpkeepKeeper(Upkeep(compressor, high_bytes=spec["high"], low_bytes=spec["low"]))
    started = time.perf_counter()
    last = [0.0]

    def snapshot(stats, final: bool) -> dict:
        return {**stats.summary(), **passes_summary(keeper.passes(), stats.added_per_pass),
                "search_after_add_ms": {f"p{q}": percentile(search_ms, q) for q in (50, 99)}
                | {"max": max(search_ms) if search_ms else None, "n": len(search_ms)},
                "search_no_write_ms": {f"p{q}": percentile(search_quiet_ms, q) for q in (50, 99)},
                "catch_up_ms": {"p50": percentile(catch_up_ms, 50), "max": max(catch_up_ms, default=None)},
                "peak_rss_mb": round(status_mb("VmHWM"), 1), "elapsed_s": round(time.perf_counter() - started, 1),
                "final": final}

    def after_add(stats) -> None:
        i = stats.adds
        if i % every == every - 1:  # catch up with the adds before: the next add's search pays for one change
            t = time.perf_counter()
            store.ensure_embeddings(encoder)
            store.search(queries[(i // every) % len(queries)], k=10, encoder=encoder)  # the index follows them
            catch_up_ms.append((time.perf_counter() - t) * 1000)
        elif i % every == 0:
            q = queries[(i // every) % len(queries)]
            t = time.perf_counter()
            store.search(q, k=10, encoder=encoder)
            search_ms.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            store.search(q, k=10, encoder=encoder)
            search_quiet_ms.append((time.perf_counter() - t) * 1000)
        now = time.perf_counter()
        if now - last[0] >= 2.0:  # progress for the parent, should this process be ended at the cap
            last[0] = now
            tmp = progress.with_suffix(".tmp")
            tmp.write_text(json.dumps(snapshot(stats, False)))
            os.replace(tmp, progress)

    deadline = started + spec["cap_s"]
    stats = replay(store, batches, keeper, high_bytes=spec["high"], deadline=deadline, after_add=after_add)
    keeper.close()
    out = snapshot(stats, True)
    store.refresh_disk()
    out.update(entries=len(store), json_bytes=store.json_bytes(), file_bytes=store.file_bytes(),
               bytes_on_disk=sum(p.stat().st_size for p in (Path(spec["db"]), Path(spec["db"] + "-wal"))
                                 if p.exists()))
    out["file_over_json"] = round(out["file_bytes"] / max(1, out["json_bytes"]), 2)
    stats = store.stats()  # the undo history's share: what `memrefine purge-history` would return
    out.update(history_entries=stats.history_entries, history_bytes=stats.history_bytes,
               file_over_json_without_history=round((out["file_bytes"] - stats.history_bytes)
                                                    / max(1, out["json_bytes"]), 2))
    store.close()
    # What the file keeps, in json: the live entries and the entries its undo history can bring back.
    with sqlite3.connect(spec["db"]) as conn:
        out["history_json_bytes"] = int(conn.execute("SELECT COALESCE(SUM(json_bytes), 0) FROM removals").fetchone()[0])
    out["file_over_kept_json"] = round(out["file_bytes"] / max(1, out["json_bytes"] + out["history_json_bytes"]), 2)
    out["file_by_table"] = _file_by_table(Path(spec["db"]))
    return out


def _file_by_table(db: Path) -> dict[str, int]:
    """Bytes in use per table and index (SQLite's dbstat), largest first: what the file is made of."""
    import sqlite3

    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT name, SUM(pgsize - unused) FROM dbstat GROUP BY name ORDER BY 2 DESC").fetchall()
    finally:
        conn.close()
    return {str(name): int(n) for name, n in rows if n}


# --- parent side --------------------------------------------------------------------------------


def _stream_json_bytes(stream: str, n: int, tmp: Path) -> int:
    """The json size of the whole stream (every entry in one store, no upkeep)."""
    from memrefine_edge import MemoryStore

    with MemoryStore(tmp / "whole.db") as store:
        for batch in _sessions(stream, n):
            store.add_many([_entry(d) for d in batch])
        return store.json_bytes()


def run_child(stream: str, n: int, cap_s: float, *, grace_s: float = GRACE_S) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="memrefine-bench-upkeep-"))
    t0 = time.perf_counter()
    try:
        whole = _stream_json_bytes(stream, n, tmp)
        high = int(whole * HIGH_SHARE)
        spec = {"stream": stream, "n": n, "cap_s": cap_s, "high": high, "low": int(high * LOW_OF_HIGH),
                "db": str(tmp / "store.db"), "progress": str(tmp / "progress.json")}
        row = {"stream": stream, "n": n, "cap_s": cap_s, "stream_json_bytes": whole, "high_bytes": spec["high"],
               "low_bytes": spec["low"], "load_start": [round(x, 2) for x in os.getloadavg()]}
        started = time.time()
        try:
            proc = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], capture_output=True,
                                  text=True, cwd=REPO, timeout=cap_s + grace_s)
        except subprocess.TimeoutExpired:  # an add (a pass inside it) blocked past the cap: ended here
            killed_at = time.time()
            progress = Path(spec["progress"])
            last = json.loads(progress.read_text()) if progress.exists() else {}
            written = progress.stat().st_mtime if progress.exists() else started
            row.update(last, killed=True, final=False,
                       blocked_add_s_at_least=round(killed_at - written - 2.0, 1),
                       note=f"ended at the cap + {grace_s:.0f} s grace while an add was blocked; figures are the "
                            "last progress written (sizes and file bytes not read)")
        else:
            if proc.returncode != 0:
                sys.stderr.write(proc.stderr[-3000:])
                row["error"] = (proc.stderr.strip().splitlines() or ["failed"])[-1]
            else:
                row.update(json.loads(proc.stdout.strip().splitlines()[-1]), killed=False)
        row["load_end"] = [round(x, 2) for x in os.getloadavg()]
        row["wall_s"] = round(time.perf_counter() - t0, 1)
        return row
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _machine() -> dict:
    cpu = ""
    try:
        cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                    if line.startswith("model name")), "")
    except OSError:
        pass
    import numpy

    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), "numpy": numpy.__version__,
            "platform": platform.platform()}


def _verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("PASS" if ok else "FAIL")


def verdicts(rows: list[dict]) -> list[str]:
    """The issue's speed targets as pass/fail lines, one per (stream, size) and target."""
    out = []
    for r in rows:
        tag = f"{r['stream']} n={r['n']:,}"
        if "error" in r:
            out.append(f"ERROR {tag}: {r['error']}")
            continue
        reached = r.get("adds", 0)
        done = bool(r.get("finished"))
        out.append(f"{_verdict(done)} {tag}: reached the size ({reached:,} of {r['n']:,} adds in "
                   f"{r.get('elapsed_s')} s{', ended while an add was blocked' if r.get('killed') else ''})")
        add = r.get("add_ms", {})
        blocked_ms = (r.get("blocked_add_s_at_least") or 0) * 1000
        p99, mx = add.get("p99"), max(add.get("max") or 0, blocked_ms) if add else None
        out.append(f"{_verdict(None if p99 is None else p99 <= TARGETS['add_ms_p99'])} {tag}: add p99 {p99} ms "
                   f"<= {TARGETS['add_ms_p99']:g}")
        out.append(f"{_verdict(None if mx is None else mx <= TARGETS['add_ms_max'])} {tag}: add max {mx} ms "
                   f"<= {TARGETS['add_ms_max']:g}")
        d = (r.get("decisions_per_added_entry") or {}).get("max")
        out.append(f"{_verdict(None if d is None else d <= TARGETS['decisions_per_added_entry'])} {tag}: "
                   f"decisions per pass / entries added {d} <= {TARGETS['decisions_per_added_entry']:g}")
        idle = (r.get("overshoot_at_idle") or {}).get("max")
        out.append(f"{_verdict(None if idle is None else idle == 0)} {tag}: budget holds at idle "
                   f"(overshoot at idle max {idle})")
        f = r.get("file_over_json")
        out.append(f"{_verdict(None if f is None else f <= TARGETS['file_over_json'])} {tag}: file / json {f} "
                   f"<= {TARGETS['file_over_json']:g} (without the undo history of "
                   f"{r.get('history_entries', 0):,} removed entries: {r.get('file_over_json_without_history')}; "
                   f"against the json of the live entries and of the history together: "
                   f"{r.get('file_over_kept_json')})")
        if r["n"] >= 100_000:
            s = (r.get("search_after_add_ms") or {}).get("p99")
            out.append(f"{_verdict(None if s is None else s <= TARGETS['search_after_add_ms_p99_100k'])} {tag}: "
                       f"search after an add p99 {s} ms <= {TARGETS['search_after_add_ms_p99_100k']:g}")
    return out


def _f(x, digits: int = 1) -> str:
    if x is None:
        return "–"
    return f"{x:,.{digits}f}" if isinstance(x, float) else f"{x:,}" if isinstance(x, int) else str(x)


def markdown(result: dict) -> str:
    lines = ["# Upkeep benchmark", "", f"Command: `{result['command']}`", "",
             f"Machine: {result['machine']['cpu']}, {result['machine']['cores']} cores. Code: {result['code']}.", "",
             "Upkeep as the docs' example installs it (default encoder with 2 threads, default judge, "
             f"deterministic merge); high watermark {HIGH_SHARE:.0%} of the stream's json size, low 5/6 of it. "
             "Overshoot: (size - high) / high when positive; at idle: at each session's end, after the keeper "
             "settled. Search: right after an add (the adds before caught up first), and again with no write.", "",
             "| stream | n | reached (adds) | s | add ms p50 / p99 / max | blocked add (s, at least) | "
             "overshoot at add max; share of adds | at idle max; points over | passes | decisions | "
             "decisions / added entry max | "
             "pass s p50 / max | search after add ms p50 / p99 | search, no write ms p50 | file / json (without undo "
             "history; against live and history json) | peak RSS MB |",
             "|" + "---|" * 16]
    for r in result["rows"]:
        if "error" in r:
            lines.append(f"| {r['stream']} | {r['n']:,} | error: {r['error']} |" + " |" * 13)
            continue
        add, over, idle = r.get("add_ms", {}), r.get("overshoot_at_add", {}), r.get("overshoot_at_idle", {})
        ps, sa, sq = r.get("pass_seconds", {}), r.get("search_after_add_ms", {}), r.get("search_no_write_ms", {})
        idle_over = round((idle.get("share_over") or 0) * (idle.get("points") or 0))
        lines.append(
            f"| {r['stream']} | {r['n']:,} | {r.get('adds', 0):,}{'' if r.get('finished') else ' (capped)'} | "
            f"{_f(r.get('elapsed_s'), 0)} | {_f(add.get('p50'), 2)} / {_f(add.get('p99'), 1)} / "
            f"{_f(add.get('max'), 0)} | "
            f"{_f(r.get('blocked_add_s_at_least'), 0)} | {_f(over.get('max'), 3)}; "
            f"{_f(over.get('share_over'), 3)} | "
            f"{_f(idle.get('max'), 3)}; {idle_over}/{idle.get('points', 0)} | {r.get('passes', 0)} | "
            f"{r.get('decisions', 0):,} | {_f((r.get('decisions_per_added_entry') or {}).get('max'), 1)} | "
            f"{_f(ps.get('p50'), 2)} / {_f(ps.get('max'), 1)} | {_f(sa.get('p50'), 1)} / {_f(sa.get('p99'), 1)} | "
            f"{_f(sq.get('p50'), 1)} | {_f(r.get('file_over_json'), 1)} "
            f"({_f(r.get('file_over_json_without_history'), 1)}; {_f(r.get('file_over_kept_json'), 1)}) | "
            f"{_f(r.get('peak_rss_mb'), 0)} |")
    lines += ["", "Targets (reported, not asserted):", "", *(f"- {v}" for v in result["verdicts"]), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default=",".join(str(s) for s in SIZES))
    ap.add_argument("--streams", default="facts,locomo")
    ap.add_argument("--caps", default=",".join(f"{n}:{c:g}" for n, c in CAPS.items()),
                    help="seconds per size, e.g. 1000:600,10000:600 (a size not named gets the largest cap)")
    ap.add_argument("--grace", type=float, default=GRACE_S,
                    help="seconds past its cap before a run blocked in an add is ended")
    ap.add_argument("--code", default="this checkout", help="what code was measured (recorded)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--child")
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return 0
    caps = {int(k): float(v) for k, v in (c.split(":") for c in args.caps.split(","))}
    streams = [s for s in args.streams.split(",") if s]
    if any(s not in ("facts", "locomo") for s in streams):
        print(f"unknown stream in {args.streams!r}; use facts, locomo", file=sys.stderr)
        return 2
    if "locomo" in streams and not _locomo_json().is_file():
        print("needs the dev conversations at ../shared/data/locomo beside the repository (or MEMREFINE_LOCOMO)",
              file=sys.stderr)
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    shown = [a if not a.startswith("/") else Path(a).name for a in (argv if argv is not None else sys.argv[1:])]
    result = {"command": "python bench/upkeep.py " + " ".join(shlex.quote(a) for a in shown), "code": args.code,
              "machine": _machine(),
              "high_share": HIGH_SHARE, "low_of_high": LOW_OF_HIGH, "targets": TARGETS, "rows": [], "verdicts": []}
    rows = result["rows"]
    for stream in streams:
        for n in (int(x) for x in args.sizes.split(",")):
            cap = caps.get(n, max(caps.values()))
            print(f"{stream} n={n:,}: cap {cap:g} s", file=sys.stderr, flush=True)
            try:
                rows.append(run_child(stream, n, cap, grace_s=args.grace))
            except Exception as exc:  # one run's failure is recorded; the others still run
                rows.append({"stream": stream, "n": n, "cap_s": cap, "error": f"{type(exc).__name__}: {exc}"})
            r = rows[-1]
            print(f"  reached {r.get('adds', 0):,} adds in {r.get('elapsed_s')} s; add p99 "
                  f"{(r.get('add_ms') or {}).get('p99')} ms, max {(r.get('add_ms') or {}).get('max')} ms",
                  file=sys.stderr, flush=True)
            result["verdicts"] = verdicts(rows)  # after every run: a stopped benchmark keeps what it measured
            args.out.write_text(json.dumps(result, indent=1) + "\n")
            args.out.with_suffix(".md").write_text(markdown(result))
    print(f"wrote {args.out.name} and {args.out.with_suffix('.md').name}")
    print("\n".join(result["verdicts"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
