"""Process limits a capacity run depends on: open files (one per WebSocket) and event-loop lag."""

import asyncio
import os
import resource
import time

from bench.stats import percentile


def raise_open_files() -> dict[str, int]:
    """Raise the soft RLIMIT_NOFILE to the hard limit (what an unprivileged process may do);
    returns both, as found and as set."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return {
        "soft_before": soft,
        "soft": resource.getrlimit(resource.RLIMIT_NOFILE)[0],
        "hard": hard,
    }


def open_files() -> int:
    return len(os.listdir("/proc/self/fd"))


def self_rss_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class LoopLag:
    """How late a 100 ms sleep wakes: the event loop's queueing delay, sampled (bounded)."""

    def __init__(self, period_s: float = 0.1, keep: int = 10_000) -> None:
        self._period = period_s
        self._keep = keep
        self.samples_ms: list[float] = []

    async def run(self) -> None:
        while True:
            began = time.monotonic()
            await asyncio.sleep(self._period)
            self.samples_ms.append((time.monotonic() - began - self._period) * 1000)
            if len(self.samples_ms) > self._keep:
                del self.samples_ms[: self._keep // 2]

    def take(self) -> dict[str, float | None]:
        samples, self.samples_ms = self.samples_ms, []
        return {
            "p50_ms": percentile(samples, 50),
            "p99_ms": percentile(samples, 99),
            "max_ms": max(samples, default=None),
        }
