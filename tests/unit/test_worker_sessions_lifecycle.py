"""Sessions (application/worker/sessions.py), on virtual time: which session endings shrink the
take limit (only a lease this worker could not keep: take_limit.py), that cancel_all and a
shutdown's budget return normally, and only once every session they cancelled has finished,
and that the handed-off window ends at the giver's first try after it. Found unasserted by the
mutation run of sessions.py."""

import asyncio

from application.worker.session import ConnectionSession, SessionEnd
from tests.support.fleet import Fleet, Member
from tests.support.queues import HintRounds

# The limit as after three fast waves of acquisitions (1 -> 2 -> 4 -> 8). It is private state:
# no public call shows it short of timing the next wave of acquisitions, so it is set and read
# directly (Sessions._limit is the TakeLimit every take_each wave is sized by).
GROWN_LIMIT = 8


async def streaming_c1_with_a_grown_limit(fleet: Fleet) -> tuple[Member, ConnectionSession]:
    a = fleet.add_worker("a")
    await fleet.start_streamed_by("a", "c1")
    await fleet.clock.advance(1)
    a.worker.sessions._limit.current = GROWN_LIMIT
    (session,) = a.worker.sessions
    return a, session


async def test_a_session_fenced_by_lapsed_trust_resets_the_take_limit_to_one(
    fleet: Fleet,
) -> None:
    """A worker that cannot keep its leases must not take many more at once."""
    a, session = await streaming_c1_with_a_grown_limit(fleet)
    a.store.outage = True  # no heartbeat lands: trust lapses, the session fences itself

    await fleet.clock.run_until(lambda: len(a.worker.sessions) == 0, 30)

    assert (session.end, session.lease.taken_over) == (SessionEnd.LEASE_LOST, False)
    assert a.worker.sessions._limit.current == 1


async def test_a_lease_lost_to_a_newer_owner_leaves_the_take_limit_alone(fleet: Fleet) -> None:
    """Superseded says nothing about this worker's hold on its leases: no reason to slow down."""
    a, session = await streaming_c1_with_a_grown_limit(fleet)

    session.lease.lost("the sink holds a newer token")  # as the sink says it
    await fleet.clock.run_until(lambda: len(a.worker.sessions) == 0, 5)

    assert (session.end, session.lease.taken_over) == (SessionEnd.LEASE_LOST, True)
    # At least: c1, still named ours in the store, may be taken again in a fast wave.
    assert a.worker.sessions._limit.current >= GROWN_LIMIT


async def test_a_session_stopped_on_request_leaves_the_take_limit_alone(fleet: Fleet) -> None:
    a, session = await streaming_c1_with_a_grown_limit(fleet)

    await fleet.router.stop("c1")
    await fleet.clock.run_until(lambda: len(a.worker.sessions) == 0, 30)

    assert (session.end, session.lease.taken_over) == (SessionEnd.STOPPED, False)
    assert a.worker.sessions._limit.current == GROWN_LIMIT


async def test_cancelling_every_session_returns_normally_once_each_has_finished(
    fleet: Fleet,
) -> None:
    """The worker's last step (Worker.run's finally): a CancelledError of the sessions must not
    reach it, and it must not go on while a session still unwinds (a cancelled session closes
    its stream over a few loop turns)."""
    a = fleet.add_worker("a")
    for cid in ("c1", "c2"):
        await fleet.start_streamed_by("a", cid)
    sessions = a.worker.sessions

    async def cancel_then_look() -> tuple[int, list[str]]:
        await sessions.cancel_all()
        return len(sessions), fleet.streamed_by("a")  # at the very instant it returned

    cancelling = asyncio.create_task(cancel_then_look())
    await fleet.clock.run_until(cancelling.done, 1)

    assert not cancelling.cancelled(), "the sessions' cancellation reached the caller"
    assert cancelling.result() == (0, [])


async def test_a_shutdown_budget_returns_normally_once_the_sessions_it_cancelled_finished(
    fleet: Fleet,
) -> None:
    a = fleet.add_worker("a")
    await fleet.start_streamed_by("a", "c1")
    await fleet.clock.advance(1)
    a.store.stall_next("Release", 1_000.0)  # the hand-back never answers: cancelled at 2 s
    sessions = a.worker.sessions

    async def stop_then_look() -> int:
        await sessions.stop_all(SessionEnd.SHUTDOWN, budget_s=2.0)
        return len(sessions)  # at the very instant it returned

    stopping = asyncio.create_task(stop_then_look())
    await fleet.clock.run_until(stopping.done, 5)

    assert not stopping.cancelled(), "the late sessions' cancellation reached the caller"
    assert stopping.result() == 0


async def test_a_worker_whose_hand_backs_never_answer_still_shuts_down_normally(
    fleet: Fleet,
) -> None:
    a = fleet.add_worker("a")
    await fleet.start_streamed_by("a", "c1")
    await fleet.clock.advance(1)
    a.store.stall_next("Release", 1_000.0)

    await fleet.shutdown("a")

    assert not a.task.cancelled(), "the cancelled session's CancelledError ended the worker"
    assert a.task.exception() is None


async def test_the_giver_takes_back_a_handed_off_connection_at_its_first_try_after_the_window(
    fleet: Fleet,
) -> None:
    """The window ends for good: the first take after it succeeds, not only a later one (the
    poll loop tries twice in a row, which would hide it: this worker's hints are dropped)."""
    a = fleet.add_worker("a", queue=HintRounds(fleet.queue, first=False, copies=False))
    for cid in ("c1", "c2"):
        await fleet.start_streamed_by("a", cid)
    await fleet.clock.advance(1)
    sessions = a.worker.sessions
    [moving] = sessions.hand_off(1)
    (leaving,) = [s for s in sessions if s.connection_id == moving]
    # In steps of a millisecond: the window ends a lease after this instant, give or take one.
    await fleet.clock.run_until(lambda: leaving.handed_back, 5, step_s=0.001)
    lease_s = fleet.config.lease_ms / 1000

    await fleet.clock.advance(lease_s - 0.002)
    # By capacity (by_capacity): the share is not asked, only the window.
    assert await sessions.take_each([(moving, True)]) == [moving], "taken back within the window"
    await fleet.clock.advance(0.003)
    assert moving not in sessions, "a loop of the worker tried it first: the test proves nothing"
    assert await sessions.take_each([(moving, True)]) == []

    assert sessions.holds(moving)
