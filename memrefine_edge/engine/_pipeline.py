"""The one place the compression pipeline is assembled: encoder, method, merger.

The command line, the evaluation harness and the benchmarks all call
:func:`build`. What it builds comes from :class:`Backends`, whose three
factory methods make the real models; a test or an application hands
:func:`build` another :class:`Backends` (for example
:class:`memrefine_edge.testing.FakeBackends`) instead of patching anything.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from dataclasses import InitVar, dataclass, field
from typing import TYPE_CHECKING, Any

from memrefine_edge.core import ConfigurationError, OptionConflictError
from memrefine_edge.judging import JudgeKind, parse_judge_model
from memrefine_edge.methods import check_method_options, get_method, method_class

if TYPE_CHECKING:  # pragma: no cover
    from memrefine_edge.backends import Encoder
    from memrefine_edge.judging import Judge, Merger
    from memrefine_edge.methods import Method

__all__ = ["PipelineConfig", "Pipeline", "Backends", "build"]

#: The method options the config once took as fields of their own, and the flags that set them.
_LEGACY_OPTIONS = ("tau", "protect", "keep_last_copies", "defer_last_copies")


@dataclass(frozen=True, kw_only=True)
class PipelineConfig:
    """What a user chooses for a compression: the one options object.

    The command line builds it from its flags (``memrefine compress``), the
    evaluation from its configuration, and :func:`build` and
    :func:`~memrefine_edge.engine.compress_store` take it.

    ``method``: a registered method's name (a plugin's included);
    ``method_options``: its options by name, checked against what the
    method declares (:attr:`~memrefine_edge.methods.Method.options`).

    ``judge`` (a :class:`~memrefine_edge.judging.JudgeKind`) and
    ``judge_model`` (the path of a GGUF file, only with ``judge="gguf"``;
    ``None``: the bundled GGUF) choose the judge of a method that decides
    with one (:attr:`~memrefine_edge.methods.Method.uses_judge`, like
    ``memrefine``); ``judge`` defaults to ``gguf`` when a ``judge_model`` is
    given, else ``scorer`` (:func:`memrefine_edge.judging.default_judge`).
    ``merge_min_similarity`` goes to that judge; another method refuses it
    (:class:`OptionConflictError`). ``merge_model``: a GGUF for merges
    (``"bundled"``: the bundled one), or ``None`` for the deterministic,
    fact-keeping merge. ``threads``: CPU threads for the models (None:
    encoder ``min(2, cores)``, LLM 1).

    ``tau``, ``protect``, ``keep_last_copies`` and ``defer_last_copies``
    given as keywords of their own still work (they become method options)
    but are deprecated: give ``method_options``. So are the words ``none``,
    ``scorer``, ``fact`` and ``bundled`` as ``judge_model``.
    """

    method: str = "memrefine"
    method_options: Mapping[str, Any] = field(default_factory=dict)
    judge: JudgeKind | None = None
    judge_model: str | os.PathLike[str] | None = None
    merge_model: str | None = None
    encoder_model: str | None = None
    threads: int | None = None
    merge_min_similarity: float | None = None
    tau: InitVar[float | None] = None
    protect: InitVar[float | None] = None
    keep_last_copies: InitVar[bool | None] = None
    defer_last_copies: InitVar[bool | None] = None

    def __post_init__(self, tau: float | None, protect: float | None, keep_last_copies: bool | None,
                      defer_last_copies: bool | None) -> None:
        options = dict(self.method_options)
        legacy = {name: value for name, value in zip(_LEGACY_OPTIONS, (tau, protect, keep_last_copies,
                                                                         defer_last_copies), strict=True)
                  if value is not None}
        if legacy:
            warnings.warn(f"PipelineConfig({', '.join(f'{k}=...' for k in legacy)}) is deprecated: give "
                          f"method_options={{{', '.join(repr(k) + ': ...' for k in legacy)}}}", DeprecationWarning,
                          stacklevel=3)
            both = sorted(legacy.keys() & options.keys())
            if both:
                raise OptionConflictError(f"{both[0]} is given twice: as a keyword and in method_options")
            options.update(legacy)
        object.__setattr__(self, "method_options", options)  # a copy of its own (a dict: it pickles, for workers)
        judge, model = self.judge, self.judge_model
        named, path = parse_judge_model(model)
        if model is not None and path is None:  # one of the command line's words, not a file
            warnings.warn(f"PipelineConfig(judge_model={model!r}) is deprecated: give judge={named.value!r} "
                          "(judge_model is a GGUF file)", DeprecationWarning, stacklevel=3)
            if judge is not None and judge != named:
                raise OptionConflictError(f"judge_model={model!r} names another judge than judge={judge!r}")
            judge, model = named, None
        if judge is None:
            judge = JudgeKind.GGUF if model is not None else JudgeKind.SCORER
        try:
            judge = JudgeKind(judge)
        except ValueError:
            raise ConfigurationError(f"unknown judge {judge!r}; use one of "
                                     f"{', '.join(k.value for k in JudgeKind)}") from None
        if model is not None and judge is not JudgeKind.GGUF:
            raise OptionConflictError(f"--judge-model (a GGUF file) goes with --judge gguf, not --judge {judge}")
        object.__setattr__(self, "judge", judge)
        object.__setattr__(self, "judge_model", model)

    def validate(self) -> None:
        """Check the method and its options against the registry (a plugin is loaded here).

        :class:`~memrefine_edge.core.UnknownMethodError` (or
        :class:`~memrefine_edge.core.PluginError`) for the method;
        :class:`OptionConflictError` for an option the method does not take,
        :class:`~memrefine_edge.core.MethodOptionError` for a value it does
        not take.
        """
        cls = method_class(self.method)
        check_method_options(self.method, self.method_options)
        if self.merge_min_similarity is not None and not cls.uses_judge:
            raise OptionConflictError(f"--merge-min-similarity applies to a method that decides with a judge "
                                      f"(--method memrefine), not {self.method}")


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
        """The judge of a method that decides with one: ``config.judge`` (default: fast path, the redundancy
        scorer, fact checks; :func:`~memrefine_edge.judging.default_judge`)."""
        from memrefine_edge.judging import default_judge

        # The LLM defaults to one thread: with two, while another process was busy, it ran slower.
        return default_judge(config.judge, model_path=config.judge_model,
                             merge_min_similarity=config.merge_min_similarity, n_threads=config.threads or 1)

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
        """The method named by ``config.method``, from the registry, with ``config.method_options``; a
        method that decides with a judge gets :meth:`judge`."""
        judge = self.judge(config) if method_class(config.method).uses_judge else None
        return get_method(config.method, judge=judge, **config.method_options)


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
