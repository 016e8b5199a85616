"""``memrefine changes``: what runs did to the ids you imported, as operations any memory store can apply.

Reads only, like ``export`` and ``log``: the store is opened read-only.
"""

from __future__ import annotations

from pathlib import Path

import click

from memrefine_edge.store import CHANGE_FORMATS

from ._app import cli, db_option, emit, json_option, log, open_store

__all__ = ["changes_cmd"]


@cli.command("changes")
@click.argument("run_ids", nargs=-1, metavar="[RUN_ID]...")
@click.option("--since", metavar="RUN_ID", default=None, help="This run and every run after it.")
@click.option("--format", "fmt", type=click.Choice(CHANGE_FORMATS), default="jsonl", show_default=True,
              help="The format of each operation's record (as `export --format` writes it).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, allow_dash=True, path_type=Path), default="-",
              show_default=True, help="Where to write the change set (written whole, or not at all).")
@db_option
@json_option
def changes_cmd(run_ids: tuple[str, ...], since: str | None, fmt: str, output: Path, db_path: Path | None,
                as_json: bool) -> None:
    """Print what runs did to the ids you imported: deletes and updates, in the order to apply them.

    Of RUN_IDs (consecutive runs), of --since RUN_ID and every later run, or
    by default of every run. Applied in order to the memories as imported, the
    operations leave what `memrefine export --format FORMAT` writes now. A
    merge is an update of its first source (the id `export` gives the merged
    entry) and a delete of the other; merges of merges resolve to the ids
    imported. Each operation names its run, step, action, source and reason,
    and the SHA-256 of the text its id had before the runs: an applier skips
    (and reports) every operation whose memory is missing or changed since,
    with the operations of the same group. Undone runs add no operations.
    Once purge-history has dropped a run's history, that run and the runs
    before it can no longer be described. The first line names the store.
    See docs/roundtrip.md and the scripts in examples/ (mem0, A-MEM).
    """
    from memrefine_edge.store import describe_changes

    to_stdout = str(output) == "-"
    if to_stdout and as_json:
        raise click.UsageError("--json needs --output FILE: stdout already carries the change set")
    with open_store(db_path, read_only=True) as store:
        changes = describe_changes(store, run_ids, since=since, format=fmt)
    changes.write(None if to_stdout else output)
    counts = changes.counts()
    runs = ", ".join(changes.runs) or "none"
    plural = {k: "" if n == 1 else "s" for k, n in counts.items()}
    summary = (f"{counts['update']} update{plural['update']} and {counts['delete']} delete{plural['delete']} "
               f"({fmt}) from runs {runs}"
               + "".join(f"; run {r} was undone: no operations" for r in changes.undone))
    if to_stdout:
        log(summary)
    else:
        data = {"output": str(output), "format": fmt, "store": changes.store, "runs": list(changes.runs),
                "undone": list(changes.undone), **counts}
        emit(data, as_json, f"wrote {summary} to {output}")
