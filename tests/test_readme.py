"""The README's Python example runs as written (docs that match the code)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


@pytest.mark.models
def test_the_python_api_example_runs_and_compresses(tmp_path, monkeypatch, capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    example = next(b for b in blocks if "MemoryStore(" in b and ".run(" in b)
    monkeypatch.chdir(tmp_path)  # the example writes memory.db in the working directory
    scope: dict = {}
    exec(compile(example, "README.md example", "exec"), scope)
    report = scope["report"]
    assert report.budget_met and report.actions.get("delete") == 1
    assert [e.id for e, _ in scope["hits"]][:1] in (["n1"], ["n2"])
    assert "'budget_met': True" in capsys.readouterr().out
