"""Where the benchmarks find LoCoMo: ``$MEMREFINE_LOCOMO`` (the folder or ``locomo-dev.json`` itself), else
``../shared/data/locomo`` beside the repository."""

from __future__ import annotations

import os
import sys
from pathlib import Path

_REPO = Path(__file__).resolve().parent.parent


def dev_json() -> Path:
    """``locomo-dev.json``; exits with a message naming the path tried when it is not there."""
    folder = Path(os.environ.get("MEMREFINE_LOCOMO") or _REPO.parent / "shared" / "data" / "locomo")
    path = folder / "locomo-dev.json" if folder.is_dir() else folder
    if not path.is_file():
        sys.exit(f"LoCoMo not found at {path}; set MEMREFINE_LOCOMO")
    return path
