"""Which judge a pipeline gets: :class:`JudgeKind`, the words ``--judge-model`` reads
(:func:`parse_judge_model`), and :func:`default_judge`, which builds the chosen judge behind its guard."""

from __future__ import annotations

import enum
import os
import warnings
from typing import Literal

from memrefine_edge.core import ConfigurationError

from ._judge import DEFAULT_MERGE_MIN_SIMILARITY, FactJudge, GuardedJudge, Judge, LlamaJudge, ScorerJudge

__all__ = ["JudgeKind", "JUDGE_MODEL_WORDS", "parse_judge_model", "uses_gguf", "default_judge", "scorer_guard"]


class JudgeKind(enum.StrEnum):
    """Which inner judge :func:`default_judge` builds.

    ``scorer``: the learned redundancy scorer (no language model; the
    default). ``fact``: the word-coverage fact judge. ``gguf``: a GGUF
    model through llama.cpp (the ``llm`` extra), the bundled one unless a
    ``model_path`` is given.
    """

    SCORER = "scorer"
    FACT = "fact"
    GGUF = "gguf"


#: The words the command line's ``--judge-model`` takes besides a GGUF path (kept for compatibility), and the
#: judge each stands for: the kind, and ``None`` for its model file (the bundled GGUF for ``bundled``).
JUDGE_MODEL_WORDS: dict[str, JudgeKind] = {"none": JudgeKind.SCORER, "scorer": JudgeKind.SCORER,
                                           "fact": JudgeKind.FACT, "bundled": JudgeKind.GGUF}


def parse_judge_model(text: str | os.PathLike[str] | None) -> tuple[JudgeKind, str | os.PathLike[str] | None]:
    """The judge a ``--judge-model`` value names: ``(kind, model_path)``.

    ``None`` and the words of :data:`JUDGE_MODEL_WORDS` name a kind (``none``
    and ``scorer``: the scorer; ``fact``; ``bundled``: the bundled GGUF);
    anything else is the path of a GGUF file. For the command line's edge:
    the library takes the kind and the path as two arguments
    (:func:`default_judge`).
    """
    if text is None:
        return JudgeKind.SCORER, None
    kind = JUDGE_MODEL_WORDS.get(str(text))
    if kind is not None:
        return kind, None
    return JudgeKind.GGUF, text


def uses_gguf(judge_model: str | os.PathLike[str] | None) -> bool:
    """True when a ``--judge-model`` value (:func:`parse_judge_model`) names a GGUF judge: ``bundled`` or a path."""
    return parse_judge_model(judge_model)[0] is JudgeKind.GGUF


def scorer_guard(inner: Judge) -> GuardedJudge:
    """The guard the default judge puts around the redundancy scorer (or a judge built on it): the fast
    path and the strict fact checks only (names, numbers, dates, negation, each with its binding; no
    content-word threshold, no similarity floor for merges, merges not re-checked), because the scorer
    itself judges paraphrases."""
    return GuardedJudge(inner, min_word_cover=0.0, merge_min_similarity=-1.0, check_merges=False)


def default_judge(kind: JudgeKind | str | None = None, *, model_path: str | os.PathLike[str] | None = None,
                  n_threads: int = 1, merge_min_similarity: float | None = None,
                  mode: Literal["logits", "generate"] = "logits") -> GuardedJudge:
    """The product's judge: the fast path, then an inner judge, behind the fact checks.

    ``kind`` (a :class:`JudgeKind` or its value) picks the inner judge;
    ``None``: ``gguf`` when a ``model_path`` is given, else ``scorer``.

    * ``scorer`` (the default): :class:`ScorerJudge`, the learned
      redundancy scorer, no language model. Measured on the labelled test
      pairs it is the most accurate judge and the cheapest
      (``bench/results/judge_configs.md``). The guard behind it checks the
      strict facts (names, numbers, dates, negation, with their bindings) of
      every delete; the scorer, not a word-coverage threshold, decides
      paraphrases. ``merge_min_similarity`` (default: none) turns its merges
      below that cosine into preserves.
    * ``fact``: :class:`FactJudge`, the word-coverage rules the scorer
      replaced (kept for comparison); ``merge_min_similarity`` defaults to
      :data:`DEFAULT_MERGE_MIN_SIMILARITY`.
    * ``gguf``: :class:`LlamaJudge` on ``model_path`` (``None``: the
      bundled GGUF) behind the word-coverage guard, in ``mode``. The model
      loads lazily, on the first pair the fast path does not settle.

    ``model_path`` is only ever a path; it goes with ``gguf``, and with
    another kind it is a :class:`~memrefine_edge.core.ConfigurationError`.
    The words the command line's ``--judge-model`` takes are read by
    :func:`parse_judge_model`; given here as ``kind`` (``"none"``,
    ``"bundled"``, a path) they still work, with a ``DeprecationWarning``.
    """
    kind, model_path = _kind_and_path(kind, model_path)
    if model_path is not None and kind is not JudgeKind.GGUF:
        raise ConfigurationError(f"a judge model file ({model_path}) goes with a GGUF judge, not the {kind} judge")
    if kind is JudgeKind.SCORER:
        return scorer_guard(ScorerJudge(merge_min_similarity=merge_min_similarity))
    mms = DEFAULT_MERGE_MIN_SIMILARITY if merge_min_similarity is None else merge_min_similarity
    inner: Judge
    if kind is JudgeKind.FACT:
        inner = FactJudge(merge_min_similarity=mms)
    else:
        inner = LlamaJudge(model_path, mode=mode, n_threads=n_threads)
    return GuardedJudge(inner, merge_min_similarity=mms)


def _kind_and_path(kind: JudgeKind | str | os.PathLike[str] | None, model_path: str | os.PathLike[str] | None
                   ) -> tuple[JudgeKind, str | os.PathLike[str] | None]:
    """The kind :func:`default_judge` builds, and its model path (one given as ``kind`` moves, with a warning)."""
    if kind is None:
        return (JudgeKind.SCORER if model_path is None else JudgeKind.GGUF), model_path
    if isinstance(kind, JudgeKind):
        return kind, model_path
    if isinstance(kind, str) and kind in tuple(JudgeKind):
        return JudgeKind(kind), model_path
    if model_path is None and isinstance(kind, (str, os.PathLike)):
        legacy, path = parse_judge_model(kind)
        warnings.warn(f"default_judge({str(kind)!r}) is deprecated: give the kind and the path apart, "
                      f"default_judge({legacy.value!r}{', model_path=...' if path is not None else ''})",
                      DeprecationWarning, stacklevel=3)
        return legacy, path
    raise ConfigurationError(f"unknown judge kind {kind!r}; use one of {', '.join(k.value for k in JudgeKind)}")
