"""Hand memory the allocator keeps back to the operating system (glibc only; a no-op elsewhere).

The pair queue's build frees tens of MB of numpy temporaries (score tiles,
decoded row blocks), but glibc's malloc raises its mmap threshold after the
first large free, so later temporaries of that size come from the heap and,
once freed, stay resident: the process's RSS keeps the build's peak for the
rest of a run although nothing holds it.
``malloc_trim`` returns those free pages.

Trimming every few thousand decisions is not enough: refills, merged entries'
embeddings and the judge free multi-MB blocks all along, and between two trims
the heap fragments (on a long run the loop's RSS climbs, most of it free
heap). :func:`pin_mmap_threshold` stops the cause: it fixes glibc's threshold
at 1 MiB, so every block that large gets pages of its own, returned when it
is freed (the docs' benchmarks page has the figures).
"""

from __future__ import annotations

import ctypes
import os
import sys
from functools import lru_cache
from typing import Any

__all__ = ["MMAP_THRESHOLD_BYTES", "pin_mmap_threshold", "release_free_memory"]

#: Blocks of at least this many bytes are mapped on their own by glibc once :func:`pin_mmap_threshold` ran.
MMAP_THRESHOLD_BYTES = 1 << 20
_M_MMAP_THRESHOLD = -3  # mallopt's parameter number (malloc.h)


@lru_cache(maxsize=1)
def _libc() -> Any:
    # Looked up on first use, not at import: `import memrefine_edge` stays fast. glibc's soname
    # is fixed, so no ctypes.util.find_library (which runs ldconfig in a subprocess).
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None


@lru_cache(maxsize=1)
def _trim() -> Any:
    fn = getattr(_libc(), "malloc_trim", None)  # glibc's; musl and others have none
    if fn is None:
        return None
    fn.argtypes, fn.restype = [ctypes.c_size_t], ctypes.c_int
    return fn


def release_free_memory() -> None:
    """Return the allocator's free memory to the OS now (a few ms); nothing changes for the program."""
    trim = _trim()
    if trim is not None:
        trim(0)


def pin_mmap_threshold() -> bool:
    """Have glibc map every block of :data:`MMAP_THRESHOLD_BYTES` or more on its own, for the rest of the process.

    Such blocks then go back to the OS the moment they are freed instead of
    fragmenting the heap (glibc otherwise raises the threshold after the first
    large free, up to 32 MiB). The cost is a page fault per page of each such
    block. Process-wide, as every malloc setting is; the compressor calls it at
    the start of a run. Returns whether it was set: not off glibc, and not when
    the process was started with ``MALLOC_MMAP_THRESHOLD_`` (the user's own
    setting wins: set it to keep glibc's behaviour, e.g. to 33554432).
    """
    if "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    libc = _libc()
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None:
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))
