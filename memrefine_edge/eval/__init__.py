"""Evaluation: the LoCoMo harness, the streaming evaluation, the QA metric, reports. Not needed at run time.

The harness imports, compresses with each method, retrieves and scores; the streaming evaluation
replays each conversation session by session into a store held at a budget; the QA metric is a
reimplementation of the official LoCoMo scorer (checked against its vectors).
"""

from __future__ import annotations

from ._harness import EvalConfig, run_eval
from ._replay import UpkeepKeeper, passes_summary, percentile, replay
from ._report import portable
from ._stream import STREAM_METHODS, StreamConfig, run_stream

__all__ = ['EvalConfig', 'STREAM_METHODS', 'StreamConfig', 'UpkeepKeeper', 'passes_summary', 'percentile', 'portable',
           'replay', 'run_eval', 'run_stream']
