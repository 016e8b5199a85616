"""``memrefine fleet compress|report``: many stores compressed on Ray (the ``fleet`` extra)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click

from ._app import cli, current_backends, emit, json_option, log, store_settings
from ._compress_cmds import pipeline_config, pipeline_options

__all__ = ["fleet"]


@cli.group()
def fleet() -> None:
    """Compress many stores at once on Ray, on this machine or a cluster (the `fleet` extra)."""


class _Progress:
    """Stores done / failed / skipped, bytes saved and the rate, on stderr.

    A tqdm bar on a terminal; elsewhere (a cron job's log, a pipe) one line
    every ``every_s`` seconds and one at the end, so a log file gets no bar.
    """

    def __init__(self, total: int | None, *, every_s: float = 10.0) -> None:
        self.counts = {"done": 0, "failed": 0, "skipped": 0, "interrupted": 0}
        self.saved, self.total, self.every_s = 0, total, every_s
        self.started = self.last = time.monotonic()
        self.bar = None
        if sys.stderr.isatty():
            try:
                from tqdm import tqdm
            except ImportError:
                pass
            else:
                self.bar = tqdm(total=total, unit="store", file=sys.stderr, mininterval=0.5, dynamic_ncols=True)

    def _postfix(self) -> str:
        c = self.counts
        stopped = f" interrupted {c['interrupted']}" if c["interrupted"] else ""
        return (f"done {c['done']} failed {c['failed']} skipped {c['skipped']}{stopped} | "
                f"saved {self.saved:,} B")

    def _line(self) -> None:
        n = sum(self.counts.values())
        of = f"/{self.total:,}" if self.total is not None else ""
        rate = n / max(time.monotonic() - self.started, 1e-9)
        log(f"fleet: {n:,}{of} stores | {self._postfix()} | {rate:.2f} stores/s")

    def add(self, row: Any) -> None:
        self.counts[row.outcome.value] += 1
        self.saved += row.saved_bytes
        if self.bar is not None:
            self.bar.set_postfix_str(self._postfix(), refresh=False)
            self.bar.update(1)
        elif time.monotonic() - self.last >= self.every_s:
            self.last = time.monotonic()
            self._line()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        else:
            self._line()


def _default_results() -> Path:
    return Path(f"fleet-results-{time.strftime('%Y%m%d-%H%M%S')}.jsonl")


@fleet.command("compress")
@click.argument("stores", nargs=-1, type=click.Path(path_type=Path))
@click.option("--glob", "pattern", default=None, metavar="PATTERN",
              help="Store files matching PATTERN (quote it; ** crosses folders), read as they are found.")
@click.option("--manifest", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="A file naming one store a line: a path, or JSON {\"path\": ..., \"budget\": \"50%\"}; "
                   "relative paths are read from its folder. Read a line at a time.")
@click.option("--budget", default=None, metavar="SPEC",
              help="A ratio (0.5, 50%) or a size (80KB) for every store, as `memrefine budget set` reads it; it "
                   "becomes each store's standing budget [default: each store's standing budget].")
@click.option("--metric", type=click.Choice(["json", "disk"]), default=None,
              help="Size metric of the budget [default: the standing budget's, else json].")
@click.option("--mode", type=click.Choice(["live", "paper", "strict"]), default="live", show_default=True,
              help="paper: stop when no candidate is left; strict: evict until the budget holds.")
@pipeline_options
@click.option("--address", default=None, metavar="ADDRESS",
              help="A running Ray cluster (auto, ray://HOST:10001) [default: Ray on this machine, for this job].")
@click.option("--num-cpus", type=click.IntRange(1), default=None,
              help="Local Ray: stores compressed at once [default: every core].")
@click.option("--window", type=click.IntRange(1), default=None,
              help="Tasks in flight at most [default: twice the cluster's CPUs].")
@click.option("--max-retries", type=click.IntRange(0), default=3, show_default=True,
              help="Tries again a store whose worker died; its run continues from its last commit.")
@click.option("--results", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The JSON-lines result file to write, one row per store; never overwritten "
                   "[default: fleet-results-DATE-TIME.jsonl here].")
@json_option
def compress_cmd(stores, pattern, manifest, budget, metric, mode, address, num_cpus, window, max_retries, results,
                 as_json, **pipeline) -> None:
    """Compress every store named by STORES, --glob and --manifest, each as `memrefine compress` does.

    One Ray task with one CPU per store, with the store's own run lock and
    run journal. Running the same job again changes nothing (each store
    keeps its standing budget); a store whose worker died is tried again
    and its run continues; a store another process is compressing is
    skipped; a store that fails says why in its row and the others go on.
    Ctrl-C stops submitting and waits for the running stores (Ctrl-C again
    stops them at their next commit). Exit 1 when a store failed. The
    pipeline options are `compress`'s; each task's models get one thread
    unless --threads says otherwise.
    """
    import itertools

    from memrefine_edge.fleet import (
        ResultWriter,
        as_jobs,
        compress_many,
        count_manifest,
        glob_stores,
        read_manifest,
        require_ray,
        summarize,
    )
    from memrefine_edge.store import parse_budget

    if not stores and pattern is None and manifest is None:
        raise click.UsageError("name the stores: paths, --glob PATTERN or --manifest FILE")
    if budget is not None:
        parse_budget(budget)
    require_ray()  # before anything is written
    sources = [as_jobs(stores)]
    if pattern is not None:
        sources.append(glob_stores(pattern))
    if manifest is not None:
        sources.append(read_manifest(manifest))
    total = None if pattern is not None else len(stores) + (count_manifest(manifest) if manifest else 0)
    path = results or _default_results()
    config = pipeline_config(**pipeline)
    finished = 0
    interrupted = False
    with ResultWriter(path) as writer:
        try:  # starts or joins Ray: a cluster that cannot be joined leaves no result file
            rows = compress_many(itertools.chain.from_iterable(sources), budget=budget, metric=metric, mode=mode,
                                 config=config, backends=current_backends(), address=address, num_cpus=num_cpus,
                                 window=window, max_retries=max_retries, store_options=store_settings())
        except BaseException:
            writer.close()
            path.unlink()
            raise
        log(f"fleet: writing one row per store to {path}")
        progress = _Progress(total)
        try:
            for row in rows:
                writer.write(row)
                progress.add(row)
                finished += 1
        except KeyboardInterrupt:
            interrupted = True
        finally:
            progress.close()
    from memrefine_edge.fleet import read_results

    summary = summarize(read_results(path))
    emit({"results": str(path), "interrupted": interrupted, **summary.as_dict()}, as_json,
         f"results     {path}\n{summary.text()}")
    if interrupted:
        log(f"Interrupted after {finished:,} stores; their rows are in {path}. Stores stopped part-way keep "
            "their committed work: run the same job again to finish (finished stores change nothing).")
        raise SystemExit(130)
    failed = summary.outcomes.get("failed", 0)
    if failed:
        log(f"Error: {failed:,} of {summary.stores:,} stores failed; their rows in {path} say why")
        raise SystemExit(1)


@fleet.command("report")
@click.argument("results", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@json_option
def report_cmd(results, as_json) -> None:
    """Print the summary of a fleet job's RESULTS file again (totals, percentiles of ratio and time)."""
    from memrefine_edge.fleet import read_results, summarize

    summary = summarize(read_results(results))
    emit({"results": str(results), **summary.as_dict()}, as_json, f"results     {results}\n{summary.text()}")
