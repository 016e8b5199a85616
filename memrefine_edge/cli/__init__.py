"""The ``memrefine`` command line.

Conventions for every command: ``--db PATH`` (env ``MEMREFINE_DB``, default a
file in the user's data dir), ``--json`` for one machine-readable JSON object
on stdout, progress and logs on stderr, a non-zero exit code on error
(library errors exit 1 with one ``Error:`` line; usage errors, option
conflicts included, exit 2). The group and its shared helpers are in
:mod:`.app`; each ``*_cmds`` module adds its commands to it. None imports a
heavy runtime (onnxruntime, llama_cpp) at import time, so ``--help`` stays fast.
"""

from __future__ import annotations

from memrefine_edge.cli import budget_cmds, compress_cmds, eval_cmds, judge_cmds, model_cmds, store_cmds  # noqa: F401
from memrefine_edge.cli._app import cli, current_backends, db_option, default_db_path, emit, json_option, main, open_store

__all__ = ["main", "cli", "db_option", "json_option", "emit", "open_store", "default_db_path", "current_backends"]
