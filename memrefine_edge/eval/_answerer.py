"""Answering LoCoMo questions from retrieved memories (the evaluation's QA columns)."""

from __future__ import annotations

import abc
import os
from collections.abc import Sequence

__all__ = ["Answerer", "LlamaAnswerer"]


class Answerer(abc.ABC):
    """Answers a question from retrieved memories: one abstract method."""

    @abc.abstractmethod
    def answer(self, question: str, memories: Sequence[str]) -> str:
        """A short answer to ``question`` from ``memories`` (best first)."""

    def describe(self) -> str:
        """What to record in results.json about this answerer."""
        return type(self).__name__


_ANSWER_SYSTEM = (
    "You answer questions about a long conversation using only the memories given. "
    "Reply with a short answer phrase (a few words, a name or a date), no explanation. "
    "If the memories do not contain the answer, reply exactly: No information available."
)


class LlamaAnswerer(Answerer):
    """A local GGUF answer model (the shared llama.cpp loader); temperature 0, short answers."""

    def __init__(self, *, model_path: str | os.PathLike[str] | None = None, n_threads: int = 1,
                 n_ctx: int = 2048, max_tokens: int = 32, memory_chars: int = 600, seed: int = 1234) -> None:
        from memrefine_edge.backends import LlamaModel

        self.model = LlamaModel(model_path, n_ctx=n_ctx, n_threads=n_threads, seed=seed)  # path checked now
        self.model_path, self.n_threads, self.n_ctx = model_path, n_threads, n_ctx
        self.max_tokens, self.memory_chars, self.seed = max_tokens, memory_chars, seed
        self.calls = 0

    def describe(self) -> str:
        """Model path and decoding settings."""
        return f"LlamaAnswerer({self.model_path or 'bundled SmolLM2-135M'}, max_tokens={self.max_tokens}, temp 0)"

    def answer(self, question: str, memories: Sequence[str]) -> str:
        """Generate the answer; memories that do not fit the context are dropped from the end."""
        mems = [m[: self.memory_chars] for m in memories]
        while True:
            listing = "\n".join(f"- {m}" for m in mems) or "(none)"
            user = f"Memories:\n{listing}\n\nQuestion: {question}\nShort answer:"
            tokens = self.model.tokenize(self.model.chat([{"role": "system", "content": _ANSWER_SYSTEM},
                                                          {"role": "user", "content": user}]))
            if len(tokens) + self.max_tokens <= self.n_ctx or not mems:
                break
            mems = mems[:-1]  # the lowest-ranked memory goes first
        self.calls += 1
        return self.model.complete(tokens, max_tokens=self.max_tokens, stop=["<|im_end|>", "\n"]).text.strip()
