"""Rule baselines (RuleSim, RulePR) on the MemRefine loop: each rule's decisions on crafted stores."""

from __future__ import annotations

import math
import random
import shutil
from pathlib import Path

import numpy as np
import pytest

from memrefine_edge.core import Decision, Entry, OptionConflictError, RuleOptionError
from memrefine_edge.engine import Compressor
from memrefine_edge.index import similarity_matrix
from memrefine_edge.judging import MergedEntry, Merger
from memrefine_edge.methods import PairContext, get_method, method_names
from memrefine_edge.methods._rules import MERGE_INSTRUCTION, RulePR, RuleSim, knn_edges, link_edges, pagerank
from memrefine_edge.store import MemoryStore
from memrefine_edge.testing import HashEncoder

DIM = 4
ENC_ID = "hash-bow"  # HashEncoder's model id: set embeddings count as current, merged ones get HashEncoder's


class ConcatMerger(Merger):
    """Keeps the longer text plus the other's missing words (deterministic); records each instruction."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def merge(self, a: str, b: str, instruction: str) -> MergedEntry:
        self.calls.append(instruction)
        long_, short = (a, b) if len(a) >= len(b) else (b, a)
        extra = [w for w in short.split() if w not in long_.split()]
        return MergedEntry((long_ + (" " + " ".join(extra) if extra else "")).strip())


def unit(*xs: float) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float64)
    v[: len(xs)] = xs
    return (v / np.linalg.norm(v)).astype(np.float32)


def angle(deg: float) -> np.ndarray:
    return unit(math.cos(math.radians(deg)), math.sin(math.radians(deg)))


def vec_store(path: Path, spec: list[tuple[str, str, np.ndarray, tuple[str, ...]]]) -> MemoryStore:
    """A store whose embeddings are set by hand (``(id, content, vector, links)`` rows, in order)."""
    store = MemoryStore(path)
    store.add_many([Entry(id=i, content=c, links=links) for i, c, _, links in spec])
    for i, _, v, _ in spec:
        store.set_embedding(i, v, ENC_ID, exact=True)  # the thresholds are tested to the last float32 bit
    return store


def ctx(store: MemoryStore, a: str, b: str, sim: float) -> PairContext:
    return PairContext(a=store.get(a), b=store.get(b), similarity=sim, store=store)


def engine(store, method, merger=None, **kw) -> Compressor:
    return Compressor(store, encoder=HashEncoder(dim=kw.pop("dim", DIM)), method=method,
                      merger=merger or ConcatMerger(), k=4, **kw, mode="paper")


WORDS = ("tea coffee hiking paris berlin guitar piano dog cat running yoga novel movie sister brother "
         "birthday concert garden painting camping beach museum school job interview recipe soup").split()


def synthetic(path: Path, n: int = 40, seed: int = 0, links: bool = True) -> MemoryStore:
    """Entries with near-duplicates (about 30%) and, optionally, a chain of links."""
    rng = random.Random(seed)
    out: list[Entry] = []
    for i in range(n):
        words = rng.sample(WORDS, 4) + [f"w{rng.randint(0, 30)}"]
        if i and rng.random() < 0.3:
            words = out[rng.randrange(i)].content.split()[1:5] + [f"x{i % 7}"]
        out.append(Entry(id=f"e{i:03d}", content=("Ana: " if i % 2 else "Ben: ") + " ".join(words),
                         links=(f"e{rng.randrange(i):03d}",) if links and i else (),
                         timestamps=(f"2023-05-{1 + i % 28:02d}",), provenance=(f"D{i // 10}:{i % 10}",)))
    store = MemoryStore(path)
    store.add_many(out)
    return store


def export(store: MemoryStore) -> list[dict]:
    return [e.counted_fields() for e in store.entries()]


# --- registry and options ----------------------------------------------------------


def test_both_methods_are_registered_and_configurable():
    assert {"rulesim", "rulepr"} <= set(method_names())
    sim = get_method("rulesim", tau=0.7)
    pr = get_method("rulepr", tau=0.9, protect=0.8)
    assert isinstance(sim, RuleSim) and sim.describe() == {"tau": 0.7}
    assert isinstance(pr, RulePR) and pr.describe()["tau"] == 0.9 and pr.describe()["protect"] == 0.8
    assert RuleSim().tau == 0.8 and RulePR().protect == 0.9 and RulePR().damping == 0.85
    assert sim.llm_calls == 0 and pr.llm_calls == 0


@pytest.mark.parametrize("cls,opts", [
    (RuleSim, {"tau": 1.5}), (RuleSim, {"tau": float("nan")}), (RuleSim, {"tau": True}), (RuleSim, {"tau": "0.8"}),
    (RulePR, {"protect": -0.1}), (RulePR, {"protect": 1.1}), (RulePR, {"damping": 1.0}), (RulePR, {"knn": 0}),
    (RulePR, {"tol": 0.0}),
])
def test_bad_options_are_rejected(cls, opts):
    with pytest.raises(RuleOptionError):
        cls(**opts)


def test_rulesim_rejects_rulepr_only_options():
    with pytest.raises(OptionConflictError, match=r"protect \(--protect\) applies to --method rulepr, not rulesim"):
        get_method("rulesim", protect=0.9)


# --- RuleSim -----------------------------------------------------------------------


def test_rulesim_threshold_edges(tmp_path):
    with vec_store(tmp_path / "s.db", [("a", "Ana likes green tea a lot", unit(1), ()),
                                        ("b", "Ana likes tea", unit(1), ())]) as store:
        m = RuleSim(tau=0.8)
        at = m.decide(ctx(store, "a", "b", 0.8))
        assert (at.action, at.target, at.source) == ("delete", "b", "rule")
        assert at.reason == "sim 0.80 >= tau 0.80: delete shorter B (13 < 25 chars)"
        below = m.decide(ctx(store, "a", "b", float(np.nextafter(0.8, -1.0))))
        assert (below.action, below.target, below.source) == ("merge", None, "rule")
        assert below.merge_instruction == MERGE_INSTRUCTION
        assert below.reason == "sim 0.7999999999999999 < tau 0.8000000000000000: merge"  # digits until it reads true
        assert m.decide(ctx(store, "a", "b", 0.798)).reason == "sim 0.798 < tau 0.800: merge"
        assert m.decide(ctx(store, "a", "b", -0.3)).action == "merge"  # RuleSim never preserves


def test_rulesim_deletes_the_less_informative_side(tmp_path):
    spec = [("a", "Ana: tea!!! ... ???", unit(1), ()),        # long raw, short after normalisation
            ("b", "Ana: tea daily", unit(1), ()),
            ("c", "Ben, likes: jazz", unit(0, 1), ()),       # same normalised length as d
            ("d", "ben likes jazz", unit(0, 1), ())]
    with vec_store(tmp_path / "s.db", spec) as store:
        m = RuleSim()
        assert m.decide(ctx(store, "a", "b", 0.9)).target == "a"
        tie = m.decide(ctx(store, "c", "d", 0.9))
        assert tie.target == "b" and "later-inserted B" in tie.reason  # d was inserted after c


def test_rulesim_threshold_through_the_engine(tmp_path):
    x = np.float32(0.75)
    below = np.nextafter(x, np.float32(0))  # the largest float32 under 0.75
    spec = [("a", "Ana likes green tea with honey", unit(1), ()),
            ("b", "Ana likes green tea", unit(0.75, math.sqrt(1 - 0.75**2)), ()),
            ("c", "Ben plays the piano on Sundays", unit(0, 0, 1), ()),
            ("d", "Ben plays piano at church", unit(0, 0, float(below), math.sqrt(1 - float(below) ** 2)), ())]
    with vec_store(tmp_path / "s.db", spec) as store:
        report = engine(store, RuleSim(tau=0.75)).run(budget_bytes=store.min_entry_json_bytes(), max_decisions=2)
        d = store.journal.decisions()
        assert [(r.a_id, r.b_id, r.action, r.target, r.source) for r in d] == [
            ("a", "b", "delete", "b", "rule"), ("c", "d", "merge", None, "rule")]
        assert d[0].similarity == 0.75 and d[1].similarity == float(below) < 0.75
        assert report.actions == {"delete": 1, "merge": 1}


# --- PageRank ------------------------------------------------------------------------


def test_pagerank_on_the_classic_three_node_graph():
    # A->B, A->C, B->C, C->A; by hand: B = .05 + .425A, C = .0925 + .78625A, A = .05 + .85C.
    pr = pagerank(3, [(0, 1), (0, 2), (1, 2), (2, 0)])
    a = 0.128625 / (1 - 0.85 * 0.78625)
    assert pr == pytest.approx([a, 0.05 + 0.425 * a, 0.0925 + 0.78625 * a], abs=1e-10)
    assert pr.sum() == pytest.approx(1.0, abs=1e-12)
    assert pr == pytest.approx([0.38778971, 0.21481063, 0.39739966], abs=1e-7)


def test_pagerank_spreads_dangling_mass():
    # Three leaves -> hub; the hub has no out-link. l = .0375 + .2125h, h = 1 - 3l  =>  l = .25 / 1.6375.
    pr = pagerank(4, [(1, 0), (2, 0), (3, 0)])
    leaf = 0.25 / 1.6375
    assert pr == pytest.approx([1 - 3 * leaf, leaf, leaf, leaf], abs=1e-10)
    assert pagerank(3, []) == pytest.approx([1 / 3] * 3)  # all dangling: uniform, nothing leaks
    assert pagerank(1, []) == pytest.approx([1.0]) and len(pagerank(0, [])) == 0


def test_pagerank_is_bit_reproducible_and_ignores_duplicates():
    edges = [(0, 1), (1, 2), (2, 0), (2, 3), (3, 3)]
    assert pagerank(4, edges).tobytes() == pagerank(4, list(reversed(edges)) + edges).tobytes()
    with pytest.raises(ValueError):
        pagerank(2, [(0, 5)])


def test_store_links_form_an_undirected_graph(tmp_path):
    # Hub h linked *from* four leaves: undirected star. Leaves: l = .03 + .2125h, h = 1 - 4l  =>  l = .2425 / 1.85.
    spec = [("h", "Hub note", angle(0), ())] + [(f"l{i}", f"Leaf {i}", angle(20 * i + 5), ("h",)) for i in range(4)]
    with vec_store(tmp_path / "s.db", spec) as store:
        sc = RulePR().scores(store)
        leaf = 0.2425 / 1.85
        assert sc.graph == "links"
        assert sc.of("h") == pytest.approx(1 - 4 * leaf, abs=1e-10)
        assert all(sc.of(f"l{i}") == pytest.approx(leaf, abs=1e-10) for i in range(4))
        assert sc.protected == {"h"}
    assert link_edges(["x", "y", "z"], [("x", "y"), ("y", "x"), ("x", "gone")]) == [(0, 1), (1, 0)]


def test_linkless_store_uses_the_knn_graph(tmp_path):
    # Angles 0, 10, 25, 90: nearest neighbours 0->10, 10->0, 25->10, 90->25: a path 0-10-25-90.
    spec = [(f"n{d}", f"note at {d} degrees", angle(d), ()) for d in (0, 10, 25, 90)]
    with vec_store(tmp_path / "s.db", spec) as store:
        _, vecs = store.embeddings()
        path = [(0, 1), (1, 0), (1, 2), (2, 1), (2, 3), (3, 2)]
        assert knn_edges(similarity_matrix(vecs), 1) == path
        sc = RulePR(knn=1).scores(store)
        assert sc.graph == "knn"
        expected = pagerank(4, path)
        assert [sc.of(f"n{d}") for d in (0, 10, 25, 90)] == pytest.approx(list(expected), abs=1e-12)
        assert sc.of("n10") > sc.of("n0") and sc.of("n25") > sc.of("n90")
        assert sc.of("n0") == pytest.approx(sc.of("n90"), abs=1e-12)
        # k >= n - 1: the complete graph, every score equal, nobody protected
        full = RulePR(knn=10).scores(store)
        assert all(v == pytest.approx(0.25) for v in full.scores.values()) and not full.protected


# --- RulePR decisions ----------------------------------------------------------------


def hub_store(path: Path) -> MemoryStore:
    """``hub`` (short) is linked from five leaves; ``dup`` repeats it at more length, with no links."""
    spec = [("hub", "Ana: party Friday", angle(0), ())]
    spec += [(f"leaf{i}", f"Ana brings item {i}", angle(40 + 10 * i), ("hub",)) for i in range(5)]
    spec += [("dup", "Ana: the party is on Friday!", angle(5), ())]
    return vec_store(path, spec)


def test_rulepr_keeps_the_hub_in_a_redundant_pair(tmp_path):
    with hub_store(tmp_path / "s.db") as store:
        pair = ctx(store, "hub", "dup", 0.95)
        assert RuleSim().decide(pair).target == "a"  # RuleSim drops the shorter hub...
        m = RulePR()
        m.prepare(store)
        d = m.decide(pair)  # ...RulePR keeps it
        assert (d.action, d.target, d.source) == ("delete", "b", "rule")
        assert d.reason.startswith("sim 0.95 >= tau 0.80: keep higher PageRank A, delete B (PR A 0.")
        report = engine(store, m).run(budget_bytes=store.json_bytes() - 1)
        assert report.actions == {"delete": 1} and "hub" in store and "dup" not in store


def test_rulepr_equal_pagerank_falls_back_to_the_rulesim_side(tmp_path):
    spec = [("a", "Ana: tea with honey daily", angle(0), ()), ("b", "Ana: tea", angle(3), ())]
    with vec_store(tmp_path / "s.db", spec) as store:  # no links: 2-node kNN graph, equal scores
        d = RulePR().decide(ctx(store, "a", "b", 0.99))
        assert d.target == "b" and "equal PageRank" in d.reason and "shorter B" in d.reason


def protected_store(path: Path) -> MemoryStore:
    """Two hubs (h1: 4 leaves, h2: 3 leaves) and an isolated note x; 10 entries."""
    spec = [("h1", "Hub one", angle(0), ()), ("h2", "Hub two", angle(30), ()), ("x", "Lone note", angle(60), ())]
    spec += [(f"p{i}", f"Leaf p{i}", angle(70 + i), ("h1",)) for i in range(4)]
    spec += [(f"q{i}", f"Leaf q{i}", angle(80 + i), ("h2",)) for i in range(3)]
    return vec_store(path, spec)


def test_protected_entries_are_never_merge_anchors(tmp_path):
    with protected_store(tmp_path / "s.db") as store:
        m = RulePR(protect=0.8)
        sc = m.scores(store)
        assert sc.protected == {"h1", "h2"}
        assert sc.of("h1") > sc.of("h2") > sc.threshold >= max(sc.of(i) for i in store.ids() if i[0] in "pqx")
        both = m.decide(ctx(store, "h1", "h2", 0.5))
        assert (both.action, both.source) == ("preserve", "rule") and "both entries are protected" in both.reason
        one = m.decide(ctx(store, "h1", "x", 0.5))  # x is the anchor, the protected hub its neighbour
        assert one.action == "merge" and "anchor B" in one.reason and "neighbour protected" in one.reason
        plain = m.decide(ctx(store, "x", "p0", 0.5))
        assert plain.action == "merge" and "anchor A" in plain.reason  # isolated x < leaf p0
        # protection does not stop a delete: the higher-PageRank duplicate keeps the content
        assert m.decide(ctx(store, "h1", "h2", 0.8)).target == "b"


class CheckedRulePR(RulePR):
    """RulePR that asserts, at every decision, the protection rule against the scores it used."""

    name = "rulepr"

    def decide(self, pair: PairContext) -> Decision:
        d = super().decide(pair)
        sc = self.scores(pair.store)
        prot = {pair.a.id in sc.protected, pair.b.id in sc.protected}
        if d.action == "merge":
            anchor = pair.a.id if "anchor A" in d.reason else pair.b.id
            assert anchor not in sc.protected
        if d.action == "preserve":
            assert prot == {True}
        if d.action == "delete":
            assert pair.similarity >= self.tau
        self.log = getattr(self, "log", []) + [d.action]
        return d


def test_engine_run_never_merges_a_protected_anchor(tmp_path):
    with synthetic(tmp_path / "s.db", n=40, seed=3) as store:
        m = CheckedRulePR(tau=0.99, protect=0.7)  # everything below tau: the merge-fallback path only
        report = engine(store, m, dim=384).run(budget=0.3)
        assert "merge" in m.log and "preserve" in m.log  # both branches were exercised
        assert report.sources == {"rule": report.decisions - report.sources.get("fallback", 0)}


def test_merge_fallback_only_when_deletes_are_not_enough(tmp_path):
    synthetic(tmp_path / "a.db", n=40, seed=1).close()
    shutil.copy(tmp_path / "a.db", tmp_path / "b.db")
    for name, budget, expect_merges in (("a.db", 0.9, False), ("b.db", 0.4, True)):
        with MemoryStore(tmp_path / name) as store:
            report = engine(store, RulePR(tau=0.8), dim=384).run(budget=budget)
            assert report.budget_met
            d = store.journal.decisions()
            assert all(r.similarity >= 0.8 for r in d if r.action == "delete")
            assert all(r.similarity < 0.8 for r in d if r.action != "delete")
            assert ("merge" in report.actions) is expect_merges
            if expect_merges:  # the first decision below tau comes only after every pair at or above it
                first = next(i for i, r in enumerate(d) if r.action != "delete")
                assert first > 0 and all(r.action == "delete" for r in d[:first])


@pytest.mark.parametrize("links", [True, False])
@pytest.mark.parametrize("method", ["rulesim", "rulepr"])
def test_both_methods_meet_half_the_json_budget(tmp_path, method, links):
    with synthetic(tmp_path / "s.db", n=60, seed=2, links=links) as store:
        before = store.json_bytes()
        merger = ConcatMerger()
        report = engine(store, get_method(method), merger=merger, dim=384).run(budget=0.5)
        assert report.budget_met and report.stop_reason == "budget met"
        assert store.json_bytes() <= before * 0.5 and report.realized_ratio <= 0.5
        assert set(report.sources) <= {"rule", "fallback"} and report.llm_calls == 0
        assert report.actions.get("delete", 0) > 0 and len(merger.calls) == report.actions.get("merge", 0)
        assert all(c == MERGE_INSTRUCTION for c in merger.calls)


def test_rulepr_scores_follow_the_store_and_resume_matches(tmp_path):
    synthetic(tmp_path / "a.db", n=40, seed=4).close()
    shutil.copy(tmp_path / "a.db", tmp_path / "b.db")
    with MemoryStore(tmp_path / "a.db") as store:
        m = RulePR(tau=0.8)
        engine(store, m, dim=384).run(budget=0.4)
        assert m.recomputes > 1  # refreshed as entries went
        fresh = RulePR(tau=0.8).scores(store)
        assert m.scores(store) == fresh  # a pure function of the store now, not of the run
        full = [(r.a_id, r.b_id, r.action, r.target) for r in store.journal.decisions()]
        full_export = export(store)
    with MemoryStore(tmp_path / "b.db") as store:
        first = engine(store, RulePR(tau=0.8), dim=384).run(budget=0.4, max_decisions=5)
        assert first.stop_reason.startswith("stopped")
        engine(store, RulePR(tau=0.8), dim=384).run(budget=0.4)  # a new process would start like this
        assert [(r.a_id, r.b_id, r.action, r.target) for r in store.journal.decisions()] == full
        assert export(store) == full_export
