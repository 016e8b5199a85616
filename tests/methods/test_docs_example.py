"""The method of docs/methods.md is written as the page says, and compresses a store like any built-in."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

from memrefine_edge.cli import cli
from memrefine_edge.engine import Backends
from memrefine_edge.store import MemoryStore
from memrefine_edge.testing import FakeBackends, HashEncoder
from tests.support.stores import make_store

PAGE = Path(__file__).resolve().parents[2] / "docs" / "methods.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.S)


def test_the_page_s_method_registers_builds_and_compresses_through_the_command_line(tmp_path, monkeypatch):
    scope: dict = {}
    exec(compile(_python_blocks()[0], "methods.md example", "exec"), scope)
    method = scope["method"]
    assert method.name == "keep-longer" and method.describe() == {"cut": 0.8}

    monkeypatch.setattr(Backends, "encoder", lambda self, config: HashEncoder())  # no model file needed
    exec(compile(_python_blocks()[1], "methods.md pipeline", "exec"), scope)
    assert scope["parts"].method.cut == 0.85

    monkeypatch.chdir(tmp_path)  # the page's test writes memory.db in the working directory
    make_store(tmp_path / "memory.db").close()
    exec(compile(_python_blocks()[2], "methods.md test", "exec"), scope)
    assert scope["result"].exit_code == 0, scope["result"].output
    refused = CliRunner().invoke(cli, ["compress", "--db", "memory.db", "--budget", "0.4", "--method", "keep-longer",
                                       "--method-option", "cut=2"], obj=FakeBackends())
    assert refused.exit_code == 1 and "Error: cut must be in [-1.0, 1.0], got 2.0" in refused.stderr
    with MemoryStore(tmp_path / "memory.db", create=False) as store:
        [run] = store.journal.runs()
        assert run.method == "keep-longer" and run.params["options"] == {"cut": 0.9}
        # the method deletes or preserves; what the judged pairs leave above the budget is evicted (live mode)
        assert {d.action for d in store.journal.decisions(run.run_id)} <= {"delete", "preserve", "evict"}
