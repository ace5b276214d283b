"""Every way an owner hands a connection back records the final checkpoint (everything it
stored), not the one recorded last (hourly) or the one it resumed from: the next owner
resumes after it, so a stale one makes it fetch and store again what was stored, or log a
gap that is not one. And a lease lost to another owner writes nothing at all. On virtual
time; the store contract asserts the same of each store's release calls."""

from application.ports import StoredMessage
from application.ports.metrics import BALANCE_HANDOFFS
from domain import (
    NO_OWNER,
    Connection,
    DesiredState,
    LeaseReleased,
    LeaseTakenOver,
    StopReason,
    UpstreamFailed,
)
from tests.support.fleet import Fleet, Member

STREAMED_S = 3.0  # about 30 messages at the fleet's 10 a second


async def streaming_a_while(fleet: Fleet) -> tuple[Member, str]:
    """Worker a streams c1 for a few seconds: far more stored than its recorded checkpoint."""
    a = fleet.add_worker("a")
    url = await fleet.start_streamed_by("a", "c1")
    await fleet.clock.advance(STREAMED_S)
    recorded = await state_of(fleet)
    assert recorded.checkpoint_seq == 0, "no periodic record yet (one an hour)"
    assert len(fleet.sink.seqs("c1")) > 20
    return a, url


async def state_of(fleet: Fleet) -> Connection:
    state = await fleet.store.get("c1")
    assert state is not None
    return state


async def released(fleet: Fleet, owner: Member) -> Connection:
    """The state once `owner`'s session for c1 has ended (it hands back before it ends)."""
    await fleet.clock.run_until(lambda: "c1" not in owner.worker.sessions, 60)
    state = await state_of(fleet)
    assert state.owner == NO_OWNER
    return state


def assert_final(fleet: Fleet, url: str, state: Connection) -> None:
    """The checkpoint handed back is the last seq stored, and everything up to it is stored."""
    stored = fleet.sink.seqs("c1")
    assert state.checkpoint_seq == max(stored) > 20
    fleet.assert_sink_complete("c1", url, upto=state.checkpoint_seq)


async def test_a_shutdown_hands_back_the_final_checkpoint(fleet: Fleet) -> None:
    _, url = await streaming_a_while(fleet)

    await fleet.shutdown("a")

    state = await state_of(fleet)
    assert state.owner == NO_OWNER
    assert_final(fleet, url, state)


async def test_a_stop_hands_back_the_final_checkpoint(fleet: Fleet) -> None:
    a, url = await streaming_a_while(fleet)

    await fleet.router.stop("c1")
    state = await released(fleet, a)

    assert state.desired_state is DesiredState.STOPPED
    assert_final(fleet, url, state)


async def test_a_balancing_handoff_hands_back_the_final_checkpoint(fleet: Fleet) -> None:
    a, url = await streaming_a_while(fleet)

    assert a.worker.sessions.hand_off(1) == ["c1"]
    state = await released(fleet, a)

    assert a.metrics.counters[BALANCE_HANDOFFS] == 1
    assert state.desired_state is DesiredState.STARTED
    assert_final(fleet, url, state)


async def test_a_stream_that_ends_hands_back_its_final_checkpoint(fleet: Fleet) -> None:
    a = fleet.add_worker("a")
    url = await fleet.start("c1")
    fleet.upstream.stream(url).total = 30  # ends normally after 30 messages
    await fleet.clock.run_until(lambda: fleet.owner_of("c1") == "a", 5)

    state = await released(fleet, a)

    assert (state.desired_state, state.stop_reason) == (
        DesiredState.STOPPED,
        StopReason.STREAM_ENDED,
    )
    assert state.checkpoint_seq == 30
    assert_final(fleet, url, state)
    assert not a.task.done()


async def test_an_upstream_given_up_on_hands_back_its_final_checkpoint(fleet: Fleet) -> None:
    a, url = await streaming_a_while(fleet)
    stream = fleet.upstream.stream(url)
    stream.drop_after, stream.rejected = 0, True  # dropped, then refused on reconnecting

    state = await released(fleet, a)

    assert state.failures == 1
    assert isinstance((await fleet.store.history("c1"))[-2], UpstreamFailed)
    assert_final(fleet, url, state)


async def taken_behind_its_back(fleet: Fleet, owner: Member) -> Connection:
    """`owner`'s session is ended behind its back and session b#1 takes c1 over."""
    (session,) = owner.worker.sessions
    now = fleet.clock.now_ms()
    await fleet.store.end_session(session.lease.session_id, "reaped", now)
    await fleet.store.open_session("b#1", fleet.config.lease_ms, 10, now)
    taken = await fleet.store.try_acquire("c1", "b#1", now)
    assert taken is not None
    return taken


async def assert_untouched_since(fleet: Fleet, taken: Connection) -> None:
    assert await state_of(fleet) == taken
    history = await fleet.store.history("c1")
    assert isinstance(history[-1], LeaseTakenOver)
    assert not any(isinstance(e, LeaseReleased) for e in history)


async def test_a_lease_the_sink_shows_taken_over_is_ended_without_a_store_write(
    fleet: Fleet,
) -> None:
    """GIVEN an owner whose connection another session took over WHEN the sink refuses its
    next write (a newer token wrote that seq) THEN it ends the session without even trying a
    release: nothing of its own lands over the new owner's checkpoint."""
    a, _ = await streaming_a_while(fleet)
    await fleet.clock.advance(0.5)  # midway between two heartbeats (renewals at whole seconds)
    taken = await taken_behind_its_back(fleet, a)
    (session,) = a.worker.sessions
    next_seq = session.ingest.next_seq
    now = fleet.clock.now_ms()
    await fleet.sink.write(
        [
            StoredMessage("c1", seq, "b's", now, "b#1", taken.token, seq - 1)
            for seq in range(next_seq, next_seq + 20)
        ]
    )
    releases_before = fleet.store.operations.get("Release", 0)

    await fleet.clock.run_until(lambda: not a.worker.sessions, 0.4)

    assert session.lease.taken_over, "ended by the sink, before the next renew"
    assert fleet.store.operations.get("Release", 0) == releases_before
    await assert_untouched_since(fleet, taken)


async def test_a_lease_whose_session_was_ended_behind_its_back_writes_nothing(
    fleet: Fleet,
) -> None:
    """GIVEN an owner whose session was ended behind its back and whose connection another
    session took over WHEN it notices (its next renew is refused) THEN nothing it does lands:
    no release, no checkpoint of its own over the new owner's."""
    a, _ = await streaming_a_while(fleet)
    taken = await taken_behind_its_back(fleet, a)

    await fleet.clock.run_until(lambda: not a.worker.sessions, 10)

    await assert_untouched_since(fleet, taken)
