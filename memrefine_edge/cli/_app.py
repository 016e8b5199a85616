"""The ``memrefine`` group and what every command shares (options, store opening, output).

Conventions for every command: ``--db PATH`` (env ``MEMREFINE_DB``, default a
file in the user's data dir), ``--json`` for one machine-readable JSON object
on stdout, progress and logs on stderr, a non-zero exit code on error.
Library errors (:class:`memrefine_edge.core._errors.MemRefineError`) become one-line
messages here, at the edge, and nowhere else.
"""

from __future__ import annotations

import errno
import json
import os
import re
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from memrefine_edge.core import ConfigurationError, MemRefineError, OptionConflictError

if TYPE_CHECKING:  # pragma: no cover
    from memrefine_edge.engine import Backends
    from memrefine_edge.judging import JudgeKind

__all__ = ["main", "cli", "db_option", "json_option", "emit", "open_store", "default_db_path", "current_backends",
           "judge_choice"]


def default_db_path() -> Path:
    """``$MEMREFINE_DB`` or ``memory.db`` in the user's data dir."""
    env = os.environ.get("MEMREFINE_DB")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("memrefine_edge")) / "memory.db"


db_option = click.option(
    "--db",
    "db_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Memory store file [env MEMREFINE_DB; default: memory.db in the user data dir].",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")


def resolve_db(db_path: Path | None) -> Path:
    """The store path of a command (``--db``, else :func:`default_db_path`).

    A path naming a FIFO, a device, a socket or a folder is refused here,
    before any command opens it or creates anything beside it
    (:class:`~memrefine_edge.core._errors.StorePathError`).
    """
    from memrefine_edge.store import check_path_kind

    path = db_path if db_path is not None else default_db_path()
    check_path_kind(path)
    return path


def store_settings() -> dict[str, Any]:
    """The store settings every command takes from the environment, checked: ``MemoryStore`` keywords.

    ``$MEMREFINE_MAX_FILE_BYTES`` (a whole number of bytes, at least 1; unset
    or empty: no cap) and ``$MEMREFINE_SYNCHRONOUS`` (``NORMAL`` or ``FULL``,
    any case). Anything else is a :class:`ConfigurationError` naming the
    variable and its value.
    """
    cap = os.environ.get("MEMREFINE_MAX_FILE_BYTES", "").strip()
    if cap and (not re.fullmatch(r"[0-9]+", cap) or int(cap) < 1):
        raise ConfigurationError(f"MEMREFINE_MAX_FILE_BYTES must be a whole number of bytes, at least 1 (or unset "
                                 f"for no cap), got {os.environ['MEMREFINE_MAX_FILE_BYTES']!r}; nothing was done")
    sync = os.environ.get("MEMREFINE_SYNCHRONOUS", "")
    if sync.strip().upper() not in ("", "NORMAL", "FULL"):
        raise ConfigurationError(f"MEMREFINE_SYNCHRONOUS must be NORMAL or FULL, got {sync!r}; nothing was done")
    return {"max_file_bytes": int(cap) if cap else None, "synchronous": sync.strip().upper() or "NORMAL"}


def open_store(db_path: Path | None, *, create: bool = False, read_only: bool = False):
    """Open the store for a command (must exist unless ``create``; ``read_only`` commands write nothing).

    ``$MEMREFINE_MAX_FILE_BYTES`` caps the database file for every command
    (``MemoryStore(max_file_bytes=...)``): a write that would pass it fails
    cleanly, with nothing written. ``$MEMREFINE_SYNCHRONOUS=FULL`` syncs every
    commit to the disk (full durability through power loss). Both are
    checked first (:func:`store_settings`).
    """
    from memrefine_edge.store import MemoryStore

    settings = store_settings()
    return MemoryStore(resolve_db(db_path), create=create, read_only=read_only, **settings)


def judge_choice(judge: str | None, judge_model: str | None) -> "tuple[JudgeKind | None, str | None]":
    """The judge kind and GGUF path that ``--judge`` and ``--judge-model`` stand for.

    ``--judge-model`` is a GGUF path; its words ``none``/``scorer``,
    ``fact`` and ``bundled``, kept for compatibility, are read here, at the
    edge (:func:`memrefine_edge.judging.parse_judge_model`), so the library
    gets a kind and a path apart. Two flags naming two judges are a usage error.
    """
    from memrefine_edge.judging import JudgeKind, parse_judge_model

    kind = JudgeKind(judge) if judge is not None else None
    if judge_model is None:
        return kind, None
    named, path = parse_judge_model(judge_model)
    if kind is not None and kind is not named:
        raise click.UsageError(f"--judge {kind} and --judge-model {judge_model} name two judges: --judge-model is "
                               "a GGUF file, for --judge gguf")
    return named, None if path is None else str(path)


def emit(data: Any, as_json: bool, human: str | None = None) -> None:
    """Print a command's result: JSON on stdout, or the human text."""
    if as_json:
        click.echo(json.dumps(data, ensure_ascii=False, indent=None, sort_keys=False))
    elif human is not None:
        click.echo(human)


def log(message: str) -> None:
    """A progress or log line: always stderr, so stdout stays parseable."""
    click.echo(message, err=True)


_OS_REFUSALS = {errno.ENOSPC, errno.EROFS, errno.EFBIG, errno.EIO, errno.EACCES, errno.EPERM, errno.EDQUOT}


class _Group(click.Group):
    """Turns library errors into one clean line and exit code 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except OptionConflictError as exc:  # options that do not go together: a usage error (exit 2)
            raise click.UsageError(str(exc), ctx) from None
        except MemRefineError as exc:
            click.echo(f"Error: {exc}", err=True)
            ctx.exit(1)
        except (OSError, sqlite3.Error) as exc:
            # The library types the refusals it can foresee; anything the operating system
            # or SQLite still says no with (a temp folder full during a dry run's copy, say)
            # is one line here, not a traceback.
            if isinstance(exc, OSError) and exc.errno not in _OS_REFUSALS:
                raise
            click.echo(f"Error: {exc}; the command stopped, and the store keeps its last committed state", err=True)
            ctx.exit(1)
        except KeyboardInterrupt:
            click.echo("Interrupted; committed work is kept (rerun the command to resume).", err=True)
            ctx.exit(130)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="memrefine-edge")
def cli() -> None:
    """memrefine: keep an agent's long-term memory store inside a storage budget, offline."""


def main(argv: list[str] | None = None, *, backends: "Backends | None" = None) -> None:
    """Console-script entry point; ``backends`` replaces the model factories (tests, embedding apps)."""
    cli.main(args=argv, prog_name="memrefine", obj=backends)


def current_backends() -> "Backends":
    """The :class:`~memrefine_edge.engine.Backends` the command line was started with (default: the real models).

    Given as ``main(backends=...)`` or ``CliRunner().invoke(cli, args, obj=backends)``.
    """
    ctx = click.get_current_context(silent=True)
    obj = ctx.find_root().obj if ctx is not None else None
    if obj is not None:
        return obj
    from memrefine_edge.engine import Backends  # lazy: --help loads no pipeline

    return Backends()
