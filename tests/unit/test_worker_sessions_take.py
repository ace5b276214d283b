"""How Sessions takes a connection (application/worker/sessions.py: take_each, _take_if_room,
_room, _take, _held), on virtual time: one already held is never acquired again; a dead
owner's connection is taken by capacity alone, a hinted one only within this worker's share;
acquisitions in flight count toward capacity; a hint for a connection whose session is still
finishing is given back, not deleted; a clean handoff resumes without reading the sink; and
what a take reports (counters, the log line, the session task's name). Found unasserted by the
mutation run of sessions.py."""

import asyncio
import logging

import attrs
import pytest

from application.ports.metrics import ACQUISITION_CONFLICTS, LEASE_ACQUISITIONS
from domain import WorkerSession
from tests.support.fleet import Fleet, Member
from tests.support.queues import HintRounds

ACQUIRED = "lease acquired, resuming from seq"


def acquisitions(fleet: Fleet) -> int:
    return fleet.store.operations.get("Acquire", 0)


async def unhinted(fleet: Fleet, connection_id: str) -> str:
    """A STARTed connection whose hint never went out: no worker's poll takes it, and every
    scan leaves it to its hint for a heartbeat (loops.py), so only the test's take does."""
    url = f"ws://upstream.test/stream/{connection_id}"
    fleet.upstream.stream(url)
    await fleet.store.start(connection_id, url, fleet.clock.now_ms())
    return url


def with_a_worker_short_of_its_share(fleet: Fleet, member: Member) -> None:
    """This worker's view: one more live worker, holding nothing, that has reported since
    this one's last take. Above the level, this worker may take nothing more by its share."""
    now = fleet.clock.now_ms()
    empty = WorkerSession(
        "short",
        version=1,
        expires_at_ms=now + fleet.config.lease_ms,
        capacity=100,
        updated_at_ms=now,
    )
    member.worker.sessions.balance.observe([empty], now)


def count_resume_reads(member: Member) -> list[str]:
    """The connections whose resume point `member` asks its sink for, in order."""
    reads: list[str] = []
    read = member.sink.resume_point

    async def counting(connection_id: str, checkpoint_seq: int) -> int | None:
        reads.append(connection_id)
        return await read(connection_id, checkpoint_seq)

    member.sink.resume_point = counting  # type: ignore[method-assign]
    return reads


async def test_a_connection_held_here_is_not_acquired_again(fleet: Fleet) -> None:
    """A take for a connection this worker streams (a hint's duplicate, a scan racing the
    poll) is a no-op: no second acquisition, no second subscriber, and not given back."""
    a = fleet.add_worker("a")
    await fleet.start_streamed_by("a", "c1")
    before = acquisitions(fleet)

    for by_capacity in (False, True):
        assert await a.worker.sessions.take_each([("c1", by_capacity)]) == []

    assert acquisitions(fleet) == before
    assert [s.connection_id for s in a.worker.sessions] == ["c1"]
    assert a.metrics.counters[ACQUISITION_CONFLICTS] == 0


async def test_a_dead_owners_connection_is_taken_by_capacity_a_hinted_one_by_share(
    fleet: Fleet,
) -> None:
    """Above its share while another worker is short of its own, a worker leaves a hinted
    (or unowned) connection to that worker, but takes a dead worker's at once: those have
    been down for a lease already, and are balanced afterwards."""
    a = fleet.add_worker("a")
    for cid in ("c1", "c2", "c3", "c4"):
        await fleet.start_streamed_by("a", cid)
    await unhinted(fleet, "hinted")
    await unhinted(fleet, "orphan")
    sessions = a.worker.sessions
    # Set just before the takes, with no virtual time passing: the worker's own loops do not
    # read the fleet again meanwhile.
    with_a_worker_short_of_its_share(fleet, a)
    assert (sessions.free, sessions.capacity_free) == (0, 96)
    before = acquisitions(fleet)

    assert await sessions.take_each([("hinted", False)]) == ["hinted"]  # given back
    assert acquisitions(fleet) == before, "no acquire tried"
    # As the orphan scan asks for a connection whose owner's session it saw dead.
    assert await sessions.take_each([("orphan", True)]) == []

    assert "orphan" in sessions
    assert "hinted" not in sessions
    assert acquisitions(fleet) == before + 1


async def test_acquisitions_in_flight_count_toward_capacity(fleet: Fleet) -> None:
    """GIVEN a worker with room for one more, whose acquisitions the store answers late, WHEN
    three takes run at once (the poll and the scan do) THEN one acquires and the others are
    given back: never more in hand than max_connections."""
    a = fleet.add_worker("a", config=attrs.evolve(fleet.config, max_connections=2))
    await fleet.start_streamed_by("a", "c1")
    for cid in ("c2", "c3", "c4"):
        await unhinted(fleet, cid)
    a.store.stall_next("Acquire", 1.0, n=3)
    before = acquisitions(fleet)

    takes = [
        asyncio.ensure_future(a.worker.sessions.take_each([(cid, False)]))
        for cid in ("c2", "c3", "c4")
    ]
    await fleet.clock.run_until(lambda: all(t.done() for t in takes), 5)

    assert [t.result() for t in takes] == [[], ["c3"], ["c4"]]
    assert acquisitions(fleet) == before + 1
    assert sorted(s.connection_id for s in a.worker.sessions) == ["c1", "c2"]


async def test_a_restarts_hint_reaching_its_finishing_session_is_given_back_and_taken(
    fleet: Fleet,
) -> None:
    """GIVEN a connection STOPped, then STARTed again while its session is handing it back,
    WHEN the hand-back's hint reaches this worker's own poll before that session's task has
    ended THEN the hint is given back, not deleted, and the connection is streamed again
    within a heartbeat or two (deleted, it would wait for a full scan: a minute)."""
    # The first round alone, answered as on SQS: the session's task outlives its hint.
    rounds = HintRounds(fleet.queue, copies=False, clock=fleet.clock, answer_s=0.05)
    a = fleet.add_worker("a", queue=rounds)
    url = await fleet.start_streamed_by("a", "c1")
    (old,) = a.worker.sessions
    # A slow hand-back: the START lands meanwhile, and its hints (the first round and the copy
    # a second later) find the connection still held here.
    a.store.stall_next("Release", 2.0)

    await fleet.router.stop("c1")
    await fleet.clock.run_until(lambda: old.stopping, 5)
    await fleet.router.start("c1", url)
    await fleet.clock.run_until(lambda: old.handed_back, 5)
    await fleet.clock.advance(0.02)  # the poll has seen the hint; the task has not ended

    assert "c1" in a.worker.sessions, "its session is still finishing"
    assert not a.worker.sessions.holds("c1")
    assert len(fleet.queue) == 1, "the hand-back's hint was deleted by its own worker"
    took = await fleet.clock.run_until(
        lambda: fleet.owner_of("c1") == "a" and old not in a.worker.sessions, 5
    )
    assert took <= 3 * fleet.config.heartbeat_interval_s


async def test_a_clean_handoff_resumes_from_its_final_checkpoint_without_reading_the_sink(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    """A shutdown's release records the final checkpoint of everything written: the taker
    resumes after it without asking the sink (one read saved per handoff). A takeover after a
    crash reads it: the dead owner may have stored more."""
    caplog.set_level(logging.INFO, logger="application.worker.sessions")
    fleet.add_worker("a")
    await fleet.start_streamed_by("a", "c1")
    await fleet.clock.advance(2)
    b = fleet.add_worker("b")
    reads = count_resume_reads(b)

    await fleet.shutdown("a")
    await fleet.clock.run_until(lambda: fleet.owner_of("c1") == "b", 10)

    assert reads == []
    state = await fleet.store.get("c1")
    assert state is not None
    assert state.checkpoint_seq > 0
    (session,) = b.worker.sessions
    (record,) = [r for r in caplog.records if r.__dict__.get("token") == session.token]
    assert record.getMessage() == f"{ACQUIRED} {state.checkpoint_seq + 1}"
    assert record.__dict__["connection_id"] == "c1"

    c = fleet.add_worker("c")
    reads = count_resume_reads(c)
    await fleet.crash("b")
    await fleet.clock.run_until(lambda: fleet.owner_of("c1") == "c", 30)
    assert reads == ["c1"]


async def test_a_new_connections_take_is_counted_logged_and_its_task_named(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="application.worker.sessions")
    a = fleet.add_worker("a")
    await fleet.start_streamed_by("a", "c1")

    assert a.metrics.counters[LEASE_ACQUISITIONS] == 1
    (session,) = a.worker.sessions
    (record,) = [r for r in caplog.records if r.getMessage().startswith(ACQUIRED)]
    assert record.getMessage() == f"{ACQUIRED} 1"
    assert (record.__dict__["connection_id"], record.__dict__["token"]) == ("c1", session.token)
    assert [t for t in asyncio.all_tasks() if t.get_name() == "session:c1"]


async def test_an_acquire_another_worker_won_is_counted_as_a_conflict(fleet: Fleet) -> None:
    fleet.add_worker("a")
    await fleet.start_streamed_by("a", "c1")
    b = fleet.add_worker("b")

    assert await b.worker.sessions.take_each([("c1", False)]) == []

    assert b.metrics.counters[ACQUISITION_CONFLICTS] == 1
    assert b.metrics.counters[LEASE_ACQUISITIONS] == 0
    assert fleet.owner_of("c1") == "a"
