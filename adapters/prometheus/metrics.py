"""PrometheusMetrics: the metrics port in Prometheus' exposition format, for scraping.

Every metric of the catalogue (application/ports/metrics.py) is registered up front, so a
scrape shows each one from the start (a counter at 0 is information; a missing series is
not). Names derive from the catalogue's by one rule, `prometheus_name`:
`wsfleet_` + snake_case, counters end in `_total`, timings become histograms in seconds
(`IngestLagMs` -> `wsfleet_ingest_lag_seconds`). Meanings are CloudWatch's; no labels are
added per connection (one series per metric per worker; Prometheus adds `instance`).

Counters are this adapter's own collector, so that a tracked running total
(`Metrics.track`: MessagesReceived) is read at scrape time and the scrape is as current as the
count. Beside the catalogue the registry has the client library's process (`process_*`: RSS,
CPU, open files), Python GC and platform collectors: memory per connection is a documented
limit. No `_created` series: they double the page and no query here uses them.

The registry is this adapter's own, not the client library's global one: two workers in one
process (tests) never share or clash. Recording is O(1); `flush` has nothing to do
(Prometheus pulls).
"""

import logging
import math
import re
from collections.abc import Callable, Iterator

import prometheus_client
from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Gauge,
    Histogram,
    Info,
)
from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from application.ports.metrics import CATALOGUE, Kind, MetricSpec, RunningTotals

log = logging.getLogger(__name__)

PREFIX = "wsfleet_"
BUILD_INFO = PREFIX + "build"  # exposed as wsfleet_build_info
# The classic text format (what generate_latest writes), which every Prometheus version reads.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# Seconds: from a fast renew (about a millisecond) to a lease's worth of lag (a minute).
BUCKETS_S = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)  # fmt: skip


def prometheus_name(spec: MetricSpec) -> str:
    """The name a scrape shows for a catalogue metric (a histogram also has `_bucket`,
    `_count` and `_sum` series under it)."""
    base = re.sub(r"Ms$", "", spec.name) if spec.kind is Kind.TIMING else spec.name
    snake = PREFIX + re.sub(r"(?<!^)(?=[A-Z])", "_", base).lower()
    if spec.kind is Kind.COUNTER:
        return snake + "_total"
    if spec.kind is Kind.TIMING:
        return snake + "_seconds"
    return snake


class _Counters(Collector):
    """The catalogue's counters: what was counted plus the tracked running totals, read at
    collection (a scrape), never written per event."""

    def __init__(self, specs: list[MetricSpec]) -> None:
        self.specs = {spec.name: spec for spec in specs}
        self.values = dict.fromkeys(self.specs, 0.0)
        self.totals = RunningTotals()

    def collect(self) -> Iterator[Metric]:
        for name, spec in self.specs.items():
            value = self.values[name] + self.totals.now(name)
            # The family's name without `_total`: the exposition appends it.
            yield CounterMetricFamily(
                prometheus_name(spec).removesuffix("_total"), spec.help, value=value
            )


class PrometheusMetrics:
    def __init__(self, build: dict[str, str]) -> None:
        # The library's switch is process-wide; every registry of this process is ours.
        prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = CollectorRegistry(auto_describe=True)
        for collector in (PROCESS_COLLECTOR, GC_COLLECTOR, PLATFORM_COLLECTOR):
            self.registry.register(collector)
        self._counters = _Counters([s for s in CATALOGUE if s.kind is Kind.COUNTER])
        self.registry.register(self._counters)
        self._gauges: dict[str, Gauge] = {}
        self._histograms: dict[str, Histogram] = {}
        for spec in CATALOGUE:
            name = prometheus_name(spec)
            if spec.kind is Kind.COUNTER:
                continue
            if spec.kind is Kind.GAUGE:
                self._gauges[spec.name] = Gauge(name, spec.help, registry=self.registry)
            else:
                self._histograms[spec.name] = Histogram(
                    name, spec.help, buckets=BUCKETS_S, registry=self.registry
                )
        info = Info(
            BUILD_INFO, "The worker's build: version, Python, backend.", registry=self.registry
        )
        info.info(build)
        # Recordings dropped: a name the catalogue lacks (or of another kind), a non-finite
        # value, a negative count. All bugs of the caller; none may raise or poison a series.
        self.dropped = 0

    def count(self, name: str, value: float = 1.0) -> None:
        if name not in self._counters.values or not math.isfinite(value) or value < 0:
            self._drop(name, value)
            return
        self._counters.values[name] += value

    def track(self, name: str, total: Callable[[], float]) -> None:
        if name not in self._counters.values:
            self._drop(name, math.nan)
            return
        self._counters.totals.track(name, total)

    def gauge(self, name: str, value: float) -> None:
        gauge = self._gauges.get(name)
        if gauge is None or not math.isfinite(value):
            self._drop(name, value)
            return
        gauge.set(value)

    def timing(self, name: str, milliseconds: float) -> None:
        histogram = self._histograms.get(name)
        if histogram is None or not math.isfinite(milliseconds):
            self._drop(name, milliseconds)
            return
        histogram.observe(milliseconds / 1000)

    async def flush(self) -> None:
        return None  # scraped, never pushed

    def scrape(self) -> tuple[str, bytes]:
        """The registry in the text format, with its content type."""
        return CONTENT_TYPE, generate_latest(self.registry)

    def _drop(self, name: str, value: float) -> None:
        if not self.dropped:  # once: a bug repeats at every call
            log.warning(
                "metric %r = %r dropped: not in the catalogue as such, or no value", name, value
            )
        self.dropped += 1
