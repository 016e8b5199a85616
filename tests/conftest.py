"""Shared, generic fixtures. Module-specific helpers live in their test files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memrefine_edge.core import MemRefineError
from memrefine_edge.store import MemoryStore
from memrefine_edge.testing import HashEncoder

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parents[1]

# Workers and fake command lines run as subprocesses (tests/support/*.py) import the ``tests``
# package: the checkout's root goes on their module path through the environment they inherit.
os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])


@pytest.fixture
def tmp_store(tmp_path):
    """A fresh, empty store in ``tmp_path``; closed after the test."""
    store = MemoryStore(tmp_path / "memory.db")
    yield store
    store.close()


@pytest.fixture
def hash_encoder():
    """The deterministic fake encoder (no model files needed)."""
    return HashEncoder()


@pytest.fixture(scope="session")
def locomo_dir() -> Path:
    """The shared LoCoMo folder (``$MEMREFINE_LOCOMO`` or ``../shared/data/locomo``); skips if absent."""
    env = os.environ.get("MEMREFINE_LOCOMO")
    path = Path(env) if env else Path(__file__).parents[1].parent / "shared/data/locomo"
    if not (path / "locomo-dev.json").is_file():
        pytest.skip(f"LoCoMo data not found at {path} (set MEMREFINE_LOCOMO to its folder)")
    return path


#: Stores the totals check opened and compared, over the session (the summary prints it).
_TOTALS_CHECKED = [0]


def check_totals_under(root: Path) -> int:
    """Assert that every store under ``root`` keeps running size totals equal to a full recount;
    returns how many stores were checked. Files that are not stores, or that a test left unreadable
    on purpose, are skipped: opening them fails with the product's own error."""
    checked = 0
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.name.endswith(("-wal", "-shm", "-journal")):
            continue
        try:  # the store's own recognition (check_store_file) refuses any other file, untouched
            store = MemoryStore(path, create=False, busy_timeout_ms=2_000)
        except MemRefineError:
            continue
        try:
            counts = store.recount()
        finally:
            store.close()
        wrong = {k: v for k, v in counts.items() if v["total"] != v["recount"]}
        assert not wrong, f"{path.name}: running totals differ from a recount: {wrong}"
        checked += 1
    return checked


@pytest.fixture(autouse=True)
def _running_totals_equal_a_recount(request):
    """After every test, each store left in its ``tmp_path`` keeps running size totals equal to a
    full recount, whatever the test did to it (changes, undo, purge, a killed process)."""
    yield
    root = request.node.funcargs.get("tmp_path")
    if root is not None:
        _TOTALS_CHECKED[0] += check_totals_under(Path(root))


_MEASURED: list[tuple[str, object]] = []


def pytest_runtest_logreport(report):
    """Collect measured numbers that tests record (e.g. encoder fidelity)."""
    if report.when == "call":
        _MEASURED.extend((k, v) for k, v in report.user_properties if k.startswith(("fidelity_", "soak_")))


def pytest_terminal_summary(terminalreporter):
    """Print the measured numbers at the end of every run, so CI logs carry them."""
    if _TOTALS_CHECKED[0]:
        _MEASURED.append(("totals_checked_stores", _TOTALS_CHECKED[0]))
    if _MEASURED:
        terminalreporter.section("measured")
        for key, value in _MEASURED:
            terminalreporter.write_line(f"{key}: {value}")
