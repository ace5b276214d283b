"""CloudWatchMetrics: the metrics port on Amazon CloudWatch, aggregated in-process and
published with batched PutMetricData over an injected aioboto3 client."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from adapters.cloudwatch.aggregate import MetricAggregator, Snapshot, Timing
from adapters.cloudwatch.schema import (
    COUNTER_UNIT,
    DEFAULT_NAMESPACE,
    GAUGE_UNIT,
    MAX_ABS_VALUE,
    MAX_DATA_PER_REQUEST,
    MAX_VALUES_PER_DATUM,
    SERVICE_DIMENSION,
    TIMING_UNIT,
)
from application.errors import ConfigurationError

if TYPE_CHECKING:
    from types_aiobotocore_cloudwatch.client import CloudWatchClient
    from types_aiobotocore_cloudwatch.literals import StandardUnitType
    from types_aiobotocore_cloudwatch.type_defs import DimensionTypeDef, MetricDatumTypeDef

log = logging.getLogger(__name__)

# A datum weighs 1 plus its number of Values. Keeping a request under this weight keeps it
# within the API's 1,000 data and far below its 1 MB body (about 100 kB at most).
DEFAULT_REQUEST_WEIGHT = 1000


class CloudWatchMetrics:
    """Recording is synchronous and O(1); `flush` publishes what was recorded since the last
    flush, in as few requests as the limits allow, each bounded by `request_timeout_s`.

    `flush` never raises: a request that fails is logged at warning, counted in
    `publish_failures`, and its data dropped (metrics are best-effort; keeping them for a retry
    would pile up during an outage). Other requests of the same flush still go out.
    """

    def __init__(
        self,
        client: CloudWatchClient,
        service_name: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        high_resolution: bool = False,
        request_timeout_s: float = 10.0,
        max_request_weight: int = DEFAULT_REQUEST_WEIGHT,
        aggregator: MetricAggregator | None = None,
    ) -> None:
        if not service_name:
            raise ConfigurationError("service_name must name the ECS service (the dimension)")
        if max_request_weight < 1 + MAX_VALUES_PER_DATUM:
            raise ConfigurationError(
                f"max_request_weight must be at least {1 + MAX_VALUES_PER_DATUM} "
                f"(one datum with its values), got {max_request_weight}"
            )
        self._client = client
        self._namespace = namespace
        self._dimensions: list[DimensionTypeDef] = [
            {"Name": SERVICE_DIMENSION, "Value": service_name}
        ]
        self._resolution = 1 if high_resolution else 60
        self._request_timeout_s = request_timeout_s
        self._max_request_weight = max_request_weight
        self._aggregator = aggregator or MetricAggregator()
        self.publish_failures = 0
        self.requests_sent = 0

    @property
    def dropped_values(self) -> int:
        """Values never published because CloudWatch would refuse them (NaN, infinities)."""
        return self._aggregator.dropped

    def count(self, name: str, value: float = 1.0) -> None:
        self._aggregator.count(name, value)

    def gauge(self, name: str, value: float) -> None:
        self._aggregator.gauge(name, value)

    def timing(self, name: str, milliseconds: float) -> None:
        self._aggregator.timing(name, milliseconds)

    def track(self, name: str, total: Callable[[], float]) -> None:
        self._aggregator.track(name, total)  # its growth is published at each flush

    async def flush(self) -> None:
        data = self._metric_data(self._aggregator.drain())
        for request in _requests(data, self._max_request_weight):
            try:
                async with asyncio.timeout(self._request_timeout_s):
                    await self._client.put_metric_data(
                        Namespace=self._namespace, MetricData=request
                    )
            # The port's promise: publishing metrics never fails the caller (and so never the
            # connections). Cancellation is not an Exception and still propagates.
            except Exception as exc:
                self.publish_failures += 1
                log.warning(
                    "could not publish %d CloudWatch metric data to %s: %r",
                    len(request),
                    self._namespace,
                    exc,
                )
            else:
                self.requests_sent += 1

    def _metric_data(self, snapshot: Snapshot) -> list[MetricDatumTypeDef]:
        data: list[MetricDatumTypeDef] = []
        for name, total in snapshot.counters.items():
            datum = self._datum(name, COUNTER_UNIT)
            datum["Value"] = _clamp(total)
            data.append(datum)
        for name, value in snapshot.gauges.items():
            datum = self._datum(name, GAUGE_UNIT)
            datum["Value"] = value
            data.append(datum)
        for name, timing in snapshot.timings.items():
            data.extend(self._timing_data(name, timing))
        return data

    def _timing_data(self, name: str, timing: Timing) -> Iterator[MetricDatumTypeDef]:
        # Values/Counts keep the distribution, so CloudWatch can compute percentiles (p99
        # handoff latency); the overflow past the cap still counts in averages and extremes.
        pairs = list(timing.counts.items())
        for start in range(0, len(pairs), MAX_VALUES_PER_DATUM):
            chunk = pairs[start : start + MAX_VALUES_PER_DATUM]
            datum = self._datum(name, TIMING_UNIT)
            datum["Values"] = [value for value, _ in chunk]
            datum["Counts"] = [float(count) for _, count in chunk]
            yield datum
        if timing.overflow_count:
            datum = self._datum(name, TIMING_UNIT)
            datum["StatisticValues"] = {
                "SampleCount": float(timing.overflow_count),
                "Sum": _clamp(timing.overflow_sum),
                "Minimum": timing.overflow_min,
                "Maximum": timing.overflow_max,
            }
            yield datum

    def _datum(self, name: str, unit: StandardUnitType) -> MetricDatumTypeDef:
        return {
            "MetricName": name,
            "Dimensions": self._dimensions,
            "Unit": unit,
            "StorageResolution": self._resolution,
        }


def _requests(
    data: Sequence[MetricDatumTypeDef], max_weight: int
) -> Iterator[list[MetricDatumTypeDef]]:
    """Split the data into requests within the API's limits and `max_weight`."""
    request: list[MetricDatumTypeDef] = []
    weight = 0
    for datum in data:
        datum_weight = 1 + len(datum.get("Values", ()))
        if request and (weight + datum_weight > max_weight or len(request) >= MAX_DATA_PER_REQUEST):
            yield request
            request, weight = [], 0
        request.append(datum)
        weight += datum_weight
    if request:
        yield request


def _clamp(value: float) -> float:
    return max(-MAX_ABS_VALUE, min(MAX_ABS_VALUE, value))
