"""Memory of this process as Linux reports it (/proc/self/status), for the benchmarks' children."""

from __future__ import annotations


def status_mb(field: str) -> float:
    """``VmHWM`` (peak resident set) or ``VmRSS`` (now) of this process in MiB; NaN where /proc has none."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")
