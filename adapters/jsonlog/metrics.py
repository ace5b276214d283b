"""JsonLogMetrics: the metrics port for one host, as one JSON log line per flush.

The embedded backend has no metrics service. Each flush (every `WSFLEET_METRICS_INTERVAL_S`)
writes a single log record, message "metrics", whose `metrics` field holds the counters summed
since the last flush, the gauges' last values and a summary of each timing (count, min, max,
mean, p50, p99): the same names as CloudWatch gets (application/ports/metrics.py), in the same
JSON stream as the worker's other log lines, readable with `jq` or any log shipper.
Aggregation is CloudWatch's (bounded in memory whatever is recorded); nothing is written
between flushes, and a flush never raises. The lines are at INFO: WSFLEET_LOG_LEVEL=WARNING
silences them.
"""

import logging
import math
from collections.abc import Callable
from typing import Any

from adapters.cloudwatch.aggregate import MetricAggregator, Timing

log = logging.getLogger("wsfleet.metrics")


class JsonLogMetrics:
    def __init__(self, aggregator: MetricAggregator | None = None) -> None:
        self._aggregator = aggregator or MetricAggregator()

    def count(self, name: str, value: float = 1.0) -> None:
        self._aggregator.count(name, value)

    def gauge(self, name: str, value: float) -> None:
        self._aggregator.gauge(name, value)

    def timing(self, name: str, milliseconds: float) -> None:
        self._aggregator.timing(name, milliseconds)

    def track(self, name: str, total: Callable[[], float]) -> None:
        self._aggregator.track(name, total)  # its growth is published at each flush

    async def flush(self) -> None:
        snapshot = self._aggregator.drain()
        if not snapshot:
            return
        document: dict[str, Any] = {
            "counters": snapshot.counters,
            "gauges": snapshot.gauges,
            "timings": {name: summarize(t) for name, t in snapshot.timings.items()},
        }
        log.info("metrics", extra={"metrics": document})


def summarize(timing: Timing) -> dict[str, float]:
    """count, min, max, mean, p50 and p99 of a timing's samples (overflowed samples count in
    count, min, max and mean; percentiles come from the kept values)."""
    count = sum(timing.counts.values()) + timing.overflow_count
    if count == 0:
        return {"count": 0}
    total = sum(v * n for v, n in timing.counts.items()) + timing.overflow_sum
    kept = sorted(timing.counts.items())
    lowest = min([v for v, _ in kept[:1]] + [timing.overflow_min])
    highest = max([v for v, _ in kept[-1:]] + [timing.overflow_max])
    summary = {"count": count, "min": lowest, "max": highest, "mean": round(total / count, 3)}
    if kept:
        summary["p50"] = _percentile(kept, 0.50)
        summary["p99"] = _percentile(kept, 0.99)
    return summary


def _percentile(sorted_counts: list[tuple[float, int]], q: float) -> float:
    total = sum(n for _, n in sorted_counts)
    rank = max(1, math.ceil(q * total))
    seen = 0
    for value, n in sorted_counts:
        seen += n
        if seen >= rank:
            return value
    return sorted_counts[-1][0]
