"""``memrefine budget set|show|clear``: the store's standing budget."""

from __future__ import annotations

from pathlib import Path

import click

from .app import cli, db_option, emit, json_option, open_store, resolve_db

__all__ = ["budget"]


@cli.group()
def budget() -> None:
    """The size the store is kept at by `memrefine compress` and upkeep."""


@budget.command("set")
@click.argument("spec")
@click.option("--metric", type=click.Choice(["json", "disk"]), default="json", show_default=True,
              help="Size metric the budget is measured in.")
@db_option
@json_option
def set_cmd(spec: str, metric: str, db_path: Path | None, as_json: bool) -> None:
    """Set the budget to SPEC: a size (80KB, 1.5MiB, 80000) or a ratio of the size now (0.5 or 50%)."""
    from ..budget import parse_budget, set_budget
    from ..compressor import resolve_target
    from ..errors import BudgetError

    ratio, size = parse_budget(spec)
    with open_store(db_path) as store:
        if metric == "disk" and len(store) > store.stats().embedded:
            raise BudgetError("a disk budget counts embeddings: embed the store first (`memrefine compress` or "
                              "`memrefine search` does), or use the json metric")
        target = resolve_target(store, metric=metric, budget=ratio, budget_bytes=size)
        current = store.size(metric)
        standing = set_budget(store, target_bytes=target, metric=metric, spec=spec)
    data = {"db": str(resolve_db(db_path)), **standing.__dict__, "current_bytes": current}
    emit(data, as_json, f"budget of {resolve_db(db_path)}: {target:,} B ({metric}); the store holds {current:,} B"
         + (" -- run `memrefine compress` to reach it" if current > target else ""))


@budget.command("show")
@db_option
@json_option
def show_cmd(db_path: Path | None, as_json: bool) -> None:
    """Show the budget and the store's size in its metric."""
    from ..budget import get_budget

    with open_store(db_path, read_only=True) as store:
        standing = get_budget(store)
        current = store.size(standing.metric) if standing else store.size("json")
    if standing is None:
        emit({"db": str(resolve_db(db_path)), "budget": None, "current_bytes": current}, as_json,
             f"{resolve_db(db_path)} has no budget ({current:,} B json); set one with `memrefine budget set`")
        return
    emit({"db": str(resolve_db(db_path)), **standing.__dict__, "current_bytes": current}, as_json,
         f"budget {standing.bytes:,} B ({standing.metric}, from {standing.spec!r} at {standing.set_at}); "
         f"the store holds {current:,} B")


@budget.command("clear")
@db_option
@json_option
def clear_cmd(db_path: Path | None, as_json: bool) -> None:
    """Forget the budget (compress then needs --budget; upkeep without watermarks stops)."""
    from ..budget import clear_budget

    with open_store(db_path) as store:
        had = clear_budget(store)
    emit({"db": str(resolve_db(db_path)), "cleared": had}, as_json, "budget cleared" if had else "there was no budget")
