"""Rule-based baselines on the MemRefine loop: RuleSim and RulePR (paper §4, App. B "Rule-based
compression", App. C).

Both run on the same engine as MemRefine (candidate order, application,
checkpoints, audit); only :meth:`~memrefine_edge.methods.Method.decide`
differs, and it never calls an LLM (merges still go through the engine's merge
model). Every decision has ``source="rule"`` and a reason such as
``"sim 0.91 >= tau 0.80: delete shorter B (38 < 52 chars)"``.

``rulesim`` (:class:`RuleSim`), paper App. C.1
    ``s(u, v) >= tau`` -> delete; otherwise -> merge. The deleted side is the
    *less informative* entry (:func:`less_informative`): fewer characters
    after :func:`memrefine_edge.text._facts.normalise`; on a tie, the
    later-inserted entry.

``rulepr`` (:class:`RulePR`), paper App. B / C.2
    PageRank (:func:`pagerank`: damping 0.85, dangling mass spread uniformly,
    power iteration until the L1 change is below ``tol``) over the memory
    graph. The graph is undirected: every stored link ``u -> v`` is an edge
    both ways, because an A-MEM link says "related", and its direction only
    records which note was written later (a directed walk on LoCoMo's
    turn chains would crown each session's opening greeting). A store without
    any link uses the union k-nearest-neighbour graph of the embeddings
    instead (:func:`knn_edges`).

    * ``s >= tau`` (redundant pair): keep the higher-PageRank entry, delete the
      other. PageRanks within ``1e-9`` count as equal; then the RuleSim rule
      picks the deleted side.
    * ``s < tau``: the engine proposes pairs in descending similarity, so a
      pair below ``tau`` means every redundant pair is used up and the store
      is still above budget: deleting alone did not meet it. Merge fallback:
      the *anchor* is the lower-PageRank entry that is not protected, merged
      with its neighbour (the other entry) by the merge model. If both are
      protected, preserve.
    * Protected: PageRank strictly above the ``protect`` quantile of the
      current scores (``numpy.quantile``, linear) by more than ``1e-9``
      (``protect=0.9`` -> the top 10%). Entries tied at the cut share one
      fate; uniform scores protect nobody. Protection only bars an entry from
      being a merge anchor: a protected entry can still be deleted when a
      higher-PageRank duplicate keeps its content.

    Freshness: the scores are recomputed whenever the graph (live ids, links,
    and for the kNN graph the embeddings) differs from the one they were
    computed on, i.e. after every delete or merge. They are therefore a pure
    function of the current store, never of the run's history, so a resumed
    run decides exactly as an uninterrupted one. The cost is one read of the
    entries plus a sparse power iteration per changed step (a few ms at 400
    entries); kNN similarity rows are cached per entry id and vector.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from memrefine_edge.core import Decision
from memrefine_edge.index import similarity_matrix
from memrefine_edge.text import normalise

from ._base import Method, MethodOption, PairContext
from ._registry import register

if TYPE_CHECKING:  # pragma: no cover
    from memrefine_edge.store import MemoryStore

__all__ = [
    "RuleSim", "RulePR", "PageRankScores", "MERGE_INSTRUCTION", "less_informative", "pagerank", "link_edges",
    "knn_edges",
]

#: What the merge model is told by a rule method: no judge picked facts, so the instruction is generic.
MERGE_INSTRUCTION = "Merge A and B into one entry that keeps every fact of both and who said it."

#: PageRank differences at or below this are ties. Scores sum to 1 and converge to ~6e-12 (L1),
#: so this absorbs iteration noise between structurally equal nodes without hiding real differences.
PR_TIE = 1e-9


#: The delete threshold both rule methods take.
TAU = MethodOption(type=float, default=0.8, low=-1.0, high=1.0, flag="--tau",
                   help="similarity threshold: a pair at or above it is a delete (paper: 0.70 / 0.80 / 0.90)")


def less_informative(pair: PairContext) -> tuple[Literal["a", "b"], str]:
    """The side a rule deletes when nothing else decides, and why.

    Fewer characters after :func:`~memrefine_edge.text._facts.normalise` (case,
    punctuation and spacing do not count as information); on a tie the
    later-inserted entry (by store insertion sequence), so the older entry
    and its timestamp stay.
    """
    la, lb = len(normalise(pair.a.content)), len(normalise(pair.b.content))
    if la != lb:
        target: Literal["a", "b"] = "a" if la < lb else "b"
        small, big = (la, lb) if la < lb else (lb, la)
        return target, f"shorter {target.upper()} ({small} < {big} chars)"
    later: Literal["a", "b"] = "b" if pair.store.seq_of(pair.b.id) > pair.store.seq_of(pair.a.id) else "a"
    return later, f"equal length ({la} chars): later-inserted {later.upper()}"


def _vs(s: float, tau: float) -> str:
    """``"sim 0.91 >= tau 0.80"``, with as many decimals as it takes for the comparison to read true.

    Rounding is monotone, so ``>=`` always reads true; ``<`` may round to equal
    (``0.798 < 0.80`` shown as ``0.80 < 0.80``) and then gets more digits.
    """
    op = ">=" if s >= tau else "<"
    digits = 2
    while op == "<" and f"{s:.{digits}f}" == f"{tau:.{digits}f}" and digits < 17:
        digits += 1
    return f"sim {s:.{digits}f} {op} tau {tau:.{digits}f}"


def _merge(reason: str) -> Decision:
    return Decision("merge", None, merge_instruction=MERGE_INSTRUCTION, reason=reason, source="rule")


@register
class RuleSim(Method):
    """RuleSim (paper App. C.1): similarity ``>= tau`` -> delete the less informative entry, else merge.

    :param tau: the delete threshold on the engine's cosine similarity
        (paper: 0.70 / 0.80 / 0.90); compared exactly, ``s == tau`` deletes.
    """

    name = "rulesim"
    options = MappingProxyType({"tau": TAU})

    def __init__(self, *, tau: float = 0.8) -> None:
        self.tau = self.options["tau"].check("tau", tau)

    def decide(self, pair: PairContext) -> Decision:
        """Delete (see :func:`less_informative`) at ``s >= tau``; merge below."""
        s = pair.similarity
        if s >= self.tau:
            target, why = less_informative(pair)
            return Decision("delete", target, reason=f"{_vs(s, self.tau)}: delete {why}", source="rule")
        return _merge(f"{_vs(s, self.tau)}: merge")

    def describe(self) -> dict[str, Any]:
        """The threshold, recorded with the run."""
        return {"tau": self.tau}


# --- PageRank ---------------------------------------------------------------------


def pagerank(
    n: int,
    edges: Iterable[tuple[int, int]],
    *,
    damping: float = 0.85,
    tol: float = 1e-12,
    max_iter: int = 1000,
) -> np.ndarray:
    """PageRank of a directed graph on nodes ``0..n-1`` by power iteration (float64).

    ``x' = damping * (W x + dangling(x) / n) + (1 - damping) / n``, where
    ``W`` spreads a node's score evenly over its distinct out-neighbours and
    ``dangling(x)`` is the total score of nodes without out-edges (spread
    over all nodes, so no mass leaks). Starts uniform; stops when
    ``||x' - x||_1 < tol`` or after ``max_iter`` steps. Self-loops and
    duplicate edges are dropped. The summation order is fixed (edges sorted),
    so the same graph gives the same bits.
    """
    if n <= 0:
        return np.zeros(0, dtype=np.float64)
    pairs = sorted({(int(u), int(v)) for u, v in edges if u != v})
    for u, v in pairs:
        if not (0 <= u < n and 0 <= v < n):
            raise ValueError(f"edge ({u}, {v}) names a node outside 0..{n - 1}")
    src = np.fromiter((u for u, _ in pairs), dtype=np.int64, count=len(pairs))
    dst = np.fromiter((v for _, v in pairs), dtype=np.int64, count=len(pairs))
    out_deg = np.bincount(src, minlength=n).astype(np.float64)
    dangling = out_deg == 0
    weight = 1.0 / out_deg[src] if len(pairs) else np.zeros(0)
    x = np.full(n, 1.0 / n)
    for _ in range(max_iter):
        spread = np.bincount(dst, weights=x[src] * weight, minlength=n)
        y = damping * (spread + x[dangling].sum() / n) + (1.0 - damping) / n
        change = float(np.abs(y - x).sum())
        x = y
        if change < tol:
            break
    return x / x.sum()


def link_edges(ids: Sequence[str], links: Iterable[tuple[str, str]]) -> list[tuple[int, int]]:
    """Undirected edges (both directions) between ``ids`` positions for stored links ``(src, dst)``.

    Links to ids not in ``ids`` are ignored.
    """
    index = {entry_id: i for i, entry_id in enumerate(ids)}
    out: set[tuple[int, int]] = set()
    for src, dst in links:
        i, j = index.get(src), index.get(dst)
        if i is not None and j is not None and i != j:
            out.update(((i, j), (j, i)))
    return sorted(out)


def knn_edges(sim: np.ndarray, k: int) -> list[tuple[int, int]]:
    """Union k-nearest-neighbour graph of a similarity matrix, as undirected edges (both directions).

    Node ``i``'s neighbours are the ``k`` other nodes of highest similarity
    (ties: lower index first); ``i - j`` is an edge when either picks the
    other. A node picked by many (a "hub" of the embedding space) therefore
    gets a high degree and a high PageRank.
    """
    n = sim.shape[0]
    k = min(int(k), n - 1)
    out: set[tuple[int, int]] = set()
    if k < 1:
        return []
    for i in range(n):
        row = np.array(sim[i], dtype=np.float64)
        row[i] = -np.inf
        for j in np.argsort(-row, kind="stable")[:k].tolist():
            out.update(((i, j), (j, i)))
    return sorted(out)


@dataclass(frozen=True)
class PageRankScores:
    """PageRank of one state of a store.

    ``graph`` is ``"links"`` or ``"knn"``; ``threshold`` is the ``protect``
    quantile; ``protected`` the ids above it.
    """

    graph: str
    scores: dict[str, float]
    threshold: float
    protected: frozenset[str]

    def of(self, entry_id: str) -> float:
        """The score of an entry (0.0 for one the graph does not hold, e.g. without an embedding)."""
        return self.scores.get(entry_id, 0.0)


@register
class RulePR(Method):
    """RulePR (paper App. B, C.2): PageRank keeps the central entry of a redundant pair; merge fallback.

    See the module docstring for the rules. :param tau: redundancy threshold
    (``s >= tau``). :param protect: protection quantile (0.9 -> top 10% are
    never merge anchors). :param damping: PageRank damping. :param knn:
    neighbours per entry in the kNN graph used for stores without links.
    :param tol: L1 convergence tolerance of the power iteration.
    """

    name = "rulepr"
    options = MappingProxyType({
        "tau": TAU,
        "protect": MethodOption(type=float, default=0.9, low=0.0, high=1.0, flag="--protect",
                                help="PageRank quantile above which entries are never merge anchors (0.9: the "
                                     "top 10%)"),
        "damping": MethodOption(type=float, default=0.85, low=0.0, high=1.0, low_open=True, high_open=True,
                                help="PageRank damping"),
        "knn": MethodOption(type=int, default=5, low=1,
                            help="neighbours per entry in the kNN graph of a store without links"),
        "tol": MethodOption(type=float, default=1e-12, low=0.0, high=1.0, low_open=True,
                            help="L1 convergence tolerance of the power iteration"),
    })

    def __init__(
        self, *, tau: float = 0.8, protect: float = 0.9, damping: float = 0.85, knn: int = 5, tol: float = 1e-12,
    ) -> None:
        opts = self.options
        self.tau = opts["tau"].check("tau", tau)
        self.protect = opts["protect"].check("protect", protect)
        self.damping = opts["damping"].check("damping", damping)
        self.knn = opts["knn"].check("knn", knn)
        self.tol = opts["tol"].check("tol", tol)
        self.recomputes = 0  #: how many times PageRank was computed (for tests and benchmarks)
        self._key: tuple[Any, ...] | None = None
        self._scores: PageRankScores | None = None
        # kNN similarity cache: exact scores (pairs.similarity_matrix) of every
        # (id, vector) seen, so a changed store only scores its new rows.
        self._sim_ids: list[tuple[str, bytes]] = []
        self._sim_pos: dict[tuple[str, bytes], int] = {}
        self._sim = np.zeros((0, 0), dtype=np.float64)
        self._sim_vecs = np.zeros((0, 0), dtype=np.float32)

    # --- scores ----------------------------------------------------------------

    def prepare(self, store: "MemoryStore") -> None:
        """Compute PageRank for the store as it is before the loop."""
        self.scores(store)

    def scores(self, store: "MemoryStore") -> PageRankScores:
        """PageRank of the store as it is now (recomputed only if its graph changed)."""
        entries = list(store.entries())
        ids = [e.id for e in entries]
        links = [(e.id, dst) for e in entries for dst in e.links]
        if links:
            key: tuple[Any, ...] = ("links", tuple(ids), tuple(links))
        else:
            emb_ids, vecs = store.embeddings()
            digest = hashlib.sha256(np.ascontiguousarray(vecs, dtype=np.float32).tobytes()).hexdigest()
            key = ("knn", tuple(ids), tuple(emb_ids), digest)
        if key == self._key and self._scores is not None:
            return self._scores
        if links:
            graph, nodes, edges = "links", ids, link_edges(ids, links)
        else:
            graph, nodes = "knn", emb_ids
            edges = knn_edges(self._similarities(emb_ids, vecs), self.knn) if emb_ids else []
        pr = pagerank(len(nodes), edges, damping=self.damping, tol=self.tol)
        values = {entry_id: float(v) for entry_id, v in zip(nodes, pr, strict=True)}
        for entry_id in ids:  # entries without an embedding (kNN graph) hold no score
            values.setdefault(entry_id, 0.0)
        ordered = np.array([values[i] for i in ids], dtype=np.float64)
        threshold = float(np.quantile(ordered, self.protect)) if len(ordered) else 0.0
        protected = frozenset(i for i in ids if values[i] > threshold + PR_TIE)
        self._key, self._scores = key, PageRankScores(graph, values, threshold, protected)
        self.recomputes += 1
        return self._scores

    def _similarities(self, ids: list[str], vecs: np.ndarray) -> np.ndarray:
        vecs = np.ascontiguousarray(vecs, dtype=np.float32)
        keys = [(entry_id, vecs[i].tobytes()) for i, entry_id in enumerate(ids)]
        new = [i for i, key in enumerate(keys) if key not in self._sim_pos]
        if new:
            old_n = len(self._sim_ids)
            if old_n == 0 or self._sim_vecs.shape[1] != vecs.shape[1]:
                self._sim_ids, self._sim_pos, old_n = [], {}, 0
                self._sim_vecs = np.zeros((0, vecs.shape[1]), dtype=np.float32)
            all_vecs = np.concatenate([self._sim_vecs, vecs[new]])
            rows = similarity_matrix(vecs[new], all_vecs)  # exact: the same bits however computed
            grown = np.zeros((len(all_vecs), len(all_vecs)), dtype=np.float64)
            grown[:old_n, :old_n] = self._sim[:old_n, :old_n]
            grown[old_n:, :] = rows
            grown[:, old_n:] = rows.T
            self._sim, self._sim_vecs = grown, all_vecs
            for i in new:
                self._sim_pos[keys[i]] = len(self._sim_ids)
                self._sim_ids.append(keys[i])
        idx = np.array([self._sim_pos[key] for key in keys], dtype=np.int64)
        live = self._sim[np.ix_(idx, idx)]
        if len(self._sim_ids) > 2 * len(keys) + 64:  # mostly deleted rows: keep memory O(live^2)
            self._sim, self._sim_vecs = live.copy(), self._sim_vecs[idx]
            self._sim_ids = keys
            self._sim_pos = {key: i for i, key in enumerate(keys)}
        return live

    # --- decisions -----------------------------------------------------------

    def decide(self, pair: PairContext) -> Decision:
        """Keep the higher-PageRank entry at ``s >= tau``; below, merge an unprotected anchor or preserve."""
        sc = self.scores(pair.store)
        s, pa, pb = pair.similarity, sc.of(pair.a.id), sc.of(pair.b.id)
        shown = f"PR A {pa:.4f}, B {pb:.4f}"
        if s >= self.tau:
            head = _vs(s, self.tau)
            if abs(pa - pb) <= PR_TIE:
                target, why = less_informative(pair)
                return Decision("delete", target, reason=f"{head}: equal PageRank ({shown}); delete {why}",
                                source="rule")
            target = "b" if pa > pb else "a"
            kept = "a" if target == "b" else "b"
            return Decision("delete", target, source="rule",
                            reason=f"{head}: keep higher PageRank {kept.upper()}, delete {target.upper()} ({shown})")
        head = f"{_vs(s, self.tau)}: deletes exhausted"
        prot_a, prot_b = pair.a.id in sc.protected, pair.b.id in sc.protected
        if prot_a and prot_b:
            return Decision("preserve", None, source="rule",
                            reason=f"{head}; both entries are protected (top PageRank, {shown}): preserve")
        if prot_a != prot_b:
            anchor = "b" if prot_a else "a"
        elif abs(pa - pb) <= PR_TIE:
            anchor = less_informative(pair)[0]
        else:
            anchor = "a" if pa < pb else "b"
        other = "b" if anchor == "a" else "a"
        note = ", neighbour protected" if (prot_a or prot_b) else ""
        return _merge(f"{head}; merge anchor {anchor.upper()} (lower PageRank{note}) with neighbour "
                      f"{other.upper()} ({shown})")

    def describe(self) -> dict[str, Any]:
        """The rule's parameters, recorded with the run."""
        return {"tau": self.tau, "protect": self.protect, "damping": self.damping, "knn": self.knn, "tol": self.tol}
