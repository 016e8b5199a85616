"""The one place the compression pipeline is assembled: encoder, method, merger.

The command line, the evaluation harness and the benchmarks all call
:func:`build`. What it builds comes from :class:`Backends`, whose three
factory methods make the real models; a test or an application hands
:func:`build` another :class:`Backends` (for example
:class:`memrefine_edge.testing.FakeBackends`) instead of patching anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memrefine_edge.core import OptionConflictError
from memrefine_edge.methods import get_method

if TYPE_CHECKING:  # pragma: no cover
    from memrefine_edge.backends import Encoder
    from memrefine_edge.judging import Judge, Merger
    from memrefine_edge.methods import Method

__all__ = ["PipelineConfig", "Pipeline", "Backends", "build"]


@dataclass(frozen=True)
class PipelineConfig:
    """What a user chooses (the ``compress`` options).

    ``judge_model``: ``None``/``"none"`` for the default learned redundancy
    scorer (no language model), ``"fact"`` for the word-coverage fact judge,
    ``"bundled"`` for the bundled GGUF, or a GGUF path
    (:func:`memrefine_edge.judging._judge.default_judge`). ``merge_model``: a GGUF for merges
    (``"bundled"``: the bundled one), or ``None`` for the deterministic, fact-keeping merge. ``threads``: CPU
    threads for the models (None: encoder ``min(2, cores)``, LLM 1).
    ``tau``/``protect`` go to the rule methods, ``merge_min_similarity`` to
    the memrefine judge and ``keep_last_copies`` to the memrefine method
    (None: on; False lets a delete take the store's last copy of a specific
    word, see :mod:`memrefine_edge.text._lastcopy`) and ``defer_last_copies``
    (True: such a delete is deferred, not merged); giving one to a method that has
    no use for it is an :class:`OptionConflictError`.
    """

    method: str = "memrefine"
    judge_model: str | None = None
    merge_model: str | None = None
    encoder_model: str | None = None
    threads: int | None = None
    tau: float | None = None
    protect: float | None = None
    merge_min_similarity: float | None = None
    keep_last_copies: bool | None = None
    defer_last_copies: bool | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def validate(self) -> None:
        """Raise :class:`OptionConflictError` for options the chosen method does not take."""
        if self.method == "memrefine":
            if self.tau is not None or self.protect is not None:
                raise OptionConflictError("--tau and --protect apply to the rule methods (rulesim, rulepr), "
                                          "not memrefine")
            if self.defer_last_copies and self.keep_last_copies is False:
                raise OptionConflictError("--defer-last-copies needs the last-copy check: drop "
                                          "--no-last-copy-check")
        else:
            if self.merge_min_similarity is not None:
                raise OptionConflictError("--merge-min-similarity applies to --method memrefine")
            if self.keep_last_copies is not None:
                raise OptionConflictError("--no-last-copy-check applies to --method memrefine")
            if self.defer_last_copies is not None:
                raise OptionConflictError("--defer-last-copies applies to --method memrefine")
            if self.protect is not None and self.method != "rulepr":
                raise OptionConflictError("--protect only applies to --method rulepr")


@dataclass(frozen=True)
class Pipeline:
    """What a compression runs with."""

    encoder: "Encoder"
    method: "Method"
    merger: "Merger"


class Backends:
    """Factories for the pipeline's parts; the defaults load the real models (lazily, when first used)."""

    def encoder(self, config: PipelineConfig) -> "Encoder":
        """The sentence encoder (default: the int8 MiniLM through onnxruntime)."""
        from memrefine_edge.backends import OnnxEncoder

        return OnnxEncoder(model_path=config.encoder_model, threads=config.threads)

    def judge(self, config: PipelineConfig) -> "Judge":
        """The memrefine judge (default: fast path, the redundancy scorer, fact checks; see ``judge_model``)."""
        from memrefine_edge.judging import default_judge

        # The LLM defaults to one thread: with two, while another process was busy, it ran slower.
        return default_judge(config.judge_model, merge_min_similarity=config.merge_min_similarity,
                             n_threads=config.threads or 1)

    def merger(self, config: PipelineConfig) -> "Merger":
        """The merger: deterministic and fact-keeping, or ``merge_model`` behind the fact check."""
        from memrefine_edge.judging import GuardedMerger, LlamaMerger

        # The bundled 135M model writes invalid or fact-inventing merges (bench/judge.py
        # merge), so without a merge model the merge is the
        # deterministic one (both entries' fact sentences, filler dropped).
        if not config.merge_model:
            return GuardedMerger(None)
        path = None if config.merge_model == "bundled" else config.merge_model
        return GuardedMerger(LlamaMerger(path, n_threads=config.threads or 1))

    def method(self, config: PipelineConfig) -> "Method":
        """The compression method named by ``config.method``."""
        if config.method == "memrefine":
            return get_method("memrefine", judge=self.judge(config),
                              keep_last_copies=config.keep_last_copies is not False,
                              defer_last_copies=bool(config.defer_last_copies))
        options = {k: v for k, v in {"tau": config.tau, "protect": config.protect}.items() if v is not None}
        return get_method(config.method, **options, **config.extra)


def build(config: PipelineConfig | None = None, *, backends: Backends | None = None,
          encoder: "Encoder | None" = None) -> Pipeline:
    """Validate ``config`` and build the encoder, method and merger (heavy imports happen here, not at import).

    ``encoder``: one already loaded (for example the evaluation's, shared by
    all its compressions) instead of a new one from ``backends``.
    """
    config = config or PipelineConfig()
    config.validate()
    parts = backends or Backends()
    method = parts.method(config)  # an unknown method fails before any model loads
    return Pipeline(encoder=encoder if encoder is not None else parts.encoder(config), method=method,
                    merger=parts.merger(config))
