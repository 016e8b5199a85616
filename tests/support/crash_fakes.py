"""Shared pieces of the crash and concurrency tests.

Used by ``tests/support/crash_worker.py`` (the subprocess that gets killed) and by the
tests that check what it left behind, so both sides agree on the store, the
method and what "the same store" means.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import random
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from memrefine_edge.core import CompressionReport, Decision, Entry
from memrefine_edge.engine import Compressor
from memrefine_edge.methods import Method, PairContext
from memrefine_edge.store import MemoryStore
from memrefine_edge.store._journal import unpack_text
from memrefine_edge.testing import HashEncoder
from tests.support.fakes import ConcatMerger

WORDS = ("tea coffee hiking paris berlin guitar piano dog cat running yoga novel movie sister brother "
         "birthday concert garden painting camping beach museum school job interview recipe soup").split()
FILLER = ("Ana: thanks, see you soon!", "Ben: haha that's great", "Ana: good morning!", "Ben: ok cool, bye")

#: Fields of a decision that must be the same in every run of the same command.
DECISION_KEY = ("step", "a_id", "b_id", "action", "target", "source", "reason", "created_ids", "removed_ids",
                "size_before", "size_after")


def campaign_entries(n: int, seed: int = 0) -> list[Entry]:
    """Entries with near-duplicates, filler, a link chain plus random back-links, and 1-2 provenance ids."""
    rng = random.Random(seed)
    out: list[Entry] = []
    for i in range(n):
        words = rng.sample(WORDS, 4) + [f"w{rng.randint(0, 30)}"]
        if i and rng.random() < 0.3:  # near-duplicate of an earlier entry
            words = out[rng.randrange(i)].content.split()[1:5] + [f"x{i % 7}"]
        content = ("Ana: " if i % 2 else "Ben: ") + " ".join(words)
        if i % 11 == 5:
            content = FILLER[i % len(FILLER)]
        links = [f"e{i - 1:03d}"] if i else []
        if i > 3 and rng.random() < 0.4:
            links.append(f"e{rng.randrange(i - 2):03d}")
        prov = [f"D{i // 10}:{i % 10}"] + ([f"S{i}"] if i % 3 == 0 else [])
        out.append(Entry(
            id=f"e{i:03d}", content=content, keywords=tuple(words[:2]), links=tuple(dict.fromkeys(links)),
            timestamps=(f"2023-05-{1 + i % 28:02d}",), metadata={"session": i // 10}, provenance=tuple(prov),
        ))
    return out


def make_campaign_store(path: Path, n: int = 50, seed: int = 0) -> None:
    with MemoryStore(path) as store:
        store.add_many(campaign_entries(n, seed))


def _bucket(*parts: str) -> int:
    return int(hashlib.sha256("|".join(parts).encode()).hexdigest(), 16) % 10


class CampaignMethod(Method):
    """Deterministic decisions from a hash of the pair's ids (the same in every process).

    About 5 delete : 3 merge : 2 preserve; ``policy`` is a salt (another
    policy, other decisions). ``sleep_ms`` slows every decision down (not
    recorded with the run, so a slow run can be resumed by a fast one).
    """

    name = "campaign"

    def __init__(self, *, policy: str = "mixed", sleep_ms: float = 0.0,
                 on_decide: Callable[[], None] | None = None) -> None:
        self.policy = policy
        self.sleep_ms = sleep_ms
        self.on_decide = on_decide

    def describe(self) -> dict[str, Any]:
        return {"policy": self.policy}

    def decide(self, pair: PairContext) -> Decision:
        if self.sleep_ms:
            time.sleep(self.sleep_ms / 1000)
        b = _bucket(pair.a.id, pair.b.id, self.policy)
        kind = "delete" if b < 5 else "merge" if b < 8 else "preserve"
        if kind == "delete":
            decision = Decision(action="delete", target="a" if b % 2 else "b", reason="campaign", source="rule")
        elif kind == "merge":
            decision = Decision(action="merge", target=None, merge_instruction="keep all", reason="campaign",
                                source="llm")
        else:
            decision = Decision(action="preserve", target=None, reason="campaign", source="llm")
        if self.on_decide:  # after deciding, before anything is written
            self.on_decide()
        return decision


@dataclass(frozen=True)
class Config:
    """One compression command: the store it starts from and its arguments."""

    name: str
    budget: float
    mode: str = "paper"
    min_similarity: float | None = None
    policy: str = "mixed"
    n: int = 50
    seed: int = 1
    #: Seconds decisions may share a transaction (0: one commit per decision, which the
    #: per-decision kill points and pauses of the worker are stated in).
    commit_window: float = 0.0

    def argv(self) -> list[str]:
        """The worker's arguments for this command (see crash_worker.py)."""
        out = ["--budget", str(self.budget), "--mode", self.mode, "--policy", self.policy,
               "--commit-window", str(self.commit_window)]
        if self.min_similarity is not None:
            out += ["--min-similarity", str(self.min_similarity)]
        return out


def compressor_for(store: MemoryStore, *, mode: str, policy: str, min_similarity: float | None,
                   sleep_ms: float = 0.0, on_decide=None, on_merge=None, progress=None,
                   commit_window: float = 0.0) -> Compressor:
    """The one way the worker and the tests build the compressor, so they run the same command."""
    return Compressor(store, encoder=HashEncoder(), merger=ConcatMerger(on_merge=on_merge), mode=mode,
                      method=CampaignMethod(policy=policy, sleep_ms=sleep_ms, on_decide=on_decide),
                      min_similarity=min_similarity, k=4, progress=progress, commit_window_s=commit_window)


def compress_in_process(path: Path, cfg: Config, *, progress=None) -> CompressionReport:
    """The same command as the worker runs, in this process (continues an interrupted run)."""
    with MemoryStore(path, create=False) as store:
        comp = compressor_for(store, mode=cfg.mode, policy=cfg.policy, min_similarity=cfg.min_similarity,
                              commit_window=cfg.commit_window)
        comp.progress = progress
        return comp.run(budget=cfg.budget)


# --- what a store holds ---------------------------------------------------------


def export(store: MemoryStore) -> list[dict]:
    """The memory itself: every live entry's counted fields, in order."""
    return [e.counted_fields() for e in store.entries()]


def decision_keys(store: MemoryStore) -> list[tuple]:
    return [tuple(getattr(d, k) for k in DECISION_KEY) for d in store.journal.decisions()]


def check_invariants(path: Path, original: list[Entry], reference: list[tuple],
                     preserved: list[tuple[str, str]] | None = None) -> dict[str, Any]:
    """Everything that must hold after a crash at any moment; returns a summary (``decisions``: the cursor).

    * ``PRAGMA integrity_check`` is ok.
    * At most one run, its cursor = its audited decisions + the preserves it counted (a preserve has
      no audit row), the audited steps increasing and below the cursor.
    * Atomicity: replaying the journal (remove ``removed_ids``, add
      ``created_ids``) over the original ids gives exactly the live ids, every
      removed entry has its undo copy at that step, the last decision's
      ``size_after`` is the store's size: no half-applied decision.
    * Facts: every provenance id of the original store is in a live entry's
      provenance or in the provenance of an entry removed by an audited
      ``delete``/``evict`` decision (read from the history); a merged entry
      carries the provenance of both entries it replaced.
    * Determinism: the decisions so far are a prefix of the uninterrupted run's, and the pairs
      preserved so far are among its ``preserved`` pairs.
    """
    # The history table has no public reader: a read-only connection of its own.
    with MemoryStore(path, create=False) as store, contextlib.closing(sqlite3.connect(path)) as conn:
        assert store.integrity_check() == "ok"
        for name, v in store.recount().items():  # the running size totals survived the kill
            assert v["total"] == v["recount"], (name, v)
        runs = store.journal.runs()
        assert len(runs) <= 1, runs
        decisions = store.journal.decisions()
        cursor = runs[0].cursor if runs else 0
        assert cursor == len(decisions) + (sum(runs[0].preserved.values()) if runs else 0)
        steps = [d.step for d in decisions]
        assert steps == sorted(set(steps)) and all(0 <= step < cursor for step in steps)

        def removed_copy(d) -> dict[str, list[str]]:
            rows = conn.execute("SELECT id, provenance FROM history WHERE run_id = ? AND step = ?",
                                (d.run_id, d.step)).fetchall()
            return {r[0]: json.loads(unpack_text(r[1])) for r in rows}

        live = {e.id: e for e in store.entries()}
        ids = {e.id for e in original}
        provenance: dict[str, set[str]] = {e.id: set(e.provenance) for e in original}
        audited_removed: set[str] = set()
        for i, d in enumerate(decisions):
            copies = removed_copy(d)
            assert set(copies) == set(d.removed_ids), (d.step, d.action, copies, d.removed_ids)
            for rid in d.removed_ids:
                assert rid in ids, (d.step, rid)
                assert set(copies[rid]) == provenance[rid], (d.step, rid)
                ids.discard(rid)
                if d.action in ("delete", "evict"):
                    audited_removed |= set(copies[rid])
            for cid in d.created_ids:
                assert cid not in ids
                ids.add(cid)
                assert cid in live or any(cid in later.removed_ids for later in decisions[i + 1:])
                merged_from = set().union(*(provenance[r] for r in d.removed_ids))
                created_prov = set(live[cid].provenance) if cid in live else set(
                    removed_copy(next(x for x in decisions if cid in x.removed_ids))[cid])
                assert merged_from <= created_prov, (d.step, cid)
                provenance[cid] = created_prov
        assert ids == set(live), sorted(ids ^ set(live))
        if decisions:
            assert decisions[-1].size_after == store.json_bytes()
        live_prov = set().union(*(set(e.provenance) for e in live.values())) if live else set()
        original_prov = set().union(*(set(e.provenance) for e in original))
        lost = original_prov - live_prov - audited_removed
        assert not lost, f"facts lost without an audited delete/evict: {sorted(lost)}"
        got = decision_keys(store)
        assert got == reference[: len(got)], "the decisions so far differ from the uninterrupted run's"
        if preserved is not None:
            assert set(store.journal.preserved_pairs()) <= set(preserved), "a pair the uninterrupted run kept not"
        return {"decisions": cursor, "unfinished": store.journal.unfinished_run() is not None,
                "runs": len(runs)}


def check_snapshot(path: Path, original_ids: set[str]) -> int:
    """One read transaction on a plain connection: the entries are exactly the journal replayed.

    A reader that saw half a decision (an entry gone but no decision, a merge's
    new entry without the originals removed ...) or a size that does not match
    the last decision fails here. Returns the decisions seen (the run's cursor: a preserve has no audit row).
    """
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10, isolation_level=None)
    try:
        conn.execute("BEGIN")
        live = {r[0] for r in conn.execute("SELECT id FROM entries")}
        total = conn.execute("SELECT COALESCE(SUM(json_bytes), 0) FROM entries").fetchone()[0]
        rows = conn.execute("SELECT removed_ids, created_ids, size_after FROM decisions ORDER BY rowid").fetchall()
        cursor = conn.execute("SELECT COALESCE(MAX(cursor), 0) FROM runs").fetchone()[0]
        conn.execute("COMMIT")
    finally:
        conn.close()
    ids = set(original_ids)
    for removed, created, _ in rows:
        assert set(json.loads(removed)) <= ids
        ids = (ids - set(json.loads(removed))) | set(json.loads(created))
    assert ids == live, sorted(ids ^ live)
    if rows:
        assert rows[-1][2] == total
    return cursor


def read_everything(store: MemoryStore, encoder, query: str) -> tuple[list[tuple[str, float]], int]:
    """What a reader of the memory does: a search and a full listing; checks what it gets back."""
    hits = store.search(query, k=5, encoder=encoder)
    assert 1 <= len(hits) <= 5
    scores = [s for _, s in hits]
    assert scores == sorted(scores, reverse=True)
    assert len({e.id for e, _ in hits}) == len(hits)
    entries = list(store.entries())
    listed = {e.id for e in entries}
    assert len(listed) == len(entries)
    dangling = [(e.id, dst) for e in entries for dst in e.links if dst not in listed]
    assert not dangling, f"links to entries not in the same listing: {dangling}"
    return [(e.id, s) for e, s in hits], len(entries)
