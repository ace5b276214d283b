"""InMemoryMetrics: keeps what was recorded, for tests and the local status view."""

from collections import defaultdict
from collections.abc import Callable

from application.ports.metrics import RunningTotals


class InMemoryMetrics:
    def __init__(self) -> None:
        self.counters: dict[str, float] = defaultdict(float)
        self.gauges: dict[str, float] = {}
        self.timings: dict[str, list[float]] = defaultdict(list)
        self.flushes = 0
        self._totals = RunningTotals()

    def count(self, name: str, value: float = 1.0) -> None:
        self.counters[name] += value

    def gauge(self, name: str, value: float) -> None:
        self.gauges[name] = value

    def timing(self, name: str, milliseconds: float) -> None:
        samples = self.timings[name]
        samples.append(milliseconds)
        if len(samples) > 10_000:  # bounded: keep the recent half
            del samples[: len(samples) // 2]

    def track(self, name: str, total: Callable[[], float]) -> None:
        self._totals.track(name, total)

    async def flush(self) -> None:
        """Adds the tracked totals' growth to `counters`, as a publisher would publish it."""
        for name, grown in self._totals.growth().items():
            self.counters[name] += grown
        self.flushes += 1
