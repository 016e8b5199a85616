"""The compression run: its phases (identical texts, judged pairs, deferred deletes, eviction), upkeep, assembly."""

from __future__ import annotations

from ._compressor import MODES, Compressor
from ._pipeline import Backends, Pipeline, PipelineConfig, build
from ._store_run import StoreRun, compress_store
from ._upkeep import Upkeep

__all__ = ['Backends', 'Compressor', 'MODES', 'Pipeline', 'PipelineConfig', 'StoreRun', 'Upkeep', 'build',
           'compress_store']
