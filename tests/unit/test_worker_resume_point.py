"""The resume point from the worker's side, on virtual time and the in-memory parts: the prev
links the ingest writes are what let a new owner learn, from the sink alone, where a crashed
owner's stream stopped being stored whole (issue 12: no checkpoint written per heartbeat)."""

import pytest

from adapters.faults.sink import FaultInjectingSink, SinkFault
from adapters.memory.clock import FakeClock
from adapters.memory.sink import InMemoryMessageSink
from application.errors import SinkUnavailable
from application.ports.metrics import TAKEOVERS
from application.ports.sink import StoredMessage
from tests.support.fleet import Fleet

LOST_UPSTREAM = {13, 14, 15, 40}  # seqs the upstream never sends (forward jumps)


async def test_prev_links_reach_the_last_stored_seq_across_upstream_gaps(fleet: Fleet) -> None:
    """GIVEN a stream whose upstream skips seqs WHEN its worker crashes THEN the resume point
    walks from the start across the skips to the last seq it stored, and everything the
    upstream sent up to there is stored."""
    a = fleet.add_worker("a")
    url = await fleet.start("c1")
    fleet.upstream.stream(url).lost.update(LOST_UPSTREAM)
    await fleet.clock.run_until(lambda: fleet.owner_of("c1") == "a", 5)
    await fleet.clock.advance(7.5)
    await fleet.crash("a")

    stored = fleet.sink.seqs("c1")
    last = max(stored)
    assert last > max(LOST_UPSTREAM) + 20, "the stream went on well past the skips"
    assert stored == sorted(set(range(1, last + 1)) - LOST_UPSTREAM)
    assert await fleet.sink.resume_point("c1", 0) == last
    recorded = await fleet.store.get("c1")
    assert recorded is not None
    assert await fleet.sink.resume_point("c1", recorded.checkpoint_seq) == last
    assert a.sink.injected == 0


async def test_a_batch_half_written_when_its_worker_died_stops_the_resume_point() -> None:
    """GIVEN batches of 25 WHEN the sink stores every other message of one (as concurrent puts
    can leave it) and the worker dies before retrying THEN the resume point stops right before
    the first message missing, though later seqs are stored."""
    fleet = Fleet(rate_per_s=200)
    try:
        a = fleet.add_worker("a")
        await fleet.start_streamed_by("a", "c1")
        await fleet.clock.advance(1)
        a.sink.fail_next(3, SinkFault.PARTIAL)  # retries land the same half: the hole stays
        await fleet.clock.run_until(lambda: a.sink.injected >= 1, 5)
        await fleet.crash("a")

        stored = set(fleet.sink.seqs("c1"))
        point = await fleet.sink.resume_point("c1", 0)
        assert set(range(1, point + 1)) <= stored, "everything up to the point is stored"
        assert point + 1 not in stored, "it stops at the hole"
        assert max(stored) > point + 1, "stored seqs past the hole are not counted"
    finally:
        await fleet.close()


async def test_the_fault_injector_forwards_the_resume_point_and_fails_it_in_an_outage() -> None:
    inner = InMemoryMessageSink()
    sink = FaultInjectingSink(inner, FakeClock())
    await inner.write([StoredMessage("c1", seq, "m", 0, "w1", 1, seq - 1) for seq in (1, 2, 3)])

    sink.outage = True
    with pytest.raises(SinkUnavailable):
        await sink.resume_point("c1", 0)
    assert sink.injected == 1

    sink.outage = False
    assert await sink.resume_point("c1", 0) == 3


async def test_a_takeover_reached_through_a_hint_resumes_from_what_the_sink_stored(
    fleet: Fleet,
) -> None:
    """GIVEN a worker that crashed an hour's checkpoint short of what it stored WHEN another
    worker takes the connection over because a hint named it (its orphan scan never runs)
    THEN it resumes after the last message stored, not from the recorded checkpoint: whether
    an acquire was a takeover is the store's answer, not how the connection was found."""
    fleet.add_worker("a")
    url = await fleet.start_streamed_by("a", "c1")
    await fleet.clock.advance(5)
    await fleet.crash("a")
    last = max(fleet.sink.seqs("c1"))
    recorded = await fleet.store.get("c1")
    assert recorded is not None
    assert recorded.checkpoint_seq < last - 10

    b = fleet.add_worker("b")
    b.store.fail_next("iter_orphans", 10_000)  # found only through the hint below
    await fleet.clock.advance(fleet.config.lease_ms / 1000 + 1)  # a's session has expired
    await fleet.queue.send(["c1"])
    await fleet.clock.run_until(lambda: fleet.owner_of("c1") == "b", 10)

    opened = fleet.upstream.stream(url).opened_from()
    assert opened[-1] == last + 1
    assert b.metrics.counters[TAKEOVERS] == 1
