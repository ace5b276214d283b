"""CloudWatchMetrics against moto: what is recorded is published under the namespace and the
ServiceName dimension the scaling policy tracks, and a failure to publish never raises."""

import asyncio
import logging
import socket
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import aioboto3
import pytest
from aiobotocore.config import AioConfig

from adapters.cloudwatch import CloudWatchMetrics
from adapters.cloudwatch.schema import AUTOSCALING_METRIC, DEFAULT_NAMESPACE, SERVICE_DIMENSION
from application.ports.metrics import ACTIVE_CONNECTIONS, HANDOFF_LATENCY_MS, LEASE_ACQUISITIONS
from entrypoints.devstack.aws import LocalAws

SERVICE = "wsfleet-workers"
NO_RETRIES = AioConfig(
    connect_timeout=1, read_timeout=5, retries={"mode": "standard", "total_max_attempts": 1}
)


@pytest.fixture
async def cloudwatch(aws: LocalAws) -> AsyncIterator[Any]:
    async with aioboto3.Session().client(
        "cloudwatch", endpoint_url=aws.moto_url, region_name=aws.region
    ) as client:
        yield client


async def statistic(client: Any, name: str, stat: str) -> float:
    """`stat` of the metric over the last few minutes, as CloudWatch would answer it."""
    now = datetime.now(UTC)
    response = await client.get_metric_data(
        MetricDataQueries=[
            {
                "Id": "q",
                "MetricStat": {
                    "Metric": {
                        "Namespace": DEFAULT_NAMESPACE,
                        "MetricName": name,
                        "Dimensions": [{"Name": SERVICE_DIMENSION, "Value": SERVICE}],
                    },
                    "Period": 3600,
                    "Stat": stat,
                },
            }
        ],
        StartTime=now - timedelta(minutes=10),
        EndTime=now + timedelta(minutes=10),
    )
    [result] = response["MetricDataResults"]
    [value] = result["Values"]
    return float(value)


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_recorded_metrics_are_published_under_the_service_dimension(
    cloudwatch: Any,
) -> None:
    metrics = CloudWatchMetrics(cloudwatch, SERVICE)
    for value in (1, 1, 2):
        metrics.count(LEASE_ACQUISITIONS, value)
    metrics.gauge(ACTIVE_CONNECTIONS, 5)
    metrics.gauge(ACTIVE_CONNECTIONS, 7)
    for milliseconds in (100, 100, 250):
        metrics.timing(HANDOFF_LATENCY_MS, milliseconds)

    await metrics.flush()

    listed = await cloudwatch.list_metrics(Namespace=DEFAULT_NAMESPACE)
    dimensions = {m["MetricName"]: m["Dimensions"] for m in listed["Metrics"]}
    assert dimensions[AUTOSCALING_METRIC] == [{"Name": SERVICE_DIMENSION, "Value": SERVICE}]
    assert set(dimensions) == {LEASE_ACQUISITIONS, ACTIVE_CONNECTIONS, HANDOFF_LATENCY_MS}
    assert await statistic(cloudwatch, LEASE_ACQUISITIONS, "Sum") == 4
    assert await statistic(cloudwatch, ACTIVE_CONNECTIONS, "SampleCount") == 1
    assert await statistic(cloudwatch, ACTIVE_CONNECTIONS, "Maximum") == 7
    assert await statistic(cloudwatch, HANDOFF_LATENCY_MS, "SampleCount") == 3
    assert await statistic(cloudwatch, HANDOFF_LATENCY_MS, "Sum") == 450
    assert await statistic(cloudwatch, HANDOFF_LATENCY_MS, "Maximum") == 250
    assert (metrics.requests_sent, metrics.publish_failures) == (1, 0)


async def test_counters_restart_at_each_flush_while_gauges_are_repeated(cloudwatch: Any) -> None:
    metrics = CloudWatchMetrics(cloudwatch, SERVICE)
    metrics.count(LEASE_ACQUISITIONS, 2)
    metrics.gauge(ACTIVE_CONNECTIONS, 3)

    await metrics.flush()
    await metrics.flush()

    assert await statistic(cloudwatch, LEASE_ACQUISITIONS, "SampleCount") == 1
    assert await statistic(cloudwatch, LEASE_ACQUISITIONS, "Sum") == 2
    assert await statistic(cloudwatch, ACTIVE_CONNECTIONS, "SampleCount") == 2


async def test_data_beyond_one_request_are_split_and_all_published(cloudwatch: Any) -> None:
    """GIVEN 1,000 distinct timings (past the per-metric histogram cap) and ten counters,
    WHEN flushed with requests limited to one full datum each, THEN every sample arrives."""
    metrics = CloudWatchMetrics(cloudwatch, SERVICE, max_request_weight=151)
    for milliseconds in range(1, 1001):
        metrics.timing(HANDOFF_LATENCY_MS, milliseconds)
    for i in range(10):
        metrics.count(f"Counter{i}")

    await metrics.flush()

    assert metrics.requests_sent >= 3
    assert metrics.publish_failures == 0
    assert await statistic(cloudwatch, HANDOFF_LATENCY_MS, "SampleCount") == 1000
    assert await statistic(cloudwatch, HANDOFF_LATENCY_MS, "Sum") == 500_500
    assert await statistic(cloudwatch, HANDOFF_LATENCY_MS, "Minimum") == 1
    assert await statistic(cloudwatch, HANDOFF_LATENCY_MS, "Maximum") == 1000
    assert await statistic(cloudwatch, "Counter9", "Sum") == 1


async def test_values_cloudwatch_would_refuse_are_dropped_not_sent(cloudwatch: Any) -> None:
    metrics = CloudWatchMetrics(cloudwatch, SERVICE)
    metrics.timing(HANDOFF_LATENCY_MS, float("nan"))
    metrics.gauge(ACTIVE_CONNECTIONS, float("inf"))
    metrics.count(LEASE_ACQUISITIONS)

    await metrics.flush()

    assert (metrics.publish_failures, metrics.dropped_values) == (0, 2)
    assert await statistic(cloudwatch, LEASE_ACQUISITIONS, "Sum") == 1


async def test_flush_to_an_unreachable_endpoint_logs_and_counts_instead_of_raising(
    caplog: pytest.LogCaptureFixture,
) -> None:
    endpoint = f"http://127.0.0.1:{closed_port()}"
    async with aioboto3.Session().client(
        "cloudwatch", endpoint_url=endpoint, region_name="us-east-1", config=NO_RETRIES
    ) as client:
        metrics = CloudWatchMetrics(client, SERVICE)
        metrics.gauge(ACTIVE_CONNECTIONS, 3)

        with caplog.at_level(logging.WARNING, logger="adapters.cloudwatch"):
            await metrics.flush()

        assert metrics.publish_failures == 1
        assert "could not publish" in caplog.text
        metrics.count(LEASE_ACQUISITIONS)  # recording goes on
        await metrics.flush()
        assert metrics.publish_failures == 2


async def test_an_endpoint_that_never_answers_is_abandoned_after_the_request_timeout() -> None:
    silent_connections: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        silent_connections.append(writer)  # accept, read nothing back, never answer

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with aioboto3.Session().client(
            "cloudwatch",
            endpoint_url=f"http://127.0.0.1:{port}",
            region_name="us-east-1",
            config=NO_RETRIES,
        ) as client:
            metrics = CloudWatchMetrics(client, SERVICE, request_timeout_s=0.3)
            metrics.gauge(ACTIVE_CONNECTIONS, 3)

            await asyncio.wait_for(metrics.flush(), timeout=4)

            assert metrics.publish_failures == 1
    finally:
        for writer in silent_connections:
            writer.close()
        server.close()
        await server.wait_closed()
