"""What a result was measured on: the machine, the interpreter and the commit."""

import os
import platform
import subprocess
from pathlib import Path
from typing import Any

from entrypoints.devstack.service import ROOT


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _memory_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return round(int(line.split()[1]) / 2**20, 1)
    return 0.0


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "application", "adapters", "entrypoints"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
    except OSError:
        return "unknown"
    return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def describe() -> dict[str, Any]:
    return {
        "nproc": os.cpu_count(),
        "cpu": _cpu_model(),
        "memory_gib": _memory_gib(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "commit": _commit(),
    }
