"""The paper's naive argmax order (§3.2) and scripted judges, for checking the pair queue step for step."""

from __future__ import annotations

import numpy as np

from memrefine_edge.index import PairQueue, similarity_matrix
from memrefine_edge.store import quantize_embedding
from memrefine_edge.store._vectors import decode_embedding, encode_embedding

Pair = tuple[str, str, float]


class NaiveOrder:
    """The paper's argmax, recomputed from scratch on every call."""

    def __init__(self, ids: list[str], vectors: np.ndarray, excluded=()) -> None:
        self.ids = list(ids)
        self.vecs = [np.asarray(v, dtype=np.float32) for v in vectors]
        self.alive = [True] * len(self.ids)
        self.judged: set[frozenset[str]] = {frozenset(p) for p in excluded}

    def pop(self) -> Pair | None:
        live = [i for i, a in enumerate(self.alive) if a]  # insertion order
        if len(live) < 2:
            return None
        sims = similarity_matrix(np.stack([self.vecs[i] for i in live]))
        sims[np.tril_indices(len(live))] = -np.inf  # keep i < j in insertion order
        where = {self.ids[i]: r for r, i in enumerate(live)}
        for pair in self.judged:
            a, b = sorted(where.get(e, -1) for e in pair)
            if a >= 0:
                sims[a, b] = -np.inf
        best = sims.max()
        if best == -np.inf:
            return None
        r, c = np.argwhere(sims == best)[0]  # row-major: smallest (order(a), order(b))
        a, b = self.ids[live[r]], self.ids[live[c]]
        self.judged.add(frozenset((a, b)))
        return a, b, float(best)

    def remove(self, entry_id: str) -> None:
        self.alive[self.ids.index(entry_id)] = False

    def add(self, entry_id: str, vector: np.ndarray) -> None:
        self.ids.append(entry_id)
        self.vecs.append(np.asarray(vector, dtype=np.float32))
        self.alive.append(True)


class ScriptedJudge:
    """A deterministic random policy: delete a / delete b / merge / preserve."""

    def __init__(self, seed: int, dim: int, *, p_preserve: float = 0.4) -> None:
        self.rng = np.random.default_rng(seed)
        self.dim = dim
        self.p = np.array([0.2, 0.2, 0.12, 0.08, p_preserve])
        self.p /= self.p.sum()
        self.merges = 0

    def act(self, pair: Pair, vecs: dict[str, np.ndarray], *targets) -> None:
        a, b, _ = pair
        action = self.rng.choice(5, p=self.p)
        if action == 0:
            for t in targets:
                t.remove(a)
        elif action == 1:
            for t in targets:
                t.remove(b)
        elif action in (2, 3):
            if action == 2:
                v = (vecs[a] + vecs[b]).astype(np.float32)
            else:
                v = self.rng.standard_normal(self.dim).astype(np.float32)
            norm = np.linalg.norm(v)
            v = v / norm if norm > 0 else np.eye(self.dim, dtype=np.float32)[0]
            v = v.astype(np.float32)
            self.merges += 1
            new_id = f"m{self.merges}"
            vecs[new_id] = v
            for t in targets:
                t.remove(a)
                t.remove(b)
                t.add(new_id, v)


def unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def make_data(kind: str, n: int, d: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "gauss":
        return unit(rng.standard_normal((n, d)))
    if kind == "dups":  # few distinct vectors, many exact copies: exact score ties
        base = unit(rng.standard_normal((max(1, n // 4), d)))
        return base[rng.integers(0, base.shape[0], n)]
    if kind == "lattice":  # small-integer directions: many equal scores across different pairs
        return unit(rng.integers(-1, 2, (n, d)).astype(np.float32) + np.eye(1, d, dtype=np.float32) * 1e-3)
    if kind == "raw":  # not normalised: scores are plain dot products with mixed norms
        return (rng.standard_normal((n, d)) * rng.uniform(0.1, 3.0, (n, 1))).astype(np.float32)
    raise AssertionError(kind)


def drive(q: PairQueue, ref, judge: ScriptedJudge, vecs: dict[str, np.ndarray], *, steps: int | None = None) -> list[Pair]:
    """Pop from both and apply the judge to both until exhausted (or ``steps`` pops)."""
    seq: list[Pair] = []
    while steps is None or len(seq) < steps:
        got, want = q.pop(), ref.pop()
        assert got == want, f"step {len(seq)}: queue {got} != reference {want}"
        if got is None:
            break
        seq.append(got)
        judge.act(got, vecs, q, ref)
        if isinstance(ref, NaiveOrder):
            assert len(q) == sum(ref.alive)
    return seq


def run_case(kind: str, n: int, d: int, k: int, seed: int, **queue_kw) -> list[Pair]:
    x = make_data(kind, n, d, seed)
    ids = [f"e{i}" for i in range(n)]
    vecs = dict(zip(ids, x))
    q = PairQueue(ids, x, k=k, **queue_kw)
    seq = drive(q, NaiveOrder(ids, x), ScriptedJudge(seed + 1000, d), vecs)
    assert q.pop() is None and q.peek() is None and not q.candidates_left()
    return seq


# ------------------------------------------------------------ exact scoring


def decoded(v: np.ndarray) -> np.ndarray:
    return decode_embedding(encode_embedding(v))


class QuantizedTarget:
    """A queue of int8 codes and scales, driven like a float one: each vector is quantised as the store stores it."""

    def __init__(self, ids: list[str], x: np.ndarray, **kw) -> None:
        codes, scales = zip(*(quantize_embedding(v) for v in x), strict=True)
        self.codes = np.stack(codes)
        self.q = PairQueue(ids, self.codes, scales=np.array(scales), **kw)

    def __len__(self) -> int:
        return len(self.q)

    def pop(self):
        return self.q.pop()

    def remove(self, entry_id: str) -> None:
        self.q.remove(entry_id)

    def add(self, entry_id: str, v: np.ndarray) -> None:
        self.q.add(entry_id, *quantize_embedding(v))


class DecodedNaive(NaiveOrder):
    """The naive argmax over the vectors as the store reads them back."""

    def __init__(self, ids, x) -> None:
        super().__init__(ids, np.stack([decoded(v) for v in x]))

    def add(self, entry_id: str, vector: np.ndarray) -> None:
        super().add(entry_id, decoded(vector))
