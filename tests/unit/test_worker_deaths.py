"""WorkerDeaths: a known death ends the worker's live sessions and hints what they own.
In-memory store and queue, fake clock."""

import asyncio
from collections.abc import Awaitable, Sequence
from typing import TypeVar

import attrs
import pytest

from adapters.faults.store import FaultInjectingStore
from adapters.memory.clock import FakeClock
from adapters.memory.queue import InMemoryNotificationQueue
from adapters.memory.store import InMemoryConnectionStore
from application.deaths import WorkerDeaths
from application.errors import QueueUnavailable, StoreUnavailable
from application.ports import Delivery, HintOrigin
from domain import InvalidCommand, SessionEnded, SessionOpened
from tests.support.fleet import Fleet

T = TypeVar("T")
LEASE = 30_000
URL = "wss://feeds.example.com/s"


class DeadQueue:
    async def send(
        self,
        connection_ids: Sequence[str],
        *,
        delay_s: int = 0,
        copy: bool = False,
        origin: HintOrigin | None = None,
    ) -> None:
        raise QueueUnavailable("queue endpoint timed out")

    async def receive(self, max_messages: int, wait_s: float) -> Sequence[Delivery]:
        raise QueueUnavailable("queue endpoint timed out")

    async def release(self, receipts: Sequence[str]) -> None:
        raise QueueUnavailable("queue endpoint timed out")

    async def delete(self, receipts: Sequence[str]) -> None:
        raise QueueUnavailable("queue endpoint timed out")


class Setup:
    def __init__(self) -> None:
        self.clock = FakeClock()
        self.store = InMemoryConnectionStore()
        self.queue = InMemoryNotificationQueue(self.clock)
        self.deaths = WorkerDeaths(self.store, self.queue, self.clock)

    async def holding(self, session_id: str, *connection_ids: str) -> None:
        now = self.clock.now_ms()
        if await self.store.get_session(session_id) is None:
            await self.store.open_session(session_id, LEASE, 10, now)
        for cid in connection_ids:
            await self.store.start(cid, URL, now)
            assert await self.store.try_acquire(cid, session_id, now) is not None

    async def report(self, call: Awaitable[T]) -> T:
        """Run a report to its end, moving the fake clock (the second round of hints waits)."""
        task = asyncio.ensure_future(call)
        await self.clock.run_until(task.done, 5)
        return task.result()

    async def hints(self) -> list[str]:
        return sorted(
            str(d.connection_id) for d in await self.queue.receive(max_messages=10, wait_s=0)
        )

    async def live(self, session_id: str) -> bool:
        session = await self.store.get_session(session_id)
        return session is not None and session.is_live(self.clock.now_ms())


@pytest.fixture
def app() -> Setup:
    return Setup()


async def test_a_dead_worker_s_live_sessions_end_and_its_connections_are_hinted(
    app: Setup,
) -> None:
    await app.holding("host-0badcafe#1", "a", "b")
    await app.holding("host-0badcafe#2", "c")
    await app.holding("host-0badcafe2#1", "other")  # another worker, a prefix of whose id matches
    await app.holding("host-1234abcd#1", "theirs")

    outcome = await app.report(app.deaths.worker_died("host-0badcafe", "reaped by wsfleet fleet"))

    assert outcome.ended == ("host-0badcafe#1", "host-0badcafe#2")
    assert sorted(outcome.hinted) == ["a", "b", "c"]
    assert await app.hints() == ["a", "a", "b", "b", "c", "c"]  # two rounds
    assert not await app.live("host-0badcafe#1")
    assert not await app.live("host-0badcafe#2")
    assert await app.live("host-0badcafe2#1")
    assert await app.live("host-1234abcd#1")
    history = await app.store.session_history("host-0badcafe#1")
    assert [type(e) for e in history] == [SessionOpened, SessionEnded]
    # A survivor takes an orphan at once, long before the 30 s lease would have run out.
    await app.store.open_session("survivor#1", LEASE, 10, app.clock.now_ms())
    assert await app.store.try_acquire("a", "survivor#1", app.clock.now_ms()) is not None


async def test_each_hint_names_the_dead_session_that_held_it(app: Setup) -> None:
    # A taker places a dead session's connections by share (application/worker/loops.py,
    # `_take_hinted`): it must know which session a hinted connection was left by.
    await app.holding("w-0badcafe#1", "a", "b")
    await app.holding("w-0badcafe#2", "c")

    await app.report(app.deaths.worker_died("w-0badcafe", "reaped"))

    received = await app.queue.receive(max_messages=10, wait_s=0)
    named = sorted((str(d.connection_id), d.origin) for d in received)
    first, second = HintOrigin("w-0badcafe#1"), HintOrigin("w-0badcafe#2")
    assert named == [*[("a", first)] * 2, *[("b", first)] * 2, *[("c", second)] * 2]


async def test_repeating_a_report_writes_nothing_but_hints_what_is_still_owned(
    app: Setup,
) -> None:
    await app.holding("w-0badcafe#1", "a", "b")
    first = await app.report(app.deaths.worker_died("w-0badcafe", "first"))
    await app.hints()
    await app.store.open_session("survivor#1", LEASE, 10, app.clock.now_ms())
    assert await app.store.try_acquire("a", "survivor#1", app.clock.now_ms()) is not None
    versions = (await app.store.get_session("w-0badcafe#1")).version  # type: ignore[union-attr]

    again = await app.report(app.deaths.worker_died("w-0badcafe", "second"))

    assert first.ended == ("w-0badcafe#1",)
    assert again.ended == ()
    assert again.sessions == ("w-0badcafe#1",)
    assert again.hinted == ("b",)  # "a" has a new owner
    assert await app.hints() == ["b", "b"]
    session = await app.store.get_session("w-0badcafe#1")
    assert session is not None
    assert session.version == versions
    assert session.ended_reason == "first"


async def test_an_expired_session_is_left_alone(app: Setup) -> None:
    await app.holding("w-0badcafe#1", "a")
    await app.clock.advance(LEASE / 1000 + 0.01, step_s=1.0)

    outcome = await app.report(app.deaths.worker_died("w-0badcafe", "late"))

    assert outcome.ended == ()
    session = await app.store.get_session("w-0badcafe#1")
    assert session is not None
    assert session.ended_reason is None  # not written
    assert outcome.hinted == ("a",)  # still an orphan owned by it: hinted


async def test_an_unknown_worker_changes_nothing(app: Setup) -> None:
    await app.holding("w-0badcafe#1", "a")

    outcome = await app.report(app.deaths.worker_died("nobody-00000000", "gone"))

    assert outcome == type(outcome)((), (), ())
    assert await app.live("w-0badcafe#1")
    assert await app.hints() == []


async def test_a_task_s_sessions_are_found_by_its_task_id(app: Setup) -> None:
    task = "0123456789abcdef0123456789abcdef"
    await app.holding(f"{task}-0badcafe#1", "a")
    await app.holding(f"{task}-1234abcd#1", "b")  # the container restarted in the same task
    await app.holding(f"{task}x-1234abcd#1", "c")  # not this task
    await app.holding(f"{task}-notahexx#1", "d")  # not a worker id of this task

    outcome = await app.report(app.deaths.task_died(task, "ECS task STOPPED"))

    assert outcome.ended == (f"{task}-0badcafe#1", f"{task}-1234abcd#1")
    assert await app.hints() == ["a", "a", "b", "b"]


async def test_one_session_can_be_ended(app: Setup) -> None:
    await app.holding("w-0badcafe#1", "a")
    await app.holding("w-0badcafe#2", "b")

    outcome = await app.report(app.deaths.session_died("w-0badcafe#2", "operator"))

    assert outcome.ended == ("w-0badcafe#2",)
    assert await app.live("w-0badcafe#1")
    assert await app.hints() == ["b", "b"]


async def test_a_queue_outage_still_ends_the_sessions_and_says_so(app: Setup) -> None:
    deaths = WorkerDeaths(app.store, DeadQueue(), app.clock)
    await app.holding("w-0badcafe#1", "a")

    outcome = await app.report(deaths.worker_died("w-0badcafe", "reaped"))

    assert outcome.ended == ("w-0badcafe#1",)
    assert outcome.hints_failed
    assert not await app.live("w-0badcafe#1")


@pytest.mark.parametrize("bad", ["", "a\nb", "x" * 300])
async def test_a_bad_worker_id_is_refused_and_changes_nothing(app: Setup, bad: str) -> None:
    await app.holding("w-0badcafe#1", "a")

    with pytest.raises(InvalidCommand):
        await app.deaths.worker_died(bad, "x")
    with pytest.raises(InvalidCommand):
        await app.deaths.task_died(bad, "x")

    assert await app.live("w-0badcafe#1")
    assert await app.hints() == []


async def test_a_reported_crash_moves_its_connections_at_once_resuming_after_what_is_stored(
    fleet: Fleet,
) -> None:
    """A crash reported at once (the supervisor reaped it): its connections move through the
    hints well inside the 30 s lease, and each new owner resumes after what the sink stored,
    not from the store's (hourly) checkpoint: nothing is received or written twice."""
    for name in ("w1", "w2", "w3"):
        fleet.add_worker(name, attrs.evolve(fleet.config, lease_ms=30_000))
    urls = {f"c{i}": await fleet.start(f"c{i}") for i in range(9)}
    await fleet.clock.run_until(lambda: all(fleet.owner_of(c) for c in urls), 5)
    await fleet.clock.advance(5)
    victim = max(fleet.members, key=lambda n: len(fleet.streamed_by(n)))
    moved = fleet.streamed_by(victim)

    await fleet.crash(victim)
    report = asyncio.ensure_future(
        WorkerDeaths(fleet.store, fleet.queue, fleet.clock).worker_died(victim, "reaped")
    )
    await fleet.clock.run_until(report.done, 5)
    took = await fleet.clock.run_until(lambda: all(fleet.owner_of(c) for c in moved), 20)

    assert took < 2.0  # the hints, not the lease (30 s) nor a reconciliation pass
    await fleet.clock.advance(3)
    for cid in moved:
        stream = fleet.upstream.streams[urls[cid]]
        resumed_from = stream.log[-1][2]
        assert resumed_from > 1, f"{cid} replayed from the start"
        fleet.assert_sink_complete(cid, urls[cid], upto=max(fleet.sink.seqs(cid)))
    assert fleet.sink.rewrites == 0


async def test_hints_swallowed_by_the_dead_worker_s_poll_in_flight_are_sent_again(
    app: Setup,
) -> None:
    """A worker killed during a long poll leaves that receive open on a remote queue (SQS hands
    messages to an abandoned poll; moto does too): the first hints after its death may go to
    it and stay invisible for a visibility timeout. So every hint is sent a second time once
    that poll has had its batch."""
    await app.holding("w-0badcafe#1", "a", "b", "c")
    abandoned = asyncio.create_task(app.queue.receive(max_messages=2, wait_s=20))
    await asyncio.sleep(0)

    report = asyncio.create_task(app.deaths.worker_died("w-0badcafe", "reaped"))
    await app.clock.run_until(report.done, 5)

    swallowed = sorted(str(d.connection_id) for d in await abandoned)
    assert len(swallowed) == 2
    assert set(await app.hints()) == {"a", "b", "c"}  # each reaches a live worker


async def test_a_failed_read_of_what_a_session_owns_is_raised_as_the_store_s_error(
    app: Setup,
) -> None:
    """The reads of what each session owns run side by side; one that fails is raised as
    StoreUnavailable (what every caller handles), after the others have ended, and nothing is
    hinted: a retry of the report starts again."""
    store = FaultInjectingStore(app.store, app.clock)
    deaths = WorkerDeaths(store, app.queue, app.clock)
    await app.holding("w-0badcafe#1", "a")
    await app.holding("w-0badcafe#2", "b")
    store.fail_next("owned_by")

    with pytest.raises(StoreUnavailable):
        await app.report(deaths.worker_died("w-0badcafe", "reaped"))

    assert await app.hints() == []
    outcome = await app.report(deaths.worker_died("w-0badcafe", "reaped"))
    assert sorted(outcome.hinted) == ["a", "b"]
