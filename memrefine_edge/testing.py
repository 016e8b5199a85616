"""Deterministic fakes for tests and for users who test code built on this package.

Nothing here loads a model. :class:`HashEncoder` maps words to fixed random
directions, so texts that share words get similar vectors; the scripted
judges and mergers replay decisions given up front.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from memrefine_edge.methods import Method

import numpy as np

from memrefine_edge.backends import Encoder

__all__ = ["HashEncoder"]

_WORD = re.compile(r"\w+", re.UNICODE)


class HashEncoder(Encoder):
    """Bag-of-words encoder with hashed word vectors: fast, deterministic, offline."""

    def __init__(self, *, dim: int = 384, model_id: str = "hash-bow") -> None:
        self.dim = dim
        self.model_id = model_id
        self._cache: dict[str, np.ndarray] = {}

    def _word(self, word: str) -> np.ndarray:
        vec = self._cache.get(word)
        if vec is None:
            seed = int.from_bytes(hashlib.sha256(word.encode("utf-8")).digest()[:8], "little")
            vec = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
            self._cache[word] = vec
        return vec

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                out[i] += self._word(word)
            norm = np.linalg.norm(out[i])
            if norm > 0:
                out[i] /= norm
            else:  # no words at all: a fixed unit vector, so cosine stays defined
                out[i, 0] = 1.0
        return out


# --- judge and merger fakes -------------------------------------------------------

from memrefine_edge.core import Decision, JudgeOutputError  # noqa: E402
from memrefine_edge.judging import Judge, MergedEntry, Merger  # noqa: E402


class ScriptedJudge(Judge):
    """Replays given decisions in order; an ``Exception`` instance in the script is raised instead.

    Once the script is used up, ``default`` is returned (or, when it is
    None, an ``IndexError`` is raised). ``calls`` records ``(a, b, similarity)``.
    """

    def __init__(self, script: Sequence["Decision | Exception"] = (), *, default: Decision | None = None) -> None:
        self.script = list(script)
        self.default = default
        self.calls: list[tuple[str, str, float]] = []

    def decide(self, a: str, b: str, similarity: float) -> Decision:
        self.calls.append((a, b, similarity))
        if not self.script:
            if self.default is None:
                raise IndexError("ScriptedJudge ran out of decisions")
            return self.default
        item = self.script.pop(0)
        if isinstance(item, Exception):
            raise item
        return item


class InvalidOutputJudge(Judge):
    """Always fails the way a model with unparseable output does (raises JudgeOutputError)."""

    def __init__(self, raw: str = "not json") -> None:
        self.raw = raw
        self.calls = 0

    def decide(self, a: str, b: str, similarity: float) -> Decision:
        self.calls += 1
        raise JudgeOutputError("scripted invalid output", raw=self.raw)


class AlwaysJudge(Judge):
    """Returns one fixed decision for every pair (e.g. the 135M model's habitual ``delete a``)."""

    def __init__(self, decision: Decision) -> None:
        self.decision = decision

    def decide(self, a: str, b: str, similarity: float) -> Decision:
        return self.decision


class FakeMerger(Merger):
    """Concatenates the two entries (``"a b"``); or replays a script of contents / exceptions."""

    def __init__(self, script: Sequence["str | Exception"] = ()) -> None:
        self.script = list(script)
        self.calls: list[tuple[str, str, str]] = []

    def merge(self, a: str, b: str, instruction: str) -> MergedEntry:
        self.calls.append((a, b, instruction))
        if self.script:
            item = self.script.pop(0)
            if isinstance(item, Exception):
                raise item
            return MergedEntry(content=item, keywords=(), source="llm")
        return MergedEntry(content=f"{a.strip()} {b.strip()}", keywords=(), source="concat")


__all__ += ["ScriptedJudge", "InvalidOutputJudge", "AlwaysJudge", "FakeMerger"]


# --- the whole pipeline, without models ---------------------------------------------------

from memrefine_edge.engine import Backends, PipelineConfig  # noqa: E402


class FakeBackends(Backends):
    """:class:`~memrefine_edge.engine._pipeline.Backends` that load no model.

    By default: :class:`HashEncoder`, the model-free judge (the default
    redundancy scorer, or the fact judge with ``judge="fact"``; a GGUF judge
    becomes the scorer, no model is loaded) and the deterministic merge. Pass any of
    ``encoder``, ``method``, ``merger`` to use that object instead (it is
    returned as is, for every command). Hand it to
    ``memrefine_edge.engine._pipeline.build(..., backends=...)``, to the command line
    as ``main(argv, backends=...)``, or to click's runner as ``obj=``.
    """

    def __init__(self, *, encoder: Encoder | None = None, method: "Method | None" = None,
                 merger: Merger | None = None) -> None:
        self._encoder, self._method, self._merger = encoder, method, merger

    def encoder(self, config: PipelineConfig) -> Encoder:
        return self._encoder if self._encoder is not None else HashEncoder()

    def judge(self, config: PipelineConfig) -> Judge:
        from memrefine_edge.judging import JudgeKind, default_judge

        kind = JudgeKind.FACT if config.judge is JudgeKind.FACT else JudgeKind.SCORER
        return default_judge(kind, merge_min_similarity=config.merge_min_similarity)

    def method(self, config: PipelineConfig) -> "Method":
        return self._method if self._method is not None else super().method(config)

    def merger(self, config: PipelineConfig) -> Merger:
        from memrefine_edge.judging import GuardedMerger

        return self._merger if self._merger is not None else GuardedMerger(None)


__all__ += ["FakeBackends"]
