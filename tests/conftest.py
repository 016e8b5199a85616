"""Shared, generic fixtures. Module-specific helpers live in their test files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memrefine_edge.store import MemoryStore
from memrefine_edge.testing import HashEncoder

FIXTURES = Path(__file__).parent / "fixtures"


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


_MEASURED: list[tuple[str, object]] = []


def pytest_runtest_logreport(report):
    """Collect measured numbers that tests record (e.g. encoder fidelity)."""
    if report.when == "call":
        _MEASURED.extend((k, v) for k, v in report.user_properties if k.startswith(("fidelity_", "soak_")))


def pytest_terminal_summary(terminalreporter):
    """Print the measured numbers at the end of every run, so CI logs carry them."""
    if _MEASURED:
        terminalreporter.section("measured")
        for key, value in _MEASURED:
            terminalreporter.write_line(f"{key}: {value}")
