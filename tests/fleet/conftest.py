"""A local Ray with 2 CPUs, started once for the fleet tests that need it (skipped without the fleet extra)."""

from __future__ import annotations

import logging

import pytest


@pytest.fixture(scope="session")
def local_ray():
    """Ray on this machine with 2 CPUs; every fleet job in the session joins it (it is already started)."""
    ray = pytest.importorskip("ray", reason="the fleet extra is not installed (pip install -e '.[fleet]'): the "
                                            "fleet tests need Ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    yield ray
    ray.shutdown()
