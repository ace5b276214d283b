"""The metrics port's promise, run unchanged against every adapter that needs no server:
recording never raises, whatever the name or value (NaN, infinities, negative, unknown), and
`flush` never raises. (CloudWatch keeps the same promise against moto in
tests/integration/test_cloudwatch_metrics.py.)"""

from collections.abc import Callable

import pytest

from adapters.jsonlog.metrics import JsonLogMetrics
from adapters.memory.metrics import InMemoryMetrics
from adapters.prometheus import PrometheusMetrics
from application.ports import Metrics
from application.ports.metrics import ACTIVE_CONNECTIONS, CATALOGUE, INGEST_LAG_MS, Kind
from entrypoints.metrics import TeeMetrics

ADAPTERS: dict[str, Callable[[], Metrics]] = {
    "memory": InMemoryMetrics,
    "jsonlog": JsonLogMetrics,
    "prometheus": lambda: PrometheusMetrics({"version": "0"}),
    "tee": lambda: TeeMetrics(JsonLogMetrics(), PrometheusMetrics({"version": "0"})),
}
ODD_VALUES = (0.0, -1.0, 1e300, float("nan"), float("inf"), float("-inf"), 2.0**-1000)


@pytest.fixture(params=list(ADAPTERS))
def metrics(request: pytest.FixtureRequest) -> Metrics:
    return ADAPTERS[request.param]()


async def test_every_catalogue_metric_records_and_flushes(metrics: Metrics) -> None:
    for spec in CATALOGUE:
        if spec.kind is Kind.COUNTER:
            metrics.count(spec.name)
            metrics.count(spec.name, 3)
        elif spec.kind is Kind.GAUGE:
            metrics.gauge(spec.name, 5)
        else:
            metrics.timing(spec.name, 12.5)
    await metrics.flush()
    await metrics.flush()  # nothing new: still fine


async def test_odd_values_and_unknown_names_never_raise(metrics: Metrics) -> None:
    for value in ODD_VALUES:
        metrics.count("NotAMetric", value)
        metrics.count(ACTIVE_CONNECTIONS, value)  # a gauge counted: the caller's bug
        metrics.gauge(ACTIVE_CONNECTIONS, value)
        metrics.timing(INGEST_LAG_MS, value)
        metrics.timing("NotAMetric", value)
    await metrics.flush()
