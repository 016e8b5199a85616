"""File footprint of a compressed store: conv-30 as turns at 50%, and a store of distinct facts.

Imports LoCoMo conv-30 (one entry per turn) into a temporary store, compresses it to 50% of its json
bytes with the default, model-free judge, and measures the SQLite file against the store's json bytes
with the undo history kept and after ``purge-history``, with what each table and index takes
(``dbstat``).

Then ``distinct_facts``: a store of :data:`FACTS` distinct short facts (``bench/_distinct_facts.py``)
compressed in paper mode by a judge that preserves every pair (the test ``HashEncoder``; nothing is
redundant, so the run judges every pair of the store and preserves them all): the file against the
json bytes when the decisions are all preserves.

Writes ``bench/results/footprint.json`` (sizes only: no LoCoMo text, no paths).

    python bench/footprint.py            # LoCoMo from ../shared/data/locomo, or MEMREFINE_LOCOMO
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from _locomo import dev_json  # bench/ is the script's folder, first on sys.path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's package, not whatever memrefine_edge an environment has installed
SAMPLE = "conv-30"
#: The acceptance line: file bytes per json byte with the history kept, and after purge-history.
TARGETS = {"with_history": 6.0, "after_purge": 3.0}


def _memrefine(*args: str) -> str:
    """Run the CLI of this checkout (not whatever ``memrefine`` an environment has installed)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    return subprocess.run([sys.executable, "-m", "memrefine_edge", *args], check=True, capture_output=True,
                          text=True, env=env).stdout


def composition(db: Path) -> dict:
    """File size, page settings and the bytes of every table and index (pages, used bytes, rows)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        objects = {}
        for name, pages, size, used in conn.execute(
                "SELECT name, COUNT(*), SUM(pgsize), SUM(pgsize - unused) FROM dbstat GROUP BY name ORDER BY 3 DESC"):
            kind = conn.execute("SELECT type FROM sqlite_master WHERE name = ?", (name,)).fetchone()
            rows = (conn.execute(f'SELECT COUNT(*) FROM "{name}"').fetchone()[0]
                    if kind is None or kind[0] == "table" else None)
            objects[name] = {"pages": pages, "bytes": size, "used": used, "rows": rows,
                             "used_per_row": round(used / rows, 1) if rows else None}
        json_bytes = conn.execute("SELECT value FROM totals WHERE name = 'json_bytes'").fetchone()[0]
        pragmas = {p: conn.execute(f"PRAGMA {p}").fetchone()[0]
                   for p in ("page_size", "page_count", "freelist_count", "auto_vacuum")}
    finally:
        conn.close()
    file_bytes = db.stat().st_size
    return {"file_bytes": file_bytes, "json_bytes": json_bytes, "ratio": round(file_bytes / json_bytes, 2),
            **pragmas, "objects": objects}


#: Entries of the distinct-fact store (every pair of them is judged: FACTS * (FACTS - 1) / 2 preserves).
FACTS = 400


def all_preserved(db: Path) -> dict:
    """A store of :data:`FACTS` distinct facts, every pair judged and preserved; its report and composition."""
    from _distinct_facts import distinct_facts

    from memrefine_edge.core import Decision
    from memrefine_edge.engine import Compressor
    from memrefine_edge.methods import MemRefineMethod
    from memrefine_edge.store import MemoryStore
    from memrefine_edge.testing import AlwaysJudge, FakeMerger, HashEncoder

    keep = Decision("preserve", None, reason="each entry holds facts of its own", source="scorer")
    with MemoryStore(db) as store:
        store.add_many(distinct_facts(FACTS))
        report = Compressor(store, encoder=HashEncoder(), method=MemRefineMethod(judge=AlwaysJudge(keep)),
                            merger=FakeMerger(), mode="paper").run(budget=0.5)
    return {"entries": FACTS, "actions": report.actions, "decisions": report.decisions,
            "with_history": composition(db)}


def main() -> None:
    data = dev_json()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "conv30.db"
        _memrefine("import", "--format", "locomo-turns", str(data), "--sample", SAMPLE, "--db", str(db))
        report = json.loads(_memrefine("compress", "--db", str(db), "--budget", "0.5", "--json"))
        stats = json.loads(_memrefine("stats", "--db", str(db), "--json", "--recount"))
        with_history = composition(db)
        _memrefine("purge-history", "--db", str(db), "--yes")
        after_purge = composition(db)
        facts = all_preserved(Path(tmp) / "facts.db")
    result = {
        "command": "python bench/footprint.py",
        "sample": SAMPLE, "format": "locomo-turns", "budget": 0.5, "judge": "default (model-free)",
        "actions": report["actions"], "decisions": report["decisions"], "entries": report["after"]["entries"],
        "history_entries": stats["history_entries"], "history_bytes": stats["history_bytes"],
        "with_history": with_history, "after_purge": after_purge,
        "targets": {k: {"ratio_at_most": v, "ratio": r[k]["ratio"], "met": r[k]["ratio"] <= v}
                    for r in [{"with_history": with_history, "after_purge": after_purge}] for k, v in TARGETS.items()},
        "distinct_facts": facts,
    }
    out = ROOT / "bench" / "results" / "footprint.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    for key in TARGETS:
        t = result["targets"][key]
        print(f"{key}: file {result[key]['file_bytes']:,} B = {t['ratio']}x json (target <= {t['ratio_at_most']}x: "
              f"{'met' if t['met'] else 'not met'})")
    f = facts["with_history"]
    print(f"distinct facts ({FACTS}, {facts['decisions']:,} preserves): file {f['file_bytes']:,} B = "
          f"{f['ratio']}x json")


if __name__ == "__main__":
    main()
