"""In-process aggregation between flushes: counters summed, gauges' last values, timings as
value -> count histograms. Recording is O(1) and memory is bounded whatever is recorded."""

import math
from collections.abc import Callable, Mapping

import attrs

from adapters.cloudwatch.schema import MAX_ABS_VALUE, MIN_ABS_VALUE
from application.ports.metrics import RunningTotals


@attrs.define
class Timing:
    """The samples of one timing since the last drain. Values are rounded to 3 significant
    digits (within 0.5 %, finer than CloudWatch's own percentile buckets) so repeats share an
    entry; once `counts` holds its cap of distinct values, further new values are kept only as
    count, sum, min and max in `overflow_*`."""

    counts: dict[float, int] = attrs.Factory(dict)
    overflow_count: int = 0
    overflow_sum: float = 0.0
    overflow_min: float = math.inf
    overflow_max: float = -math.inf

    def add(self, value: float, max_distinct: int) -> None:
        key = float(f"{value:.3g}")
        if key in self.counts or len(self.counts) < max_distinct:
            self.counts[key] = self.counts.get(key, 0) + 1
            return
        self.overflow_count += 1
        self.overflow_sum += value
        self.overflow_min = min(self.overflow_min, value)
        self.overflow_max = max(self.overflow_max, value)


@attrs.frozen
class Snapshot:
    counters: dict[str, float]
    gauges: dict[str, float]
    timings: dict[str, Timing]

    def __bool__(self) -> bool:
        return bool(self.counters or self.gauges or self.timings)


class MetricAggregator:
    """Counters and timings restart at every drain; gauges keep their last value and are
    reported at every drain (a scaling policy needs a value each period, not only changes).

    Values CloudWatch would refuse (NaN, infinities) and metrics beyond `max_names` of a kind
    are dropped and counted in `dropped`; names are code constants, so the cap only guards
    against a bug."""

    def __init__(self, max_distinct_timing_values: int = 300, max_names: int = 100) -> None:
        self._max_distinct = max_distinct_timing_values
        self._max_names = max_names
        self._counters: dict[str, float] = {}
        self._gauges: dict[str, float] = {}
        self._timings: dict[str, Timing] = {}
        self._totals = RunningTotals()
        self.dropped = 0

    def count(self, name: str, value: float) -> None:
        sane = self._sane(value)
        if sane is not None and self._room(self._counters, name):
            self._counters[name] = self._counters.get(name, 0.0) + sane

    def gauge(self, name: str, value: float) -> None:
        sane = self._sane(value)
        if sane is not None and self._room(self._gauges, name):
            self._gauges[name] = sane

    def timing(self, name: str, milliseconds: float) -> None:
        sane = self._sane(milliseconds)
        if sane is not None and self._room(self._timings, name):
            self._timings.setdefault(name, Timing()).add(sane, self._max_distinct)

    def track(self, name: str, total: Callable[[], float]) -> None:
        self._totals.track(name, total)

    def drain(self) -> Snapshot:
        for name, grown in self._totals.growth().items():
            self.count(name, grown)
        snapshot = Snapshot(
            counters=self._counters, gauges=dict(self._gauges), timings=self._timings
        )
        self._counters = {}
        self._timings = {}
        return snapshot

    def _room(self, metrics: Mapping[str, object], name: str) -> bool:
        if name in metrics or len(metrics) < self._max_names:
            return True
        self.dropped += 1
        return False

    def _sane(self, value: float) -> float | None:
        """The value as CloudWatch accepts it, or None (counted as dropped) if it has none."""
        if not math.isfinite(value):
            self.dropped += 1
            return None
        if abs(value) < MIN_ABS_VALUE:
            return 0.0
        return max(-MAX_ABS_VALUE, min(MAX_ABS_VALUE, value))
