"""memrefine store commands: ``import``, ``export``, ``stats``, ``search``.

Only ``import`` may create a store file; the others refuse a missing one, so
a typo in ``--db`` is an error rather than a new empty store. ``stats`` and
``export`` open the store read-only and never write to it; a file this module
did not create (another application's database, an empty file) is refused
untouched by every command.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from memrefine_edge.store import EXPORT_FORMATS

from ._app import cli, current_backends, db_option, emit, json_option, log, open_store, resolve_db, store_settings

__all__ = ["import_cmd", "export_cmd", "stats_cmd", "search_cmd", "upgrade_cmd"]

_FORMATS = ("locomo-turns", "locomo-observations", "text", "mem0", "amem", "jsonl")
_threads_option = click.option(
    "--threads", type=click.IntRange(min=1), default=None, help="Encoder threads [default: min(2, CPUs)]."
)


def _encoder(threads: int | None):
    # Lazy: onnxruntime and the tokenizer load only for commands that embed.
    from memrefine_edge.engine import PipelineConfig

    return current_backends().encoder(PipelineConfig(threads=threads))


def _import_into(db: Path, fill):
    """Run ``fill(store)`` (one import transaction) on the store at ``db``; returns what it returns.

    A store that does not exist yet is filled under a private name beside
    ``db`` and linked into place only once the import succeeded (the store's
    own atomic creation): a failed import leaves no file behind, and never
    deletes or touches a store at ``db`` -- not even one another process
    created while this import ran (the import then goes into that store, in
    its own transaction).
    """
    from memrefine_edge.store import create_store_file

    store_settings()  # a malformed setting is refused before a folder or file is made for the new store
    if not db.exists():
        results = []

        def fill_new(tmp: Path) -> None:
            with open_store(tmp, create=True) as store:
                results.append(fill(store))

        if create_store_file(db, fill_new):
            return results[0]
        log(f"{db} was created by another process during the import; importing into it")
    with open_store(db) as store:
        return fill(store)


def _progress(done: int, total: int) -> None:
    log(f"embedded {done}/{total}")


@cli.command("import")
@click.option("--format", "fmt", type=click.Choice(_FORMATS), required=True, help="Input format.")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--sample", "sample_id", default=None, help="LoCoMo sample id (e.g. conv-26); default all samples.")
@click.option("--drop-unknown-links", is_flag=True, help="Drop links to ids in neither file nor store (jsonl).")
@click.option("--embed", is_flag=True, help="Embed the entries now (default: lazily, when compressing/searching).")
@_threads_option
@db_option
@json_option
def import_cmd(
    fmt: str,
    file: Path,
    sample_id: str | None,
    drop_unknown_links: bool,
    embed: bool,
    threads: int | None,
    db_path: Path | None,
    as_json: bool,
) -> None:
    """Import FILE into the store in one transaction (a failed import writes nothing)."""
    from memrefine_edge.store import import_file

    encoder = _encoder(threads) if embed else None
    db = resolve_db(db_path)

    def fill(store):
        report = import_file(
            store, file, format=fmt, sample_id=sample_id, drop_unknown_links=drop_unknown_links, encoder=encoder
        )
        return report, len(store)

    report, total = _import_into(db, fill)
    data = {**report.as_dict(), "db": str(resolve_db(db_path)), "entries": total}
    human = f"imported {report.imported} entries from {file} ({fmt}) into {data['db']} ({total} entries in all)"
    if report.skipped or report.dropped_links:
        human += f"; skipped {report.skipped} records, dropped {report.dropped_links} links"
        human += "".join(f"\n  {count:6} {reason}" for reason, count in report.reasons)
    if embed:
        human += f"; embedded {report.embedded}"
    emit(data, as_json, human)


@cli.command("export")
@click.option("--format", "fmt", type=click.Choice(EXPORT_FORMATS), default="jsonl", show_default=True,
              help="Output format: the format `import` reads back.")
@click.argument("output", type=click.Path(dir_okay=False, allow_dash=True, path_type=Path), default="-")
@db_option
@json_option
def export_cmd(fmt: str, output: Path, db_path: Path | None, as_json: bool) -> None:
    """Write every entry to OUTPUT (default stdout) in FORMAT, under the ids you imported.

    Each format is the one `memrefine import --format FORMAT` reads: `mem0` a
    get_all() result, `amem` A-MEM notes ({id: note}), `text` one paragraph per
    entry. Ids, metadata, hashes and timestamps stay as imported where the
    format has a place for them. A merged entry is written under the id of its
    first source (the earlier entry of the pair; for a merge of merges, the id
    imported), whose metadata and first timestamp it keeps: the store it goes
    back to updates that memory and deletes the other (see `memrefine changes`).
    What each format cannot hold is dropped:

    \b
    jsonl  nothing
    mem0   links, provenance, timestamps between the first and the last
           (a merged memory's hash is recomputed from its text, as mem0 does)
    amem   provenance, timestamps after the first, metadata other than
           A-MEM's fields, empty values
    text   ids (re-import numbers the paragraphs), keywords, links,
           timestamps, metadata, provenance (blank lines inside an entry
           become line breaks)
    """
    from memrefine_edge.store import export_file

    to_stdout = str(output) == "-"
    if to_stdout and as_json:
        raise click.UsageError("--json needs an OUTPUT file: stdout already carries the export")
    with open_store(db_path, read_only=True) as store:
        count = export_file(store, sys.stdout if to_stdout else output, format=fmt)
    if to_stdout:
        log(f"exported {count} entries ({fmt})")
    else:
        data = {"exported": count, "output": str(output), "format": fmt}
        emit(data, as_json, f"exported {count} entries to {output} ({fmt})")


@cli.command("stats")
@click.option("--recount", is_flag=True, help="Recount every entry and check the running size totals against it.")
@db_option
@json_option
def stats_cmd(recount: bool, db_path: Path | None, as_json: bool) -> None:
    """Entries, both size metrics, embedding bytes, links and bookkeeping overhead (writes nothing)."""
    from memrefine_edge.core import StoreError

    with open_store(db_path, read_only=True) as store:
        stats = store.stats().as_dict()
        checked = store.recount() if recount else None
    data = {"db": str(resolve_db(db_path)), **stats}
    if checked is not None:
        wrong = {k: v for k, v in checked.items() if v["total"] != v["recount"]}
        if wrong:
            raise StoreError(f"the running totals disagree with a recount: {wrong}; run `memrefine upgrade` after "
                             "a backup, or report it")
        data["recount"] = "totals equal a full recount"
    width = max(map(len, data))
    human = "\n".join(
        f"{k:{width}}  {v:,}" if isinstance(v, int) else f"{k:{width}}  {v}" for k, v in data.items()
    )
    emit(data, as_json, human)


@cli.command("upgrade")
@db_option
@json_option
def upgrade_cmd(db_path: Path | None, as_json: bool) -> None:
    """Apply pending schema migrations (any writing command does this too)."""
    with open_store(db_path) as store:
        applied = store.applied_migrations
    emit({"db": str(resolve_db(db_path)), "migrations": applied}, as_json,
         f"{resolve_db(db_path)}: schema up to date ({applied[-1]})")


@cli.command("search")
@click.argument("query")
@click.option("-k", "k", type=click.IntRange(min=1), default=10, show_default=True, help="Results to return.")
@_threads_option
@db_option
@json_option
def search_cmd(query: str, k: int, threads: int | None, db_path: Path | None, as_json: bool) -> None:
    """Top-K entries for QUERY by cosine similarity (embeds missing entries first).

    On a store that cannot be written (a read-only file or file system) the
    missing embeddings are computed in memory and nothing is written.
    """
    import os

    encoder = _encoder(threads)
    db = resolve_db(db_path)
    writable = os.access(db, os.W_OK) and os.access(db.absolute().parent, os.W_OK)
    with open_store(db_path, read_only=not writable) as store:
        missing = len(store) - store.stats().embedded
        if missing > 0 and writable:
            log(f"embedding up to {missing} entries first ...")
            store.ensure_embeddings(encoder, progress=_progress)
        hits = store.search(query, k, encoder=encoder)
    results = [
        {
            "rank": rank,
            "score": round(score, 6),
            "id": e.id,
            "content": e.content,
            "timestamps": list(e.timestamps),
            "provenance": list(e.provenance),
        }
        for rank, (e, score) in enumerate(hits, 1)
    ]
    human = "\n".join(
        f"{r['rank']:3}. {r['score']:.3f}  {r['id']}  {_clip(r['content'])}" for r in results
    ) or "no entries"
    emit({"query": query, "k": k, "model": encoder.model_id, "results": results}, as_json, human)


def _clip(text: str, width: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
