"""The ``memrefine`` command with only the encoder replaced (:class:`HashEncoder`), for CLI tests in a subprocess.

    python tests/support/cli_hash_encoder.py compress --db DB --budget 0.5 --method NAME ...

Same command line, same error handling and exit codes as the real console script; the method comes from
the registry (plugins included) and the judge and merger are the model-free defaults, so no model file is read.
"""

from __future__ import annotations

from memrefine_edge.cli import main
from memrefine_edge.testing import FakeBackends, HashEncoder

if __name__ == "__main__":
    main(backends=FakeBackends(encoder=HashEncoder()))
