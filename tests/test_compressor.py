"""The compression engine: order, application, budgets, checkpoints, audit, undo."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memrefine_edge.compressor import Compressor, RunLock, build_merged_entry, merged_entry_id
from memrefine_edge.errors import BudgetError, ConfigurationError, MemRefineError, RunLockedError
from memrefine_edge.decision import Decision
from memrefine_edge.methods import Method, PairContext
from memrefine_edge.store import Entry, MemoryStore
from memrefine_edge.testing import HashEncoder

from fakes import ConcatMerger, ScriptedMethod

HERE = Path(__file__).resolve().parent
WORDS = ("tea coffee hiking paris berlin guitar piano dog cat running yoga novel movie sister brother "
         "birthday concert garden painting camping beach museum school job interview recipe soup").split()


def synthetic_entries(n: int, seed: int = 0) -> list[Entry]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        words = rng.sample(WORDS, 4) + [f"w{rng.randint(0, 30)}"]
        if i and rng.random() < 0.3:  # near-duplicates of an earlier entry
            words = out[rng.randrange(i)].content.split()[1:5] + [f"x{i % 7}"]
        out.append(Entry(
            id=f"e{i:03d}",
            content=("Ana: " if i % 2 else "Ben: ") + " ".join(words),
            keywords=tuple(words[:2]),
            links=(f"e{i - 1:03d}",) if i else (),
            timestamps=(f"2023-05-{1 + i % 28:02d}",),
            metadata={"session": i // 10},
            provenance=(f"D{i // 10}:{i % 10}",),
        ))
    return out


def make_store(path: Path, n: int = 40, seed: int = 0) -> MemoryStore:
    store = MemoryStore(path)
    store.add_many(synthetic_entries(n, seed))
    return store


def export(store: MemoryStore) -> list[dict]:
    return [e.counted_fields() for e in store.entries()]


def compressor(store, method=None, **kw) -> Compressor:
    return Compressor(store, encoder=HashEncoder(), method=method or ScriptedMethod(), merger=ConcatMerger(),
                      k=kw.pop("k", 4), **kw)


# --- candidate order ---------------------------------------------------------


def naive_sequence(store_path: Path, budget: float) -> list[tuple[str, str]]:
    """The paper's loop with a full similarity matrix recomputed at every step."""
    enc, method, merger = HashEncoder(), ScriptedMethod(), ConcatMerger()
    with MemoryStore(store_path, create=False) as store:
        target = int(store.json_bytes() * budget)
        store.ensure_embeddings(enc)
        preserved: set[frozenset[str]] = set()
        seq: list[tuple[str, str]] = []
        while store.json_bytes() > target:
            ids, m = store.embeddings()
            sims = (m.astype(np.float64) @ m.astype(np.float64).T)
            best = None
            for i in range(len(ids)):
                for j in range(i + 1, len(ids)):
                    if frozenset((ids[i], ids[j])) in preserved:
                        continue
                    if best is None or sims[i, j] > best[0]:
                        best = (sims[i, j], i, j)
            if best is None:
                break
            a, b = store.get(ids[best[1]]), store.get(ids[best[2]])
            seq.append((a.id, b.id))
            d = method.decide(PairContext(a=a, b=b, similarity=float(best[0]), store=store))
            if d.action == "delete":
                store.remove(a.id if d.target == "a" else b.id)
            elif d.action == "merge":
                out = merger.merge(a.content, b.content, d.merge_instruction)
                new = build_merged_entry(a, b, content=out.content, keywords=tuple(out.keywords))
                incoming = [e.id for e in store.entries() if {a.id, b.id} & set(e.links) and e.id not in (a.id, b.id)]
                store.remove(a.id)
                store.remove(b.id)
                store.add(new, unknown_links="drop")
                store.add_links([(src, new.id, 10**6) for src in incoming])
                store.set_embedding(new.id, enc.embed([new.content])[0], enc.model_id)
            else:
                preserved.add(frozenset((a.id, b.id)))
        return seq


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_candidate_order_equals_naive_full_recompute(tmp_path, seed):
    make_store(tmp_path / "a.db", n=30, seed=seed).close()
    make_store(tmp_path / "b.db", n=30, seed=seed).close()
    expected = naive_sequence(tmp_path / "b.db", 0.4)
    method = ScriptedMethod()
    with MemoryStore(tmp_path / "a.db") as store:
        compressor(store, method).run(budget=0.4)
    got = [(a, b) for a, b, _ in method.seen]
    assert got == expected and len(got) > 10


def test_float32_embeddings_of_older_stores_give_the_same_run(tmp_path):
    # The queue holds int8 codes when every embedding is stored so, float32 otherwise:
    # the same vectors read back give the same pairs and decisions either way.
    make_store(tmp_path / "int8.db", n=30, seed=4).close()
    make_store(tmp_path / "f32.db", n=30, seed=4).close()
    runs = {}
    for name in ("int8", "f32"):
        with MemoryStore(tmp_path / f"{name}.db") as store:
            store.ensure_embeddings(HashEncoder())
            if name == "f32":
                ids, m = store.embeddings()
                for entry_id, v in zip(ids, m, strict=True):
                    store.set_embedding(entry_id, v, HashEncoder().model_id, exact=True)
                assert store.embedding_codes(model_id=HashEncoder().model_id) is None
            method = ScriptedMethod()
            compressor(store, method).run(budget=0.4)
            runs[name] = method.seen, export(store)
    assert runs["int8"] == runs["f32"] and len(runs["int8"][0]) > 10


# --- applying decisions --------------------------------------------------------


class OneShot(Method):
    name = "oneshot"

    def __init__(self, decision: Decision) -> None:
        self.decision = decision

    def decide(self, pair: PairContext) -> Decision:
        return self.decision


def test_merge_keeps_links_timestamps_provenance_and_redirects_incoming(tmp_path):
    with MemoryStore(tmp_path / "m.db") as store:
        store.add_many([
            Entry(id="a", content="Ana likes green tea", links=("c", "b"), timestamps=("t1",), provenance=("D1",)),
            Entry(id="b", content="Ana likes green tea a lot", links=("a", "c", "d"), timestamps=("t2", "t1"),
                  provenance=("D2",)),
            Entry(id="c", content="Ben plays piano", links=("a",)),
            Entry(id="d", content="Ben owns a red bicycle", links=("b",)),
        ])
        merge = Decision(action="merge", target=None, merge_instruction="keep tea", reason="r", source="llm")
        report = compressor(store, OneShot(merge)).run(budget_bytes=store.json_bytes() - 1)
        new_id = merged_entry_id("a", "b")
        merged = store.get(new_id)
        assert merged.links == ("c", "d")  # union, no duplicates, no self-loops, not the pair
        assert merged.timestamps == ("t1", "t2") and merged.timestamp == "t1"
        assert merged.provenance == ("D1", "D2")
        assert merged.metadata["merged_from"] == ["a", "b"]
        assert store.get("c").links == (new_id,) and store.get("d").links == (new_id,)
        assert "a" not in store and "b" not in store
        assert report.actions == {"merge": 1}
        ids, vecs = store.embeddings()
        assert new_id in ids and np.isclose(np.linalg.norm(vecs[ids.index(new_id)]), 1.0)


def test_delete_prunes_links_and_preserve_is_never_asked_again(tmp_path):
    with MemoryStore(tmp_path / "d.db") as store:
        store.add_many(synthetic_entries(12))
        delete = Decision(action="delete", target="b", reason="dup", source="rule")
        compressor(store, OneShot(delete)).run(budget_bytes=store.json_bytes() - 1)
        (d,) = store.journal.decisions()
        gone = d.removed_ids[0]
        assert gone not in store and all(gone not in e.links for e in store.entries())

        keep = ScriptedMethod(policy="preserve")
        r1 = compressor(store, keep).run(budget=0.5)
        assert r1.stop_reason == "no candidate pair left" and not r1.budget_met
        n_pairs = len(store) * (len(store) - 1) // 2
        assert len(keep.seen) == n_pairs == len(set(keep.seen))
        again = ScriptedMethod(policy="preserve")
        r2 = compressor(store, again).run(budget=0.5)  # persisted: nothing left to ask
        assert again.seen == [] and r2.stop_reason == "no candidate pair left"


# --- budgets -----------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -0.5, 1.5, float("nan"), True])
def test_malformed_budget_is_refused_before_any_change(tmp_path, bad):
    with make_store(tmp_path / "s.db") as store:
        before = export(store)
        with pytest.raises(BudgetError):
            compressor(store).run(budget=bad)
        assert export(store) == before and store.journal.runs() == []


def test_budget_below_one_entry_is_refused_before_any_change(tmp_path):
    path = tmp_path / "s.db"
    make_store(path).close()
    raw = path.read_bytes()
    with MemoryStore(path) as store:
        with pytest.raises(BudgetError, match="below what is possible"):
            compressor(store, mode="strict").run(budget_bytes=store.min_entry_json_bytes() - 1)
        with pytest.raises(BudgetError):
            compressor(store).run(budget_bytes=0)
        with pytest.raises(BudgetError, match="exactly one"):
            compressor(store).run()
    assert path.read_bytes() == raw


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ratio=st.floats(0.05, 0.95), seed=st.integers(0, 50), metric=st.sampled_from(["json", "disk"]))
@example(ratio=0.05078125, seed=28, metric="disk")  # a merged entry just too big to stay alone
def test_strict_mode_always_ends_at_or_under_budget(tmp_path_factory, ratio, seed, metric):
    path = tmp_path_factory.mktemp("strict") / "s.db"
    with make_store(path, n=25, seed=seed) as store:
        comp = compressor(store, ScriptedMethod(policy="preserve" if seed % 2 else "mixed"), mode="strict",
                          metric=metric)
        try:
            target = comp.target_bytes(budget=ratio)
        except BudgetError:
            return  # below one entry: refused up front (tested above)
        report = comp.run(budget=ratio)
        assert report.budget_met and store.size(metric) <= target
        evicts = [d for d in store.journal.decisions() if d.action == "evict"]
        assert all(d.source == "evict" and d.reason for d in evicts)


def _evicted(store: MemoryStore) -> list[str]:
    return [d.target for d in store.journal.decisions() if d.action == "evict"]


def naive_eviction_order(entries: list[Entry], target: int) -> list[str]:
    """The strict order recomputed from scratch before every eviction (full similarity matrix)."""
    import math
    from dataclasses import replace

    from memrefine_edge.compressor import EVICT_SIZE_WEIGHT
    from memrefine_edge.entry import json_size
    from memrefine_edge.facts import is_filler
    from memrefine_edge.similarity import similarity_matrix

    enc = HashEncoder()
    from memrefine_edge.store.vectors import decode_embedding, encode_embedding  # the stored (int8) vectors

    vec = {e.id: decode_embedding(encode_embedding(enc.embed([e.content])[0])) for e in entries}
    size = {e.id: json_size(replace(e, links=())) for e in entries}
    live = [e.id for e in entries]
    total = sum(size.values())  # links left aside: the caller's target is in these sizes
    out: list[str] = []
    kept: set[str] = set()

    def last_fitting(i: str) -> bool:
        return size[i] <= target and not any(size[j] <= target for j in live if j != i)

    for e in entries:
        if total <= target:
            return out
        if is_filler(e.content) and not last_fitting(e.id):
            live.remove(e.id)
            out.append(e.id)
            total -= size[e.id]
    while total > target:
        sims = similarity_matrix(np.stack([vec[i] for i in live]))
        np.fill_diagonal(sims, -np.inf)
        best = None
        for r, i in enumerate(live):
            if i in kept:
                continue
            cos = float(sims[r].max()) if len(live) > 1 else -1.0
            value = cos + EVICT_SIZE_WEIGHT * math.log(size[i])
            if best is None or value > best[0]:
                best = (value, i)
        if last_fitting(best[1]):
            kept.add(best[1])
            continue
        live.remove(best[1])
        out.append(best[1])
        total -= size[best[1]]
    return out


def test_strict_eviction_takes_filler_then_the_most_redundant_entry_left(tmp_path):
    facts = ["Ana adopted a grey cat named Luna in May", "Ben ran the Berlin marathon in 3 hours",
             "Ana teaches piano to kids on Saturdays", "Ben bought a red bike for his commute",
             "Ana visited Lisbon with her sister in June",
             "Ben is learning to bake sourdough bread at the community kitchen on Thursdays"]  # the keeper
    entries = [Entry(id="f0", content="Thanks so much, that is awesome!")]
    for i, text in enumerate(facts):
        entries.append(Entry(id=f"a{i}", content=text))
        if i < 3:  # a near-duplicate of each of the first three facts
            entries.append(Entry(id=f"b{i}", content=text + " too"))
    with MemoryStore(tmp_path / "r.db") as store:
        store.add_many(entries)
        size = {e.id: len(json.dumps(e.counted_fields())) for e in entries}
        # Room for the filler and one of each near-duplicate pair to go, not fewer.
        target = store.json_bytes() - size["f0"] - sum(size[f"a{i}"] for i in range(3))
        comp = compressor(store, ScriptedMethod(policy="preserve"), mode="strict")
        report = comp.run(budget_bytes=target)
        assert report.budget_met and report.stop_reason == "budget met by eviction (strict mode)"
        gone = _evicted(store)
        assert gone[0] == "f0"
        # One of each near-duplicate pair goes; its twin, then alone, stays with the unique facts.
        assert len(gone) == 4 and {i[1] for i in gone[1:]} == {"0", "1", "2"}
        assert all(f"a{i}" in store for i in range(3, 6))
        reasons = [d.reason for d in store.journal.decisions() if d.action == "evict"]
        assert reasons[0] == "strict budget: pure filler"
        assert all(r.startswith("strict budget: most redundant left (nearest ") for r in reasons[1:])


@pytest.mark.parametrize("seed,ratio", [(0, 0.35), (1, 0.35), (2, 0.35), (3, None)])
def test_strict_eviction_order_equals_a_naive_full_recompute(tmp_path, seed, ratio):
    # Entries without links, so the target in link-free sizes is the store's own.
    entries = [replace_links(e) for e in synthetic_entries(30, seed)]
    entries[4] = Entry(id=entries[4].id, content="Ana: thanks a lot, awesome!")  # one filler
    with MemoryStore(tmp_path / "n.db") as store:
        store.add_many(entries)
        # None: a budget only the smallest entry fits, which then is never evicted.
        target = int(store.json_bytes() * ratio) if ratio else store.min_entry_json_bytes()
        comp = compressor(store, ScriptedMethod(policy="preserve"), mode="strict")
        assert comp.run(budget_bytes=target).budget_met
        assert _evicted(store) == naive_eviction_order(entries, target)
        if ratio is None:
            assert len(store) == 1


def replace_links(e: Entry) -> Entry:
    from dataclasses import replace

    return replace(e, links=())


@pytest.mark.parametrize("metric", ["json", "disk"])
@pytest.mark.parametrize("interrupt_at", [1, 5, 11])
def test_strict_eviction_interrupted_and_resumed_equals_an_uninterrupted_run(tmp_path, metric, interrupt_at):
    """Stopped (Ctrl-C) after a few evictions, then the same command: the same evictions, the same store."""
    class FewChanges(ScriptedMethod):  # deletes and merges first (links, merged entries), then keeps all
        def decide(self, pair: PairContext) -> Decision:
            policy = "mixed" if len(self.seen) < 8 else "preserve"
            self.seen.append((pair.a.id, pair.b.id, pair.similarity))
            return ScriptedMethod(policy=policy).decide(pair)

    def run(path: Path, progress=None) -> None:
        with MemoryStore(path, create=False) as store:
            comp = compressor(store, FewChanges(), mode="strict", metric=metric, progress=progress)
            comp.run(budget=0.3)

    for name in ("whole", "cut"):
        make_store(tmp_path / f"{name}.db", n=40, seed=5).close()
    run(tmp_path / "whole.db")
    with MemoryStore(tmp_path / "whole.db", create=False) as store:
        want, want_entries = _evicted(store), export(store)
        assert {"delete", "merge"} <= {d.action for d in store.journal.decisions()}
    assert len(want) > interrupt_at + 3
    seen = []

    def interrupt(p) -> None:  # Ctrl-C after the given number of committed evictions
        if p.counts.get("evict", 0) > len(seen):
            seen.append(p.step)
            if len(seen) >= interrupt_at:
                raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "cut.db", progress=interrupt)
    with MemoryStore(tmp_path / "cut.db", create=False) as store:
        assert len(_evicted(store)) == interrupt_at and store.journal.unfinished_run() is not None
    run(tmp_path / "cut.db")
    with MemoryStore(tmp_path / "cut.db", create=False) as store:
        assert _evicted(store) == want and export(store) == want_entries
        assert store.journal.unfinished_run() is None


def test_strict_eviction_never_evicts_the_last_entry_that_fits_alone(tmp_path):
    with make_store(tmp_path / "k.db", n=20, seed=4) as store:
        comp = compressor(store, ScriptedMethod(policy="preserve"), mode="strict")
        solo = {i: store.solo_size(i, "json") for i in store.ids()}
        target = min(solo.values())  # only the smallest entries fit alone: the last of them stays
        report = comp.run(budget_bytes=target)
        assert report.budget_met and len(store) == 1 and solo[store.ids()[0]] == target


def test_paper_mode_says_when_it_stops_above_budget(tmp_path):
    with make_store(tmp_path / "p.db", n=10) as store:
        report = compressor(store, ScriptedMethod(policy="preserve")).run(budget=0.2)
        assert not report.budget_met and report.stop_reason == "no candidate pair left"
        assert report.after["entries"] == 10


def test_already_within_budget_changes_nothing(tmp_path):
    with make_store(tmp_path / "w.db", n=5) as store:
        report = compressor(store).run(budget=1.0)
        assert report.decisions == 0 and report.budget_met and store.journal.runs() == []


# --- locking and resume ----------------------------------------------------------


def test_a_second_run_is_refused_while_one_holds_the_lock(tmp_path):
    with make_store(tmp_path / "l.db") as store:
        with RunLock(store.path):
            with pytest.raises(RunLockedError, match="another compression"):
                compressor(store).run(budget=0.5)
        compressor(store).run(budget=0.5)  # released


def test_interrupted_run_resumes_and_other_arguments_are_refused(tmp_path):
    with make_store(tmp_path / "r.db") as store:
        partial = compressor(store).run(budget=0.5, max_decisions=3)
        assert partial.stop_reason.startswith("stopped") and partial.decisions == 3
        with pytest.raises(MemRefineError, match="interrupted"):
            compressor(store).run(budget=0.3)
        resumed = compressor(store).run(budget=0.3, resume=True)  # recorded budget (0.5) wins
        assert resumed.resumed and resumed.run_id == partial.run_id
        assert resumed.target_bytes == partial.target_bytes
        assert store.journal.unfinished_run() is None


def _worker(db: Path, *args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(HERE / "compress_worker.py"), str(db), "0.45", *map(str, args)],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_kill_9_at_any_phase_then_rerun_gives_the_same_store(tmp_path):
    reference = tmp_path / "ref.db"
    make_store(reference, n=40, seed=3).close()
    assert _worker(reference).returncode == 0
    with MemoryStore(reference, create=False) as s:
        expected = export(s)
        n_steps = len(s.journal.decisions())
    assert n_steps > 12
    kills = 6
    for kill_step, phase in [(0, "judge"), (2, "merge"), (5, "commit"), (7, "judge"), (9, "merge"),
                             (n_steps - 1, "commit")]:
        db = tmp_path / f"k{kill_step}{phase}.db"
        make_store(db, n=40, seed=3).close()
        killed = _worker(db, kill_step, phase)
        if phase == "merge" and killed.returncode == 0:
            kills -= 1  # that step was no merge: the run finished untouched
        else:
            assert killed.returncode == -9, (kill_step, phase, killed.stderr)
            with MemoryStore(db, create=False) as s:
                assert s.integrity_check() == "ok"
                assert s.journal.unfinished_run() is not None
            resumed = _worker(db)  # the same command again
            assert resumed.returncode == 0, resumed.stderr
        with MemoryStore(db, create=False) as s:
            assert export(s) == expected, (kill_step, phase)
            assert len(s.journal.decisions()) == n_steps
    assert kills >= 4, "most kill points must really kill"


def test_min_similarity_ends_candidates_early_and_strict_still_meets_budget(tmp_path):
    with make_store(tmp_path / "f.db", n=20) as store:
        method = ScriptedMethod(policy="preserve")
        report = compressor(store, method, min_similarity=0.5).run(budget=0.5)
        assert report.stop_reason == "no candidate pair left above min_similarity 0.5"
        assert method.seen and all(sim >= 0.5 for _, _, sim in method.seen)
        n_pairs = 20 * 19 // 2
        assert len(method.seen) < n_pairs
        strict = compressor(store, ScriptedMethod(policy="preserve"), min_similarity=0.5, mode="strict")
        assert strict.run(budget=0.5).budget_met
    with pytest.raises(BudgetError, match="min_similarity"):
        compressor(MemoryStore(tmp_path / "g.db"), min_similarity=1.5)


def test_resume_refuses_other_method_options(tmp_path):
    from memrefine_edge.methods import get_method

    with make_store(tmp_path / "o.db") as store:
        first = compressor(store, get_method("rulesim", tau=0.9)).run(budget=0.5, max_decisions=2)
        with pytest.raises(MemRefineError, match="interrupted"):
            compressor(store, get_method("rulesim", tau=0.7)).run(budget=0.5)
        done = compressor(store, get_method("rulesim", tau=0.9)).run(budget=0.5)
        assert done.run_id == first.run_id and done.budget_met


def test_upkeep_on_insert_keeps_the_store_under_its_watermark(tmp_path):
    from memrefine_edge.compressor import Upkeep

    entries = synthetic_entries(60, seed=5)
    with MemoryStore(tmp_path / "u.db") as store:
        store.add_many(entries[:10])
        high = store.json_bytes() * 2
        upkeep = Upkeep(compressor(store, mode="strict"), high_bytes=high, low_bytes=high // 2).install()
        for e in entries[10:]:
            store.add(Entry(id=e.id, content=e.content, timestamps=e.timestamps, provenance=e.provenance))
            assert store.json_bytes() <= high
        assert upkeep.reports and all(r.budget_met for r in upkeep.reports)
        assert len(store.journal.runs()) == len(upkeep.reports)
        upkeep.uninstall()
        store.add(Entry(id="late", content="no upkeep any more " * (high // 10)))
        assert store.json_bytes() > high and len(upkeep.reports) == len(store.journal.runs())
    with pytest.raises(BudgetError):
        Upkeep(compressor(MemoryStore(tmp_path / "v.db")), high_bytes=10, low_bytes=20)


def test_upkeep_skips_while_another_interrupted_run_waits_and_adds_still_succeed(tmp_path):
    from memrefine_edge.compressor import Upkeep
    from memrefine_edge.errors import RunInterruptedError

    with make_store(tmp_path / "w.db") as store:
        # A user's run (another method and budget) that stopped half way, as a crash leaves it.
        waiting = compressor(store, ScriptedMethod(policy="delete")).run(budget=0.3, max_decisions=2)
        high = store.json_bytes()
        upkeep = Upkeep(compressor(store, mode="strict"), high_bytes=high, low_bytes=high // 2).install()
        with pytest.warns(RuntimeWarning, match=waiting.run_id):
            store.add(Entry(id="x1", content="a new memory that takes the store over its watermark " * 3))
        assert "x1" in store and upkeep.blocked_by == waiting.run_id and not upkeep.reports
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # once per waiting run, not on every add
            store.add(Entry(id="x2", content="another memory over the watermark " * 3))
        assert "x2" in store and store.journal.unfinished_run().run_id == waiting.run_id
        with pytest.raises(RunInterruptedError) as info:  # what upkeep caught, with the run named
            compressor(store, mode="strict").run(budget_bytes=high // 2)
        assert info.value.run_id == waiting.run_id
        # Once the user finishes that run, upkeep works again on the next add.
        compressor(store, ScriptedMethod(policy="delete")).run(budget=0.3)
        over = (high - store.json_bytes()) // 16 + 10  # just over the watermark again
        store.add(Entry(id="x3", content="one more memory " * over))
        assert upkeep.blocked_by is None and upkeep.reports and store.json_bytes() <= high


# --- other writers, model loading --------------------------------------------------


def test_an_entry_removed_by_another_connection_during_a_run_is_skipped(tmp_path):
    path = tmp_path / "s.db"
    store = make_store(path, n=30)
    other = MemoryStore(path, create=False)
    removed: list[str] = []

    def app_removes_an_entry():
        if not removed:  # the app deletes the first entry the run is deciding on
            victim = method.seen[-1][0]
            other.remove(victim)
            removed.append(victim)

    method = ScriptedMethod(on_decide=app_removes_an_entry)
    report = compressor(store, method).run(budget=0.5)
    assert report.budget_met or report.stop_reason.startswith("no candidate")
    assert removed and removed[0] not in store
    decided = {i for d in store.journal.decisions() for i in (d.a_id, d.b_id)}
    assert removed[0] not in decided  # nothing was recorded for the vanished entry
    other.close()
    store.close()


class _BrokenModelMethod(ScriptedMethod):
    def load(self) -> None:
        from memrefine_edge.errors import ModelLoadError

        raise ModelLoadError("llama.cpp could not load mine.gguf")


def test_a_model_that_fails_to_load_records_no_run(tmp_path):
    from memrefine_edge.errors import ModelLoadError

    store = make_store(tmp_path / "s.db")
    before = export(store)
    with pytest.raises(ModelLoadError):
        compressor(store, _BrokenModelMethod()).run(budget=0.5)
    assert store.journal.runs() == [] and export(store) == before
    assert compressor(store).run(budget=0.5).run_id is not None  # nothing blocks the next run
    store.close()


class _FailingEncoder(HashEncoder):
    def __init__(self, fail_after: int) -> None:
        super().__init__()
        self.calls = 0
        self.fail_after = fail_after

    def embed_batch(self, texts):
        self.calls += 1
        if self.calls > self.fail_after:
            raise KeyboardInterrupt  # the user pressed Ctrl-C during the first embedding pass
        return super().embed_batch(texts)


def test_an_interrupted_embedding_pass_keeps_its_batches_and_resumes(tmp_path):
    store = make_store(tmp_path / "s.db", n=40)
    seen: list[tuple[int, int]] = []
    enc = _FailingEncoder(fail_after=2)
    enc.batch_size = 1000  # one embed_batch call per store batch
    with pytest.raises(KeyboardInterrupt):
        store.ensure_embeddings(enc, batch_size=8, progress=lambda d, t: seen.append((d, t)))
    assert store.stats().embedded == seen[-1][0] >= 16 and seen[-1][1] == 40
    fresh = HashEncoder()
    assert store.ensure_embeddings(fresh, batch_size=8) == 40 - seen[-1][0]
    assert store.stats().embedded == 40
    store.close()


def test_entries_added_during_a_run_are_not_compressed_and_do_not_count(tmp_path):
    from fakes import ScriptedMethod as Scripted

    def originals(store):
        return [e.counted_fields() for e in store.entries() if not e.id.startswith("late")]

    with make_store(tmp_path / "a.db", n=50) as alone:
        ra = compressor(alone, Scripted()).run(budget=0.5)
        expected = originals(alone)
    path = tmp_path / "b.db"
    store = make_store(path, n=50)
    app = MemoryStore(path, create=False)  # the assistant, writing while the run goes on
    added: list[str] = []

    def app_adds():
        i = len(added)
        if i < 12:
            app.add(Entry(id=f"late{i}", content=f"Ana booked flight QX{i} to Lisbon for the conference."))
            added.append(f"late{i}")

    # The app writes from inside the judge's call (this thread): each decision commits alone, or the
    # app's connection would wait for the run's open transaction, which waits for the judge.
    report = compressor(store, Scripted(on_decide=app_adds), commit_window_s=0).run(budget=0.5)
    assert report.target_bytes == ra.target_bytes and report.budget_met
    assert originals(store) == expected  # the older entries were compressed exactly as without the adds
    assert all(i in store for i in added)  # and the new ones were left to the next run
    assert report.added_during_run["entries"] == len(added)
    app.close()
    store.close()


def test_decisions_share_transactions_and_decide_the_same(tmp_path):
    import sqlite3

    runs = {}
    for window in (0, 10):
        with make_store(tmp_path / f"w{window}.db", n=40) as store:
            commits, steps = [], []
            store.set_trace(lambda sql: commits.append(sql) if sql == "COMMIT" else None)
            report = compressor(store, progress=lambda p: steps.append(p.step), commit_window_s=window).run(budget=0.5)
            runs[window] = (export(store), [(d.action, d.a_id, d.b_id) for d in store.journal.decisions()],
                            len(commits), steps)
            assert report.budget_met
    (one, decided_one, commits_one, steps_one), (grouped, decided_grouped, commits_grouped, steps_grouped) = (
        runs[0], runs[10])
    assert grouped == one and decided_grouped == decided_one
    n = len(decided_one)
    assert steps_one == list(range(1, n + 1))  # progress after every commit: every decision
    assert steps_grouped == [n]  # one group: one commit, one progress call
    assert commits_grouped < commits_one - n + 5
    # Progress always reports what is durable: another connection sees exactly that many decisions.
    with make_store(tmp_path / "p.db", n=40) as store:
        seen = []

        def check(p):
            other = sqlite3.connect(tmp_path / "p.db")
            seen.append((p.step, other.execute("SELECT COUNT(*) FROM audit").fetchone()[0]))
            other.close()

        compressor(store, ScriptedMethod(), progress=check, commit_window_s=0.0).run(budget=0.5)
        assert seen and all(step == durable for step, durable in seen)


def test_a_grouped_run_commits_what_it_decided_when_interrupted(tmp_path):
    calls = []

    def interrupt():
        calls.append(1)
        if len(calls) == 7:
            raise KeyboardInterrupt

    with make_store(tmp_path / "i.db", n=40) as store:
        with pytest.raises(KeyboardInterrupt):
            compressor(store, ScriptedMethod(on_decide=interrupt), commit_window_s=10).run(budget=0.5)
        # The six decisions made before are durable, the seventh never started; a rerun continues.
        assert len(store.journal.decisions()) == 6 and store.journal.unfinished_run() is not None
    with MemoryStore(tmp_path / "i.db", create=False) as store:
        assert compressor(store, commit_window_s=10).run(budget=0.5).budget_met
        with make_store(tmp_path / "j.db", n=40) as ref:
            compressor(ref, commit_window_s=0).run(budget=0.5)
            assert export(store) == export(ref)


def test_a_model_calling_judge_commits_every_decision(tmp_path):
    class Counting(ScriptedMethod):
        calls = 0

        def decide(self, pair):
            Counting.calls += 1
            return super().decide(pair)

        @property
        def llm_calls(self):
            return Counting.calls

    with make_store(tmp_path / "m.db", n=40) as store:
        steps = []
        compressor(store, Counting(), progress=lambda p: steps.append(p.step), commit_window_s=10).run(budget=0.5)
        assert steps == list(range(1, len(store.journal.decisions()) + 1))


def test_another_thread_writes_between_groups(tmp_path):
    import threading

    from fakes import ScriptedMethod as Scripted

    path = tmp_path / "t.db"
    store = make_store(path, n=60)
    started, done, errors = threading.Event(), [], []

    def app():  # the assistant's thread, its own connection, while the run holds group transactions
        try:
            with MemoryStore(path, create=False) as mine:
                started.wait(10)
                for i in range(3):
                    mine.add(Entry(id=f"late{i}", content=f"Ana booked flight QX{i} to Lisbon."))
                    done.append(i)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def slow_judge():
        started.set()
        time.sleep(0.002)

    thread = threading.Thread(target=app)
    thread.start()
    try:
        report = compressor(store, Scripted(on_decide=slow_judge), commit_window_s=0.02).run(budget=0.5)
    finally:
        thread.join(30)
    assert not errors and done == [0, 1, 2]
    assert report.budget_met and all(f"late{i}" in store for i in range(3))
    store.close()


def test_commit_window_is_validated(tmp_path):
    with make_store(tmp_path / "v.db", n=5) as store:
        for bad in (-1, 11, float("nan"), "0.1"):
            with pytest.raises(ConfigurationError, match="commit_window_s"):
                compressor(store, commit_window_s=bad)


def test_upkeep_follows_the_standing_budget(tmp_path):
    from memrefine_edge.budget import set_budget
    from memrefine_edge.compressor import Upkeep

    store = make_store(tmp_path / "u.db", n=20)
    upkeep = Upkeep(compressor(store)).install()
    store.add(Entry(id="x0", content="Ben runs on Tuesdays."))
    assert upkeep.reports == []  # no budget: no pass
    size = store.json_bytes()
    set_budget(store, target_bytes=int(size * 0.8), metric="json", spec="0.8")
    store.add(Entry(id="x1", content="Ben swims on Fridays."))
    assert len(upkeep.reports) == 1
    assert store.json_bytes() <= int(int(size * 0.8) * 0.9)
    store.close()


# --- every fact survives a real compression (LoCoMo, real encoder, model-free judge) ----------


def _fate(entry_id: str, removed_by: dict, live: set[str]):
    """Follow an entry through the audit log: ("live", id) or ("deleted", decision)."""
    seen = set()
    while entry_id not in live:
        assert entry_id not in seen, f"cycle in the audit log at {entry_id}"
        seen.add(entry_id)
        d = removed_by[entry_id]  # every removed entry has an audited decision
        if d.action != "merge":
            return "deleted", d
        entry_id = d.created_ids[0]
    return "live", entry_id


@pytest.mark.locomo
@pytest.mark.models
@pytest.mark.slow
def test_every_fact_sentence_survives_or_is_an_audited_delete_on_every_dev_conversation(locomo_dir, tmp_path):
    import json as _json

    from memrefine_edge.backends.encoder import OnnxEncoder
    from memrefine_edge.facts import fact_sentences, missing_facts
    from memrefine_edge.importers import import_file
    from memrefine_edge.judge import default_judge
    from memrefine_edge.merger import GuardedMerger
    from memrefine_edge.methods import get_method

    encoder = OnnxEncoder()
    samples = [s["sample_id"] for s in _json.loads((locomo_dir / "locomo-dev.json").read_text())]
    assert len(samples) == 7
    for sample in samples:
        with MemoryStore(tmp_path / f"{sample}.db") as store:
            import_file(store, locomo_dir / "locomo-dev.json", format="locomo-turns", sample_id=sample)
            originals = list(store.entries())
            report = Compressor(store, encoder=encoder, merger=GuardedMerger(None),
                                method=get_method("memrefine", judge=default_judge("none"))).run(budget=0.5)
            assert report.decisions > 0
            live = {e.id: e for e in store.entries()}
            removed_by = {r: d for d in store.journal.decisions(report.run_id) for r in d.removed_ids}
            for d in removed_by.values():
                assert d.action in ("delete", "merge") and d.reason, d
            lost = []
            for e in originals:
                fate, where = _fate(e.id, removed_by, set(live))
                if fate == "deleted":
                    continue  # an audited delete: the judge found it covered by the entry it kept
                kept = live[where]
                assert e.provenance[0] in kept.provenance
                # Still in the store: word for word, or every fact of it (names, numbers,
                # dates, negations, all content words) in the entry that now holds it.
                lost += [(e.id, s) for s in fact_sentences(e.content)
                         if s not in kept.content and missing_facts(s, kept.content, min_word_cover=1.0)]
            assert lost == [], f"{sample}: {len(lost)} fact sentences lost, e.g. {lost[:3]}"


def test_a_finished_run_packs_the_file_when_it_pays_and_reports_the_file_it_leaves(tmp_path):
    sizes = {}
    for vacuum in (True, False):
        with make_store(tmp_path / f"v{vacuum}.db", n=120) as store:
            report = compressor(store, vacuum=vacuum).run(budget=0.5)
            assert report.after["file_bytes"] == store.file_bytes()
            assert store.journal.run(report.run_id).report["after"] == report.after
            assert ("vacuum" in report.seconds) == vacuum
            sizes[vacuum] = store.file_bytes()
            assert all(v["total"] == v["recount"] for v in store.recount().values())
    assert sizes[True] < sizes[False]


# --- deferred deletes -------------------------------------------------------------


class Deferring(Method):
    """Defers half its deletes (``source="deferred"``) and takes them when asked again (``take=False``: never).

    Decides from a hash of the pair's ids, as :class:`ScriptedMethod`: half the pairs are
    deferred deletes, a tenth merged, the rest preserved; the deferred target is the same
    every time the pair is asked about."""

    name = "deferring"

    def __init__(self, *, take: bool = True) -> None:
        self.take = take
        self.asked: list[tuple[str, str]] = []

    @staticmethod
    def _target(pair: PairContext) -> str:
        from fakes import _bucket

        return "b" if _bucket(pair.a.id, pair.b.id) <= 2 else "a"

    def decide(self, pair: PairContext) -> Decision:
        from fakes import _bucket

        bucket = _bucket(pair.a.id, pair.b.id)
        if bucket <= 4:
            return Decision("preserve", None, reason=f"delete {self._target(pair)} deferred", source="deferred")
        if bucket == 5:
            return Decision("merge", None, merge_instruction="keep all", reason="scripted", source="llm")
        return Decision("preserve", None, reason="scripted", source="rule")

    def deferred(self, pair: PairContext) -> Decision | None:
        self.asked.append((pair.a.id, pair.b.id))
        if not self.take:
            return None
        return Decision("delete", self._target(pair), reason="deferred delete taken", source="guard")  # type: ignore[arg-type]


def _totals_equal_a_recount(store: MemoryStore) -> bool:
    return all(v["total"] == v["recount"] for v in store.recount().values())


def _phases(store: MemoryStore, run_id: str) -> tuple[list, list, list]:
    """The run's decisions as the loop, the deferred phase (deletes of deferred pairs) and the evictions made them."""
    decisions = store.journal.decisions(run_id)
    deferred = {(d.a_id, d.b_id) for d in decisions if d.source == "deferred"}
    taken = [d for d in decisions if d.action == "delete" and (d.a_id, d.b_id) in deferred]
    evicted = [d for d in decisions if d.action == "evict"]
    loop = [d for d in decisions if d not in taken and d not in evicted]
    return loop, taken, evicted


def _expected_phase(originals: list[str], loop: list, n: int) -> tuple[list[tuple[str, str, str]], int]:
    """The first ``n`` deferred deletes in the order they were deferred, skipping pairs with an entry gone,
    replayed from the loop's decisions; and how many deferred pairs were skipped before the last one."""
    live = set(originals)
    for d in loop:
        live -= set(d.removed_ids)
        live |= set(d.created_ids)
    out, skipped = [], 0
    for d in loop:
        if len(out) == n:
            break
        if d.source != "deferred":
            continue
        if d.a_id not in live or d.b_id not in live:
            skipped += 1
            continue
        gone = d.b_id if d.reason == "delete b deferred" else d.a_id
        out.append((d.a_id, d.b_id, gone))
        live.discard(gone)
    return out, skipped


def test_a_run_that_meets_its_budget_takes_no_deferred_delete(tmp_path):
    with make_store(tmp_path / "w.db", n=40, seed=0) as store:
        method = Deferring()
        report = compressor(store, method).run(budget=0.5)
        assert report.budget_met and report.stop_reason == "budget met"
        assert report.sources["deferred"] > 10  # pairs were deferred ...
        assert method.asked == [] and report.deferred_taken == 0  # ... and never asked about again
        assert "delete" not in report.actions and _phases(store, report.run_id)[1] == []
        assert _totals_equal_a_recount(store)


def test_deferred_deletes_are_taken_in_order_until_the_budget_holds(tmp_path):
    with make_store(tmp_path / "d.db", n=30, seed=1) as store:
        originals = store.ids()
        method = Deferring()
        report = compressor(store, method).run(budget=0.2)
        assert report.budget_met and report.stop_reason == "budget met by deferred deletes"
        loop, taken, evicted = _phases(store, report.run_id)
        assert not evicted and len(taken) >= 3
        assert store.journal.decisions(report.run_id)[-len(taken):] == taken  # after every loop decision
        expected, skipped = _expected_phase(originals, loop, len(taken))
        assert [(d.a_id, d.b_id, d.target) for d in taken] == expected
        assert skipped > 0  # pairs with an entry gone (merged or deleted) were passed over
        assert method.asked == [(a, b) for a, b, _ in expected]  # and never asked about
        # Stopped as soon as the budget held: every delete but the last started above it.
        target = report.target_bytes
        assert all(d.size_before > target for d in taken) and taken[-1].size_after <= target
        assert all(d.source == "guard" and d.reason == "deferred delete taken" for d in taken)
        live = set(store.ids())
        assert any(d.a_id in live and d.b_id in live for d in loop if d.source == "deferred")  # some left untaken
        assert report.deferred_taken == len(taken) == report.actions["delete"] == report.sources["guard"]
        assert _totals_equal_a_recount(store)


def test_paper_mode_stops_above_budget_once_the_deferred_deletes_run_out(tmp_path):
    with make_store(tmp_path / "p.db", n=30, seed=1) as store:
        originals = store.ids()
        method = Deferring()
        report = compressor(store, method).run(budget=0.1)
        assert not report.budget_met and report.stop_reason == "no candidate pair left"
        loop, taken, _ = _phases(store, report.run_id)
        live = set(store.ids())
        assert not any(d.a_id in live and d.b_id in live for d in loop if d.source == "deferred")  # all taken
        assert [(d.a_id, d.b_id, d.target) for d in taken] == _expected_phase(originals, loop, len(taken))[0]
        assert report.deferred_taken == len(taken) > 0
        assert _totals_equal_a_recount(store)


def test_strict_mode_takes_the_deferred_deletes_before_it_evicts(tmp_path):
    evictions = {}
    for take in (True, False):
        with make_store(tmp_path / f"s{take}.db", n=30, seed=1) as store:
            report = compressor(store, Deferring(take=take), mode="strict").run(budget=0.1)
            assert report.budget_met and report.stop_reason == "budget met by eviction (strict mode)"
            loop, taken, evicted = _phases(store, report.run_id)
            assert bool(taken) == take and evicted
            assert max(d.step for d in loop) < min(d.step for d in taken + evicted)
            if take:
                assert max(d.step for d in taken) < min(d.step for d in evicted)
            evictions[take] = len(evicted)
            assert _totals_equal_a_recount(store)
    assert evictions[True] < evictions[False]


def test_a_deferred_hook_may_return_only_a_delete(tmp_path):
    class MergesLater(Deferring):
        def deferred(self, pair):
            return Decision("merge", None, merge_instruction="keep all", reason="r", source="llm")

    with make_store(tmp_path / "h.db", n=30, seed=1) as store:
        with pytest.raises(ConfigurationError, match="deferred"):
            compressor(store, MergesLater()).run(budget=0.2)
        assert _totals_equal_a_recount(store)


def _decided(store: MemoryStore) -> list[tuple]:
    return [(d.step, d.action, d.a_id, d.b_id, d.target, d.source, d.reason, d.removed_ids, d.created_ids)
            for d in store.journal.decisions()]


@pytest.mark.parametrize("mode,cut", [("paper", "in the loop"), ("paper", "before the phase"),
                                      ("paper", "in the phase"), ("strict", "in the phase"),
                                      ("strict", "after the phase")])
def test_a_run_interrupted_before_or_in_the_deferred_phase_resumes_to_the_same_result(tmp_path, mode, cut):
    budget = 0.2 if mode == "paper" else 0.1

    def summary(report):
        return (report.stop_reason, report.budget_met, report.actions, report.sources, report.deferred_taken)

    with make_store(tmp_path / "whole.db", n=30, seed=1) as store:
        whole = compressor(store, Deferring(), mode=mode).run(budget=budget)
        want, want_decided = export(store), _decided(store)
        loop, taken, _ = _phases(store, whole.run_id)
    assert len(taken) >= 3
    with make_store(tmp_path / "cut.db", n=30, seed=1) as store:
        if cut in ("in the loop", "before the phase", "in the phase") and mode == "paper":
            at = {"in the loop": len(loop) // 2, "before the phase": len(loop), "in the phase": len(loop) + 2}[cut]
            partial = compressor(store, Deferring(), mode=mode).run(budget=budget, max_decisions=at)
            assert partial.stop_reason.startswith("stopped") and len(store.journal.decisions()) == at
        else:  # Ctrl-C after the second deferred delete, or after the last one (before the eviction)
            stop_at = 2 if cut == "in the phase" else len(taken)

            def interrupt(p):
                if p.counts.get("delete", 0) >= stop_at:
                    raise KeyboardInterrupt

            with pytest.raises(KeyboardInterrupt):
                compressor(store, Deferring(), mode=mode, progress=interrupt, commit_window_s=0).run(budget=budget)
            assert len(store.journal.decisions()) == len(loop) + stop_at
        assert store.journal.unfinished_run() is not None
        resumed = compressor(store, Deferring(), mode=mode).run(budget=budget)
        assert resumed.resumed and export(store) == want and _decided(store) == want_decided
        assert summary(resumed) == summary(whole)
        assert _totals_equal_a_recount(store)
