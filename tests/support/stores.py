"""Small synthetic stores and the compressor the engine tests share (deterministic fakes, no models)."""

from __future__ import annotations

import random
from pathlib import Path

from memrefine_edge.core import Decision, Entry
from memrefine_edge.engine import Compressor
from memrefine_edge.methods import Method, PairContext
from memrefine_edge.store import MemoryStore
from memrefine_edge.testing import HashEncoder

from .fakes import ConcatMerger, ScriptedMethod

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
    """The engine tests' compressor: hash encoder, scripted method, concat merger, the paper's order (mode=...
    for another)."""
    kw.setdefault("mode", "paper")
    return Compressor(store, encoder=HashEncoder(), method=method or ScriptedMethod(), merger=ConcatMerger(),
                      k=kw.pop("k", 4), **kw)


class OneShot(Method):
    name = "oneshot"

    def __init__(self, decision: Decision) -> None:
        self.decision = decision

    def decide(self, pair: PairContext) -> Decision:
        return self.decision
