"""``memrefine budget set|show|clear``: the store's standing budget."""

from __future__ import annotations

from pathlib import Path

import click

from ._app import cli, db_option, emit, json_option, open_store, resolve_db

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
    """Set the budget to SPEC: a size (80KB, 1.5MiB, 80000) or a ratio of the size now (0.5 or 50%).

    A compression run that has not finished (running now, or interrupted)
    keeps the target it started with; the budget applies from the next run.
    A ratio given then is of the store's size at that moment, part way
    through the run: the output says so, with both sizes.
    """
    from memrefine_edge.core import BudgetError
    from memrefine_edge.store import parse_budget, resolve_target, set_budget

    ratio, size = parse_budget(spec)
    with open_store(db_path) as store:
        if metric == "disk" and len(store) > store.stats().embedded:
            raise BudgetError("a disk budget counts embeddings: embed the store first (`memrefine compress` or "
                              "`memrefine search` does), or use the json metric")
        target = resolve_target(store, metric=metric, budget=ratio, budget_bytes=size)
        current = store.size(metric)
        standing = set_budget(store, target_bytes=target, metric=metric, spec=spec)
        unfinished = store.journal.unfinished_run()
    db = resolve_db(db_path)
    data = {"db": str(db), **standing.__dict__, "current_bytes": current}
    human = (f"budget of {db}: {target:,} B ({metric}); the store holds {current:,} B"
             + (" -- run `memrefine compress` to reach it" if current > target and unfinished is None else ""))
    if unfinished is not None:
        data["unfinished_run"] = _run_note(unfinished.run_id, unfinished.params, metric)
        human += "\n" + _run_sentence(data["unfinished_run"], ratio=spec if ratio is not None else None,
                                       current=current, metric=metric)
    emit(data, as_json, human)


def _run_note(run_id: str, params: dict, metric: str) -> dict:
    """What ``budget set`` reports of the run that has not finished: its own target and its size at its start."""
    before = params.get("before") or {}
    return {"run_id": run_id, "target_bytes": params.get("target_bytes"), "metric": params.get("metric"),
            "size_at_start": before.get(f"{metric}_bytes")}


def _run_sentence(run: dict, *, ratio: str | None, current: int, metric: str) -> str:
    text = (f"note: run {run['run_id']} has not finished (it is running, or was interrupted): it keeps its own "
            f"target of {run['target_bytes']:,} B ({run['metric']}); this budget applies from the next run")
    if ratio is not None:
        start = run["size_at_start"]
        text += (f". The ratio {ratio} is of the store's size now, part way through that run ({current:,} B "
                 f"{metric})" + (f", not of its size when the run started ({start:,} B)" if start else ""))
    return text + "."


@budget.command("show")
@db_option
@json_option
def show_cmd(db_path: Path | None, as_json: bool) -> None:
    """Show the budget and the store's size in its metric."""
    from memrefine_edge.store import get_budget

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
    from memrefine_edge.store import clear_budget

    with open_store(db_path) as store:
        had = clear_budget(store)
    emit({"db": str(resolve_db(db_path)), "cleared": had}, as_json, "budget cleared" if had else "there was no budget")
