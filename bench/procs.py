"""What the benchmarks measure of their child processes (the dev stack's, entrypoints/devstack/
process.py): resident memory and CPU time, from /proc."""

import os
import re
from pathlib import Path


def rss_kib(pid: int) -> int:
    """Resident set size of `pid` in KiB (VmRSS), 0 if it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    match = re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE)
    return int(match.group(1)) if match else 0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of `pid` so far (from /proc/<pid>/stat)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks
