"""The fleet job: many stores compressed on Ray, each with the same guarantees as one.

Each store is one Ray task with one CPU running the compression
``memrefine compress`` runs (its run lock, its run journal, its standing
budget). Inputs are read lazily (paths, a glob, a manifest); rows come back
as stores end, and go to a JSON-lines result file and a summary. Ray is an
optional extra (``pip install 'memrefine-edge[fleet]'``): importing this
package does not import it, a job does.
"""

from __future__ import annotations

from ._api import compress_many
from ._inputs import StoreJob, as_jobs, count_manifest, glob_stores, read_manifest
from ._ray import require_ray
from ._results import FleetSummary, Outcome, ResultWriter, StoreResult, read_results, summarize
from ._task import FleetSettings, compress_one

__all__ = [
    "FleetSettings", "FleetSummary", "Outcome", "ResultWriter", "StoreJob", "StoreResult", "as_jobs",
    "compress_many", "compress_one", "count_manifest", "glob_stores", "read_manifest", "read_results",
    "require_ray", "summarize",
]
