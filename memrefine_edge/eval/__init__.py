"""Evaluation: the LoCoMo harness, the QA metric, reports. Not needed at run time.

The harness imports, compresses with each method, retrieves and scores; the QA metric is a
reimplementation of the official LoCoMo scorer (checked against its vectors).
"""

from __future__ import annotations

from ._harness import EvalConfig, run_eval
from ._report import portable

__all__ = ['EvalConfig', 'portable', 'run_eval']
