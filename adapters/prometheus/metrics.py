"""PrometheusMetrics: the metrics port in Prometheus' exposition format, for scraping.

Every metric of the catalogue (application/ports/metrics.py) is registered up front, so a
scrape shows each one from the start (a counter at 0 is information; a missing series is
not). Names derive from the catalogue's by one rule, `prometheus_name`:
`wsfleet_` + snake_case, counters end in `_total`, timings become histograms in seconds
(`IngestLagMs` -> `wsfleet_ingest_lag_seconds`). Meanings are CloudWatch's; no labels are
added per connection (one series per metric per worker; Prometheus adds `instance`).

The registry is this adapter's own, not the client library's global one: two workers in one
process (tests) never share or clash. Recording is O(1) under the library's lock; `flush` has
nothing to do (Prometheus pulls).
"""

import logging
import math
import re

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info
from prometheus_client.exposition import generate_latest

from application.ports.metrics import CATALOGUE, Kind, MetricSpec

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


class PrometheusMetrics:
    def __init__(self, build: dict[str, str]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._counters: dict[str, Counter] = {}
        self._gauges: dict[str, Gauge] = {}
        self._histograms: dict[str, Histogram] = {}
        for spec in CATALOGUE:
            name = prometheus_name(spec)
            if spec.kind is Kind.COUNTER:
                # The library appends `_total` itself.
                self._counters[spec.name] = Counter(
                    name.removesuffix("_total"), spec.help, registry=self.registry
                )
            elif spec.kind is Kind.GAUGE:
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
        counter = self._counters.get(name)
        if counter is None or not math.isfinite(value) or value < 0:
            self._drop(name, value)
            return
        counter.inc(value)

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
