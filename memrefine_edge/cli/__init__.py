"""The ``memrefine`` command line.

Conventions for every command: ``--db PATH`` (env ``MEMREFINE_DB``, default a
file in the user's data dir), ``--json`` for one machine-readable JSON object
on stdout, progress and logs on stderr, a non-zero exit code on error
(library errors exit 1 with one ``Error:`` line; usage errors, option
conflicts included, exit 2). The group and its shared helpers are in
its private app module; each ``_*_cmds`` module adds its commands to it. None imports a
heavy runtime (onnxruntime, llama_cpp) at import time, so ``--help`` stays fast.
"""

from __future__ import annotations

from . import (  # noqa: F401
    _budget_cmds,
    _changes_cmds,
    _compress_cmds,
    _eval_cmds,
    _fleet_cmds,
    _judge_cmds,
    _model_cmds,
    _store_cmds,
)
from ._app import cli, main

__all__ = ["cli", "main"]
