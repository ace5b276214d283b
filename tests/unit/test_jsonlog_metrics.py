"""JsonLogMetrics: one JSON log record per flush, with what was recorded since the last."""

import logging

import pytest

from adapters.jsonlog.metrics import JsonLogMetrics


def records(caplog: pytest.LogCaptureFixture) -> list[dict[str, object]]:
    return [r.__dict__["metrics"] for r in caplog.records if r.name == "wsfleet.metrics"]


async def test_a_flush_logs_counters_gauges_and_timing_summaries_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    metrics = JsonLogMetrics()
    metrics.count("LeaseAcquisitions")
    metrics.count("LeaseAcquisitions", 2)
    metrics.gauge("ActiveConnections", 7)
    for ms in (10, 20, 30, 1000):
        metrics.timing("HandoffLatencyMs", ms)

    with caplog.at_level(logging.INFO, logger="wsfleet.metrics"):
        await metrics.flush()

    (line,) = records(caplog)
    assert line["counters"] == {"LeaseAcquisitions": 3.0}
    assert line["gauges"] == {"ActiveConnections": 7}
    assert line["timings"] == {
        "HandoffLatencyMs": {
            "count": 4,
            "min": 10.0,
            "max": 1000.0,
            "mean": 265.0,
            "p50": 20.0,
            "p99": 1000.0,
        }
    }


async def test_counters_restart_after_a_flush_and_gauges_keep_their_value(
    caplog: pytest.LogCaptureFixture,
) -> None:
    metrics = JsonLogMetrics()
    metrics.count("StoreErrors")
    metrics.gauge("ActiveConnections", 3)

    with caplog.at_level(logging.INFO, logger="wsfleet.metrics"):
        await metrics.flush()
        await metrics.flush()

    first, second = records(caplog)
    assert first["counters"] == {"StoreErrors": 1.0}
    assert second == {"counters": {}, "gauges": {"ActiveConnections": 3}, "timings": {}}


async def test_nothing_recorded_writes_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="wsfleet.metrics"):
        await JsonLogMetrics().flush()

    assert records(caplog) == []
