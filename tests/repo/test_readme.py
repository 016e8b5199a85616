"""The README and the documentation pages match the code: their examples run, the commands, options and
files they name exist, every page is in the site, and the README stays a short start."""

from __future__ import annotations

import glob
import importlib
import re
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
TEXTS = [README, *PAGES]
TWO_COMMANDS = ("bash scripts/bootstrap.sh && .venv/bin/memrefine demo\n"
                "bash scripts/bootstrap.sh && .venv/bin/python -m pytest\n")


def _blocks(path: Path, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S)


def _code(path: Path) -> list[str]:
    """Every line of a fenced block and every inline code span of a page."""
    text = path.read_text(encoding="utf-8")
    fenced = re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S)
    rest = re.sub(r"```[a-z]*\n.*?```", "", text, flags=re.S)
    spans = re.findall(r"`([^`\n]+)`", rest.replace("\n  ", " "))
    return [line for block in fenced for line in block.splitlines()] + spans


@pytest.mark.models
@pytest.mark.parametrize("page", [README, DOCS / "python.md"], ids=lambda p: p.name)
def test_the_python_api_example_runs_and_compresses(page, tmp_path, monkeypatch, capsys):
    example = next(b for b in _blocks(page, "python") if "MemoryStore(" in b and ".run(" in b)
    monkeypatch.chdir(tmp_path)  # the example writes memory.db in the working directory
    scope: dict = {}
    exec(compile(example, f"{page.name} example", "exec"), scope)
    report = scope["report"]
    assert report.budget_met and report.actions.get("delete") == 1
    assert [e.id for e, _ in scope["hits"]][:1] in (["n1"], ["n2"])
    assert "'budget_met': True" in capsys.readouterr().out


@pytest.mark.models
def test_the_upkeep_example_installs_a_hook_that_compresses_as_entries_come(tmp_path, monkeypatch):
    from memrefine_edge.core import Entry

    example = next(b for b in _blocks(DOCS / "upkeep.md", "python") if "Upkeep(" in b)
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(compile(example, "upkeep.md example", "exec"), scope)
    store, upkeep = scope["store"], scope["upkeep"]
    try:
        assert upkeep in store.after_add and "n4" in store and upkeep.reports == []  # under 2 MB: no pass
        for i in range(8):
            store.add(Entry(id=f"d{i}", content=f"Ana started pottery classes on Tuesdays{'!' * (i % 2)}"))
        size = store.running_size("json")
        upkeep.high_bytes, upkeep.low_bytes = size - 1, size // 2
        store.add(Entry(id="x", content="Ben adopted a grey cat named Pixel."))  # above the watermark: a pass
        assert upkeep.wait_idle() and len(upkeep.reports) == 1 and store.running_size("json") <= size // 2
    finally:
        store.close()


def test_the_readme_starts_with_the_two_commands_ci_runs():
    assert README.read_text(encoding="utf-8").startswith("# memrefine_edge\n\n```bash\n" + TWO_COMMANDS + "```\n")
    assert TWO_COMMANDS.splitlines()[1] in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_the_readme_is_a_short_start_that_links_every_page():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    for heading in ("## What it does", "## Install", "## Command line quick start", "## Python quick start"):
        assert heading in text
    linked = {m for m in re.findall(r"\]\((docs/[\w/.-]+\.md)\)", text)}
    pages = {str(p.relative_to(ROOT)) for p in PAGES if p.name not in ("index.md", "changelog.md")}
    assert pages <= linked, f"pages the README does not link: {sorted(pages - linked)}"
    for link in re.findall(r"\]\(([\w/.-]+\.md)(?:#[\w-]+)?\)", text):
        assert (ROOT / link).is_file(), link


def test_every_page_is_in_the_site_and_every_relative_link_resolves():
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = set(re.findall(r"^\s*- [^:\n]+: ([\w/.-]+\.md)\s*$", config, flags=re.M))
    assert nav == {str(p.relative_to(DOCS)) for p in PAGES}
    for page in PAGES:
        for link in re.findall(r"\]\(([\w/.-]+\.md)(?:#[\w-]+)?\)", page.read_text(encoding="utf-8")):
            assert (page.parent / link).is_file(), f"{page.name}: {link}"
    assert "--8<-- \"CHANGELOG.md\"" in (DOCS / "changelog.md").read_text(encoding="utf-8")


def test_the_references_are_generated_not_copied():
    cli_page = (DOCS / "reference" / "cli.md").read_text(encoding="utf-8")
    assert "::: mkdocs-click" in cli_page and ":module: memrefine_edge.cli" in cli_page
    assert "Usage:" not in cli_page  # the help text comes from the commands at build time
    api_page = (DOCS / "reference" / "api.md").read_text(encoding="utf-8")
    assert "<!-- api:names memrefine_edge\n" in api_page and ":::" not in api_page


def _command(words: list[str]) -> tuple[click.Command, list[str]] | None:
    """The click command a `memrefine ...` line names, and the words after it (None: not a command)."""
    from memrefine_edge.cli import cli

    cmd: click.Command = cli
    rest = list(words)
    while isinstance(cmd, click.Group) and rest and rest[0] in cmd.commands:
        cmd = cmd.commands[rest.pop(0)]
    return (cmd, rest) if cmd is not cli else None


def test_every_command_and_option_the_docs_name_exists():
    checked = 0
    for path in [*TEXTS, ROOT / "memrefine_edge" / "backends" / "_llama.py"]:
        lines = _code(path) if path.suffix == ".md" else re.findall(r"`([^`\n]+)`", path.read_text())
        for line in lines:
            for m in re.finditer(r"(?:^|[\s(./])memrefine ((?:[a-z][\w-]*)(?: [^#`]*)?)", line):
                words = m.group(1).split()
                found = _command(words)
                if found is None:
                    continue
                cmd, rest = found
                names = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)} | {"--help", "-h"}
                for option in re.findall(r"(?<![\w-])(--[a-z][\w-]*)", " ".join(rest)):
                    assert option in names, f"{path.name}: `memrefine {' '.join(words)}`: no option {option}"
                checked += 1
    assert checked > 50  # the check reads the examples, not nothing


def test_the_files_the_docs_cite_exist():
    missing = []
    for path in TEXTS:
        for line in _code(path):
            for ref in re.findall(r"(?<![\w./-])((?:bench|scripts|tests|memrefine_edge|\.ci)/[\w./*-]*[\w*/])", line):
                if not glob.glob(str(ROOT / ref)):
                    missing.append(f"{path.name}: {ref}")
    assert not missing, missing


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for name in parts[i:]:
                obj = getattr(obj, name)
        except AttributeError:
            return False
        return True
    return False


def test_the_python_names_the_docs_cite_exist():
    names = {n for path in TEXTS for line in _code(path) for n in re.findall(r"\bmemrefine_edge(?:\.\w+)+", line)}
    assert "memrefine_edge.engine._pipeline.build" in names  # the check reads the pages, not nothing
    assert not [n for n in sorted(names) if not _resolves(n)]
