"""A stream that ends normally while its worker's trust lapses in the drain (issue 17's sink
faults meet issue 12's trust rule): the messages still queued cannot be written once the
lease is not trusted, so the connection must not be ended with a checkpoint below them. It is
handed back still wanted instead, and a new owner resumes after the checkpoint, receives the
tail again from the upstream and ends the stream itself. Nothing is lost. And a hand-back the
store keeps failing is retried while the lease is trusted, not given up on."""

from domain import NO_OWNER, Connection, DesiredState
from tests.support.fleet import Fleet


async def ended(fleet: Fleet, connection_id: str, within_s: float) -> Connection:
    """Advance virtual time until the stream's end is recorded (STOPPED by its StreamEnded);
    the connection as stored then."""
    conn = None
    for _ in range(int(within_s * 10)):
        await fleet.clock.advance(0.1)
        conn = await fleet.store.get(connection_id)
        if conn is not None and conn.desired_state is DesiredState.STOPPED:
            return conn
    raise AssertionError(f"{connection_id}: no end recorded within {within_s}s: {conn}")


async def test_a_stream_ending_while_trust_lapses_in_the_drain_loses_nothing(
    fleet: Fleet,
) -> None:
    a = fleet.add_worker("a")
    url = await fleet.start_streamed_by("a", "c1")
    await fleet.clock.advance(2)
    stream = fleet.upstream.streams[url]

    # The sink stops taking writes; the stream ends five messages later; every renew from
    # now on is answered late (then correctly), so the session stays live in the store while
    # the worker's own trust in it lapses during the drain.
    a.sink.outage = True
    stream.total = stream.due(fleet.clock.monotonic()) + 5
    lease_s = fleet.config.lease_ms / 1000
    a.store.stall_next("RenewSession", 2 * lease_s, n=10)
    await fleet.clock.advance(lease_s)  # trust has lapsed; the drain could not write
    a.sink.outage = False
    fleet.add_worker("b")
    conn = await ended(fleet, "c1", within_s=30)
    assert conn.owner == NO_OWNER, conn
    assert conn.checkpoint_seq == stream.total, "ended with a checkpoint below the stream's end"
    fleet.assert_sink_complete("c1", url, upto=stream.total)


async def test_a_hand_back_the_store_keeps_failing_is_retried_until_it_lands(
    fleet: Fleet,
) -> None:
    """Given up on after three failed attempts, a hand-back left the connection held by the
    live session and streamed by nobody, for good (the soak: a balancing handoff's releases
    throttled three times). It is retried while the lease is trusted."""
    a = fleet.add_worker("a")
    url = await fleet.start_streamed_by("a", "c1")
    await fleet.clock.advance(2)
    stream = fleet.upstream.streams[url]
    stream.total = stream.due(fleet.clock.monotonic()) + 5
    a.store.fail_next("EndStream", 6)

    conn = await ended(fleet, "c1", within_s=10)
    assert conn.checkpoint_seq == stream.total
    fleet.assert_sink_complete("c1", url, upto=stream.total)
