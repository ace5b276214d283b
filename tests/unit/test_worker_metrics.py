"""What the worker's metrics say when storing stalls: the seconds it has held connections
without storing anything (the gauge infra/'s alarm watches) grow, and sink errors count; once
the sink recovers the gauge falls back to 0. A fleet on the in-memory adapters, virtual time."""

import attrs

from application.ports.metrics import (
    HANDOFF_LATENCY_MS,
    HANDOFF_WAIT_MS,
    HOLDING_WITHOUT_STORING_S,
    INGEST_LAG_MS,
    LEASE_RELEASES,
    LOOP_LAG_MS,
    MESSAGES_RECEIVED,
    RENEW_LATENCY_MS,
    SINK_ERRORS,
)
from domain import LeaseAcquired, LeaseReleased
from tests.support.fleet import DEFAULT_CONFIG, Fleet

CONFIG = attrs.evolve(DEFAULT_CONFIG, metrics_interval_s=5.0)


async def test_a_stalled_sink_shows_as_seconds_holding_without_storing(fleet: Fleet) -> None:
    member = fleet.add_worker("w1", CONFIG)
    metrics = member.metrics
    await fleet.start_streamed_by("w1", "a")
    await fleet.clock.advance(12)
    assert metrics.gauges[HOLDING_WITHOUT_STORING_S] == 0
    assert metrics.counters[MESSAGES_RECEIVED] > 0
    assert metrics.timings[INGEST_LAG_MS]
    assert metrics.timings[RENEW_LATENCY_MS]
    assert metrics.timings[LOOP_LAG_MS]

    fleet.sink.fail_next(1_000_000)
    await fleet.clock.advance(31)
    assert metrics.gauges[HOLDING_WITHOUT_STORING_S] >= 20
    assert metrics.counters[SINK_ERRORS] > 0

    fleet.sink.stop_failing()
    await fleet.clock.advance(12)
    assert metrics.gauges[HOLDING_WITHOUT_STORING_S] == 0


async def test_a_worker_holding_nothing_reports_zero(fleet: Fleet) -> None:
    member = fleet.add_worker("w1", CONFIG)
    await fleet.clock.advance(30)
    assert member.metrics.gauges[HOLDING_WITHOUT_STORING_S] == 0


async def test_a_stop_counts_a_release(fleet: Fleet) -> None:
    member = fleet.add_worker("w1", CONFIG)
    await fleet.start_streamed_by("w1", "a")
    await fleet.router.stop("a")
    await fleet.clock.run_until(lambda: fleet.owner_of("a") is None, 30)
    await fleet.clock.advance(1)
    assert member.metrics.counters[LEASE_RELEASES] == 1


async def test_a_graceful_shutdown_records_each_connections_handoff_latency(fleet: Fleet) -> None:
    """One HandoffLatencyMs per connection handed over: from the stop request to its release
    hinted to the fleet, within the shutdown's duration."""
    member = fleet.add_worker("w1", CONFIG)
    for cid in ("a", "b"):
        await fleet.start_streamed_by("w1", cid)

    took_s = await fleet.shutdown("w1")

    latencies = member.metrics.timings[HANDOFF_LATENCY_MS]
    assert len(latencies) == 2
    assert all(0 <= ms <= took_s * 1000 for ms in latencies), (latencies, took_s)


async def test_the_acquiring_side_of_a_handoff_records_how_long_each_connection_was_free(
    fleet: Fleet,
) -> None:
    """GIVEN w1 streaming two connections and w2 idle WHEN w1 shuts down THEN w2 records one
    HandoffWaitMs per connection, the time from its release (as the store logged it) to w2's
    acquire; its first leases of the same connections (a START, not a handoff) record none."""
    fleet.add_worker("w1", CONFIG)
    for cid in ("a", "b"):
        await fleet.start_streamed_by("w1", cid)
    taker = fleet.add_worker("w2", CONFIG)
    await fleet.clock.advance(1)
    assert HANDOFF_WAIT_MS not in taker.metrics.timings

    await fleet.shutdown("w1")
    await fleet.clock.run_until(lambda: fleet.owner_of("a") == fleet.owner_of("b") == "w2", 30)

    waits = sorted(taker.metrics.timings[HANDOFF_WAIT_MS])
    expected = []
    for cid in ("a", "b"):
        history = await fleet.store.history(cid)
        released, acquired = history[-2:]
        assert isinstance(released, LeaseReleased)
        assert isinstance(acquired, LeaseAcquired)
        expected.append(acquired.at_ms - released.at_ms)
    assert waits == sorted(expected)


async def test_messages_received_is_a_running_total_published_at_each_flush(fleet: Fleet) -> None:
    """The received count is read where it is published (no metrics call per message): after
    a flush, the counter holds exactly what the sessions received."""
    member = fleet.add_worker("w1", CONFIG)
    await fleet.start_streamed_by("w1", "a")
    await fleet.clock.advance(12)

    await member.metrics.flush()

    assert member.metrics.counters[MESSAGES_RECEIVED] == member.worker.ingest.received > 0
