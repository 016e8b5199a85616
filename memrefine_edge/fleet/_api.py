"""``compress_many``: the fleet job from Python."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Iterator
from typing import Any

from memrefine_edge.core import ConfigurationError
from memrefine_edge.engine import MODES, Backends, PipelineConfig
from memrefine_edge.store import METRICS, parse_budget

from ._inputs import StoreJob, as_jobs
from ._ray import require_ray, run_on_ray
from ._results import StoreResult
from ._task import FleetSettings

__all__ = ["compress_many"]


def _budget_text(budget: str | float | None) -> str | None:
    if budget is None:
        return None
    if isinstance(budget, bool) or not isinstance(budget, (str, int, float)):
        raise ConfigurationError(f"budget must be text (\"50%\", \"80KB\") or a number, got {budget!r}")
    text = budget if isinstance(budget, str) else repr(budget)
    parse_budget(text)  # a malformed budget fails here, before any store is touched
    return text


def compress_many(stores: Iterable[str | os.PathLike[str] | StoreJob], *, budget: str | float | None = None,
                  metric: str | None = None, mode: str = "live", config: PipelineConfig | None = None,
                  backends: Backends | None = None, address: str | None = None, num_cpus: int | None = None,
                  window: int | None = None, max_retries: int = 3,
                  store_options: dict[str, Any] | None = None) -> Iterator[StoreResult]:
    """Compress many stores on Ray, one task with one CPU each; yields each store's row as it ends.

    ``stores``: paths or :class:`StoreJob` (see :func:`read_manifest` and
    :func:`glob_stores`), read lazily as tasks are submitted. Each store gets
    the compression ``memrefine compress`` runs
    (:func:`memrefine_edge.engine.compress_store`): ``budget`` (a ratio or
    a size, as ``memrefine budget set`` reads it; a manifest line's own
    budget wins) becomes its standing budget, so running the same job again
    changes nothing; None uses each store's standing budget. ``config`` and
    ``backends`` assemble the pipeline as for one store (``engine.build``),
    with one model thread unless ``config.threads`` says otherwise.

    ``address``: a running Ray cluster (``"auto"``, ``"ray://host:10001"``);
    None starts Ray on this machine for the job (``num_cpus``: how many
    stores at once; default all cores) unless Ray is already started in
    this process. ``window``: tasks in flight at most (default twice the
    CPUs). ``max_retries``: how often a store whose worker died is tried
    again. The generator raises :class:`KeyboardInterrupt` after the last
    row when Ctrl-C stopped the job (see :mod:`memrefine_edge.fleet._ray`).

    :raises MissingExtraError: Ray is not installed (the ``fleet`` extra).
    """
    require_ray()
    config = config or PipelineConfig()
    if config.threads is None:
        config = dataclasses.replace(config, threads=1)
    config.validate()
    if metric is not None and metric not in METRICS:
        raise ConfigurationError(f"unknown metric {metric!r}; use one of {', '.join(METRICS)}")
    if mode not in MODES:
        raise ConfigurationError(f"unknown budget mode {mode!r}; use one of {', '.join(MODES)}")
    if window is not None and window < 1:
        raise ConfigurationError(f"window must be at least 1, got {window}")
    if max_retries < 0:
        raise ConfigurationError(f"max_retries must be 0 or more, got {max_retries}")
    settings = FleetSettings(budget=_budget_text(budget), metric=metric, mode=mode, config=config,
                             backends=backends, store_options=dict(store_options or {}))
    return run_on_ray(as_jobs(stores), settings, address=address, num_cpus=num_cpus, window=window,
                      max_retries=max_retries)
