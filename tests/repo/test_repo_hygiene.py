"""No tracked file names a path on the machine that wrote it.

Results, scripts and docs must name inputs relative to the repository (the
shared data folder is ``../shared`` beside the clone) or by file name, never
by a full path into a temporary, home or work folder of one machine: such a
path is wrong on every other machine and leaks where a run happened.

Offline and fast: lists the tracked files with ``git ls-files`` and reads the
text ones from the working tree.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

#: Tracked files allowed to contain such paths, each with the reason. Keep it
#: small: only fixtures that test how paths are handled belong here.
ALLOWED: tuple[tuple[str, str], ...] = ()

REPO = Path(__file__).resolve().parents[2]

#: Files never read (binary formats); any other file holding a NUL byte is skipped too.
BINARY_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".npz", ".npy", ".onnx", ".gguf", ".db", ".sqlite")

# The folders, built from parts so that this file's own source does not match.
_SEP = "/"
_FOLDERS = ("tmp", "work", "root", "home", "var" + _SEP + "folders")
#: A machine path: one of the folders right after the start of a line, whitespace,
#: a quote, a backtick, ``=``, ``(``, ``[``, ``,`` or ``:``, followed by ``/``
#: (or ending there: a closing quote, backtick, bracket, whitespace or the line end).
MACHINE_PATH = re.compile(
    r"(?:^|(?<=[\s\"'`=(\[,:]))"
    + re.escape(_SEP)
    + "(?:" + "|".join(re.escape(f) for f in _FOLDERS) + ")"
    + r"(?:" + re.escape(_SEP) + r"|(?=[\s\"'`)\],;]|$))"
)


def _tracked_files() -> list[str]:
    if shutil.which("git") is None:
        pytest.skip("git is not installed: cannot list the tracked files")
    if not (REPO / ".git").exists():
        pytest.skip(f"no .git folder in {REPO.name}: not a git checkout, cannot list the tracked files")
    proc = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, timeout=60)
    if proc.returncode != 0:
        pytest.skip(f"git ls-files failed: {proc.stderr.decode(errors='replace').strip()}")
    return [p for p in proc.stdout.decode("utf-8", errors="surrogateescape").split("\0") if p]


def _text_lines(rel: str) -> list[str] | None:
    """The file's lines, or None for binary or missing files."""
    path = REPO / rel
    if rel.lower().endswith(BINARY_SUFFIXES) or not path.is_file():
        return None
    data = path.read_bytes()
    if b"\0" in data:
        return None
    return data.decode("utf-8", errors="replace").splitlines()


def find_machine_paths(rel: str) -> list[str]:
    """``file:line: text`` for every line of ``rel`` that names a machine path."""
    lines = _text_lines(rel)
    if lines is None:
        return []
    return [f"{rel}:{n}: {line.strip()[:200]}" for n, line in enumerate(lines, 1) if MACHINE_PATH.search(line)]


@pytest.mark.parametrize(
    "text, hit",
    [
        ("data: " + _SEP + "tmp" + _SEP + "x.npy", True),
        ('"ref": "' + _SEP + "tmp" + _SEP + 'memrefine-bench-ref-1.npy"', True),
        ("--data " + _SEP + "work" + _SEP + "shared/data/locomo/locomo-dev.json", True),
        ("MEMREFINE_LOCOMO=" + _SEP + "work" + _SEP + "shared", True),
        ('Path("' + _SEP + "root" + _SEP + '.cache")', True),
        ("`" + _SEP + "home" + _SEP + "me/x`", True),
        (_SEP + "var" + _SEP + "folders" + _SEP + "ab/T/x", True),
        ("[ -d " + _SEP + "work ]", True),
        ("--data ../shared/data/locomo/locomo-dev.json", False),
        ("Keep the compressed store copies in OUT" + _SEP + "work.", False),
        ("bench/results" + _SEP + "tmp" + _SEP, False),
        ("<tmp>" + _SEP + "memrefine-bench-ref.npy", False),
        ("reads " + _SEP + "proc" + _SEP + "self/status", False),
        ("a " + _SEP + "workspace" + _SEP + " b", False),
    ],
)
def test_machine_path_pattern(text, hit):
    assert bool(MACHINE_PATH.search(text)) is hit


def test_no_machine_paths_in_tracked_files():
    files = _tracked_files()
    allowed = dict(ALLOWED)
    stale = [p for p in allowed if p not in files or not find_machine_paths(p)]
    assert not stale, f"allow-list entries that are not tracked or no longer need it (remove them): {stale}"
    hits = [h for rel in files if rel not in allowed for h in find_machine_paths(rel)]
    assert not hits, (
        f"{len(hits)} line(s) name a path on one machine (temp, home or work folder); name inputs relative "
        "to the repository (../shared/... for the shared data) or by file name instead:\n" + "\n".join(hits)
    )
