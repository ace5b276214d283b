"""Sink faults on virtual time: the sink down, slow, half-done, or done without saying so.

Whatever the sink does, one invariant holds after each fault, and during it: everything up to
the checkpoint stored with the lease is in the sink. A new owner resumes after that
checkpoint, so a hole below it is a message lost for good, silently.
"""

import pytest

from adapters.faults.sink import SinkFault
from application.worker.session_keeper import worker_of
from tests.support.fleet import Fleet


async def test_a_sink_outage_holds_every_checkpoint_back_and_loses_nothing(fleet: Fleet) -> None:
    """GIVEN a worker streaming c1 WHEN its sink is down across several heartbeats
    THEN no renew records a seq that was received but not stored, and once the sink is back
    everything received meanwhile is written."""
    a = fleet.add_worker("a")
    url = await fleet.start_streamed_by("a", "c1")
    await fleet.clock.advance(3)

    a.sink.outage = True
    stored = len(fleet.sink.seqs("c1"))
    for _ in range(16):  # three heartbeats, each renewing while messages keep arriving
        await fleet.clock.advance(1)
        await fleet.assert_checkpoint_stored("c1")
    [session] = a.worker.sessions
    received = session.ingest.next_seq - 1
    assert len(fleet.sink.seqs("c1")) == stored, "the outage stored nothing"
    assert received > stored + 100, "messages kept arriving while the sink was down"
    assert a.sink.injected > 3
    a.sink.outage = False
    await fleet.clock.advance(8)

    after = await fleet.assert_checkpoint_stored("c1")
    assert after >= received
    assert fleet.owner_of("c1") == "a", "a sink outage inside the lease costs no lease"
    fleet.assert_sink_complete("c1", url, upto=after)


@pytest.mark.parametrize("mode", list(SinkFault), ids=[m.value for m in SinkFault])
async def test_a_failed_batch_is_retried_whole_never_counted_as_written(
    fleet: Fleet, mode: SinkFault
) -> None:
    """GIVEN batches failing in each way a sink can fail (nothing stored, some items left
    unprocessed, all stored but the answer lost) WHEN the worker goes on THEN the failed
    batches are written again, the checkpoint never passes an unstored seq, and every seq is
    stored exactly once."""
    a = fleet.add_worker("a")
    url = await fleet.start_streamed_by("a", "c1")
    await fleet.clock.advance(2)

    a.sink.fail_next(3, mode)
    for _ in range(12):  # past two heartbeats: each records the checkpoint of its moment
        await fleet.clock.advance(1)
        await fleet.assert_checkpoint_stored("c1")

    assert (a.sink.injected, a.sink.planned) == (3, 0)
    checkpoint = await fleet.assert_checkpoint_stored("c1")
    assert checkpoint >= 60, "checkpoints moved on past the failed batches"
    fleet.assert_sink_complete("c1", url, upto=120)
    if mode is not SinkFault.UNAPPLIED:
        assert fleet.sink.rewrites > 0, "what landed before the failure was written again"


async def test_a_slow_sink_back_pressures_without_loss(fleet: Fleet) -> None:
    """GIVEN a sink slower than the flush interval (each write takes 2.5 of them) WHEN messages
    keep coming THEN batches grow instead of queueing up, and the checkpoint keeps up."""
    a = fleet.add_worker("a")
    url = await fleet.start_streamed_by("a", "c1")
    await fleet.clock.advance(2)
    writes_before = fleet.sink.writes

    a.sink.latency_s = fleet.config.ingest_flush_interval_s * 2.5
    for _ in range(12):
        await fleet.clock.advance(1)
        await fleet.assert_checkpoint_stored("c1")
    a.sink.latency_s = 0
    await fleet.clock.advance(6)

    writes = fleet.sink.writes - writes_before
    checkpoint = await fleet.assert_checkpoint_stored("c1")
    assert checkpoint >= 190
    fleet.assert_sink_complete("c1", url, upto=checkpoint)
    assert writes < 18 * 10 / 2, "fewer batches than messages: they filled while it was slow"


async def test_messages_dropped_when_trust_ends_do_not_advance_the_checkpoint(
    fleet: Fleet,
) -> None:
    """GIVEN a worker whose sink is down WHEN it shuts down THEN it keeps retrying only while
    its lease is trusted, drops the rest unwritten, and hands the connection back with the
    checkpoint of what it stored: the next owner resumes right after it and nothing is lost."""
    a = fleet.add_worker("a")
    url = await fleet.start_streamed_by("a", "c1")
    fleet.add_worker("b")
    await fleet.clock.advance(3)

    a.sink.outage = True
    await fleet.clock.advance(2)
    await fleet.shutdown("a")
    handed_back = await fleet.assert_checkpoint_stored("c1")
    await fleet.clock.run_until(lambda: fleet.owner_of("c1") == "b", 30)
    await fleet.clock.advance(6)

    state = await fleet.store.get("c1")
    assert state is not None
    assert worker_of(state.owner) == "b"
    assert state.checkpoint_seq == handed_back, "a handed back what it stored, no more"
    checkpoint = await fleet.assert_checkpoint_stored("c1")  # b's, as it streams
    assert checkpoint > handed_back + 30
    fleet.assert_sink_complete("c1", url, upto=checkpoint)
    assert a.sink.injected > 0
