"""A seeded stream of short distinct facts: what an assistant mostly accumulates (no two say the same).

Four sentence templates over names, hobbies, cities and years; every text is unique. Used by the
benchmarks that need a store where the judge finds nothing redundant (every pair it is shown is
preserved).
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from memrefine_edge.core import Entry

NAMES = ("Ana Ben Carla Dev Eli Fay Gus Hana Ivo Jun Kai Lea Max Noor Oli Pia Quin Rui Sam Tao Uma Vik Wen Xia "
         "Yan Zoe").split()
HOBBIES = ("kayaking pottery chess climbing baking birding fencing judo knitting rowing salsa surfing tennis "
           "yoga").split()
CITIES = "Lisbon Oslo Quito Lima Cairo Hanoi Dakar Perth Turin Porto Kyoto Riga Sofia Tunis".split()
TEMPLATES = ("{n} took up {h} in {y}.", "{n} moved to {c} in {y}.", "{n} met a friend from {c} at a {h} class.",
             "In {y}, {n} ran a {h} club in {c}.")


def distinct_facts(n: int, *, seed: int = 0, prefix: str = "f") -> Iterator[Entry]:
    """``n`` entries of distinct short facts (ids ``f00000``, ...), the same for the same seed."""
    rng, seen = random.Random(seed), set()
    while len(seen) < n:
        text = rng.choice(TEMPLATES).format(n=rng.choice(NAMES), h=rng.choice(HOBBIES), c=rng.choice(CITIES),
                                            y=rng.randint(1950, 2025))
        if text not in seen:
            yield Entry(id=f"{prefix}{len(seen):06d}", content=text)
            seen.add(text)
