"""The ``memrefine`` command with the models replaced by the campaign fakes, for CLI tests in a subprocess.

    python tests/support/cli_fake_models.py compress --db DB --budget 0.45 ...

Same command line, same error handling and exit codes as the real console
script; the models are :class:`FakeBackends` with :class:`HashEncoder`,
:class:`CampaignMethod` (policy ``mixed``) and :class:`ConcatMerger`.
"""

from __future__ import annotations

import os

from memrefine_edge.cli import main  # noqa: E402
from memrefine_edge.testing import FakeBackends, HashEncoder  # noqa: E402
from tests.support.crash_fakes import CampaignMethod  # noqa: E402
from tests.support.fakes import ConcatMerger  # noqa: E402

if __name__ == "__main__":
    # MEMREFINE_TEST_SLEEP_MS slows every decision down (to interrupt a run mid-way).
    sleep_ms = float(os.environ.get("MEMREFINE_TEST_SLEEP_MS", "0"))
    main(backends=FakeBackends(encoder=HashEncoder(), method=CampaignMethod(sleep_ms=sleep_ms),
                               merger=ConcatMerger()))
