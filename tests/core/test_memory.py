"""memrefine_edge.core._memory: giving the allocator's free memory back, and mapping large blocks apart."""

import ctypes
import os
import subprocess
import sys

import numpy as np
import pytest

from memrefine_edge.core import pin_mmap_threshold, release_free_memory


def test_release_free_memory_keeps_live_data():
    live = np.arange(1 << 16, dtype=np.int64)
    garbage = [np.ones(1 << 18) for _ in range(8)]
    del garbage
    assert release_free_memory() is None
    assert live.sum() == (1 << 16) * ((1 << 16) - 1) // 2


_PROBE = """
import ctypes, sys
import numpy as np
from memrefine_edge.core._memory import pin_mmap_threshold

class Info(ctypes.Structure):
    _fields_ = [(f, ctypes.c_size_t) for f in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = Info
if sys.argv[1] == "pin":
    assert pin_mmap_threshold()
big = np.ones(8 << 20, dtype=np.uint8)  # freeing a mapped 8 MiB block raises glibc's own threshold
del big
before = libc.mallinfo2().hblkhd
block = np.ones(2 << 20, dtype=np.uint8)
print(libc.mallinfo2().hblkhd - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or not hasattr(ctypes.CDLL(None), "mallinfo2"),
                    reason="glibc only")
def test_pinned_threshold_maps_large_blocks_apart_after_a_large_free():
    def mapped(mode: str) -> int:
        env = {k: v for k, v in os.environ.items() if k != "MALLOC_MMAP_THRESHOLD_"}
        out = subprocess.run([sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, env=env,
                             check=True)
        return int(out.stdout.strip())

    assert mapped("default") < 1 << 20  # glibc alone: the 2 MiB block comes from the heap
    assert mapped("pin") >= 2 << 20  # pinned: it has pages of its own, returned when freed


def test_a_threshold_the_user_set_is_left_alone(monkeypatch):
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "33554432")
    assert pin_mmap_threshold() is False
