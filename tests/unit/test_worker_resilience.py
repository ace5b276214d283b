"""The improvements over the article, each shown by a behaviour that the article lacks."""

import asyncio
from collections.abc import Sequence

import pytest

from adapters.memory.queue import InMemoryNotificationQueue
from application.config import WorkerConfig
from application.ports import Clock
from application.ports.queue import Delivery, HintOrigin
from application.worker.session_keeper import worker_of
from domain import DesiredState, LeaseTakenOver, StreamEnded, UpstreamFailed
from tests.support.fleet import Fleet


async def test_worker_cut_off_from_the_store_self_fences_before_anyone_can_take_over(
    fleet: Fleet,
) -> None:
    a = fleet.add_worker("a")
    await fleet.start_streamed_by("a", "c1")
    fleet.add_worker("b")
    await fleet.clock.advance(3)

    a.store.outage = True  # "a" can reach the upstream but not the store
    session = await fleet.owner_session("c1")
    closed_after = await fleet.clock.run_until(lambda: fleet.owner_of("c1") is None, 30)
    closed_at_ms = fleet.clock.now_ms()

    assert closed_at_ms < session.expires_at_ms, "closed before the lease could be taken over"
    assert closed_after <= fleet.config.lease_ms / 1000
    await fleet.clock.run_until(lambda: fleet.owner_of("c1") == "b", 30)
    writes_by_a_after = [
        m
        for m in fleet.sink.messages.values()
        if worker_of(m.worker_id) == "a" and m.received_at_ms > closed_at_ms
    ]
    assert writes_by_a_after == []


async def test_a_renew_stuck_on_a_store_that_never_answers_is_abandoned_when_trust_ends(
    fleet: Fleet,
) -> None:
    a = fleet.add_worker("a")
    # A quiet stream: no message arrives to find the lease untrusted, only the heartbeat can.
    fleet.upstream.stream("ws://upstream.test/stream/c1").rate_per_s = 0.01
    await fleet.start_streamed_by("a", "c1")
    await fleet.clock.advance(3)
    renewed_at = fleet.clock.monotonic()

    a.store.severed = True  # every store call hangs: no answer, no error
    await fleet.clock.run_until(lambda: fleet.owner_of("c1") is None, 30)

    trusted_s = fleet.config.trusted_s
    heartbeat_s = fleet.config.heartbeat_interval_s
    # Closed once trust ran out, measured from a renew no later than the one before the
    # severing (heartbeats every 5 s): never after the lease could pass to another owner.
    assert fleet.clock.monotonic() <= renewed_at + trusted_s + 0.05
    assert fleet.clock.monotonic() >= renewed_at - heartbeat_s + trusted_s - 0.05
    assert a.metrics.counters.get("SelfFences", 0) >= 1


async def test_lost_renew_responses_and_outages_shorter_than_the_lease_keep_the_lease(
    fleet: Fleet,
) -> None:
    a = fleet.add_worker("a")
    fleet.add_worker("b")
    await fleet.start("c1")
    await fleet.clock.run_until(lambda: fleet.owner_of("c1") is not None, 5)
    owner = fleet.members[fleet.owner_of("c1") or ""]
    token = (await fleet.store.get("c1")).token  # type: ignore[union-attr]

    owner.store.fail_next("RenewSession", 2, applied=True)  # writes landed, answers lost
    await fleet.clock.advance(12)
    owner.store.outage = True
    # An outage well inside the time the session is trusted (lease - margin).
    await fleet.clock.advance(fleet.config.trusted_s / 2)
    owner.store.outage = False
    await fleet.clock.advance(20)

    state = await fleet.store.get("c1")
    assert state is not None
    assert state.token == token, "the lease was never lost or taken over"
    assert fleet.owner_of("c1") == owner.worker.worker_id
    assert owner.store.injected > 2
    del a


async def test_upstream_drops_are_retried_under_the_same_lease_resuming_without_gap(
    fleet: Fleet,
) -> None:
    fleet.add_worker("a")
    url = await fleet.start_streamed_by("a", "c1")
    stream = fleet.upstream.streams[url]
    stream.drop_after = 15  # every subscription drops after 15 messages
    await fleet.clock.advance(10)
    stream.drop_after = None
    await fleet.clock.advance(6)

    state = await fleet.store.get("c1")
    assert state is not None
    assert state.token == 1, "reconnects kept the lease"
    assert stream.opens >= 3
    checkpoint = await fleet.assert_checkpoint_stored("c1")
    fleet.assert_sink_complete("c1", url, upto=checkpoint)
    assert checkpoint >= 140


async def test_normal_end_of_stream_is_recorded_and_not_reconnected(fleet: Fleet) -> None:
    fleet.add_worker("a")
    url = await fleet.start("c1")
    fleet.upstream.streams[url].total = 30  # the meeting ends after 30 messages
    await fleet.clock.run_until(lambda: fleet.owner_of("c1") == "a", 5)

    await fleet.clock.advance(10)

    state = await fleet.store.get("c1")
    assert state is not None
    assert state.desired_state is DesiredState.STOPPED
    assert state.checkpoint_seq == 30
    assert any(isinstance(e, StreamEnded) for e in await fleet.store.history("c1"))
    assert fleet.upstream.streams[url].opens == 1
    fleet.assert_sink_complete("c1", url, upto=30)


async def test_poison_connection_backs_off_fleet_wide_instead_of_hot_looping(
    fleet: Fleet,
) -> None:
    for name in ("a", "b", "c"):
        fleet.add_worker(name)
    url = await fleet.start("bad")
    fleet.upstream.streams[url].rejected = True

    await fleet.clock.advance(120)

    stream = fleet.upstream.streams[url]
    failures = [e for e in await fleet.store.history("bad") if isinstance(e, UpstreamFailed)]
    assert failures, "the give-up is recorded"
    assert [e.failures for e in failures] == list(range(1, len(failures) + 1))
    # Back-off of 30 s doubling: at most a handful of attempts in two minutes, not hundreds.
    assert stream.opens <= 4
    state = await fleet.store.get("bad")
    assert state is not None
    assert state.not_before_ms > fleet.clock.now_ms() - 1


async def test_reconciliation_pages_through_every_orphan() -> None:
    fleet = Fleet(WorkerConfig(reconcile_page_size=2))
    try:
        for i in range(7):
            await fleet.start(f"c{i}")
        hints = await fleet.queue.receive(10, 0)
        assert len(hints) == 7, "every START hinted; all seven hints are taken away"
        await fleet.queue.delete([d.receipt for d in hints])
        fleet.add_worker("a")  # no hints left: only reconciliation can find them

        took = await fleet.clock.run_until(
            lambda: all(fleet.owner_of(f"c{i}") == "a" for i in range(7)), 90
        )

        assert took < 5
    finally:
        await fleet.close()


async def test_stops_are_checked_with_one_read_per_interval_whatever_the_worker_holds(
    fleet: Fleet,
) -> None:
    fleet.add_worker("a")
    for i in range(20):
        await fleet.start(f"c{i}")
    await fleet.clock.run_until(lambda: len(fleet.streamed_by("a")) == 20, 5)
    before = dict(fleet.store.operations)

    await fleet.clock.advance(fleet.config.desired_state_interval_s * 3)

    ops = {k: fleet.store.operations.get(k, 0) - before.get(k, 0) for k in fleet.store.operations}
    assert ops["stop_requested"] == 3
    assert ops.get("get", 0) == 0
    assert ops.get("Checkpoint", 0) == 0, "no per-connection write while streaming"
    assert ops["RenewSession"] == int(3 * fleet.config.desired_state_interval_s), "one a second"


async def test_graceful_handoff_does_not_wait_for_reconciliation() -> None:
    """Without the handoff hint the other worker would find the released connections only at
    its next reconciliation (up to a minute); with it, within a second."""
    fleet = Fleet(WorkerConfig(reconcile_interval_s=60))
    try:
        fleet.add_worker("a")
        url = await fleet.start_streamed_by("a", "c1")
        fleet.add_worker("b")
        await fleet.clock.advance(1)
        fleet.members["a"].worker.request_shutdown()

        took = await fleet.clock.run_until(lambda: fleet.owner_of("c1") == "b", 60)

        assert took < 1.0
        history = await fleet.store.history("c1")
        assert not any(isinstance(e, LeaseTakenOver) for e in history), "released, not expired"
        await fleet.clock.advance(2)
        state = await fleet.store.get("c1")
        assert state is not None
        fleet.assert_sink_complete("c1", url, upto=state.checkpoint_seq)
    finally:
        await fleet.close()


async def test_retried_start_does_not_reset_a_live_lease(fleet: Fleet) -> None:
    fleet.add_worker("a")
    url = await fleet.start_streamed_by("a", "c1")
    await fleet.clock.advance(6)
    before = await fleet.store.get("c1")

    outcome = await fleet.router.start("c1", url)

    assert outcome.changed is False
    assert await fleet.store.get("c1") == before


@pytest.mark.parametrize(
    ("owner_skew", "taker_skew"),
    [(-1, 0), (0, +1)],
    ids=["owner-clock-slow", "taker-clock-fast"],
)
async def test_clock_skew_within_the_budget_never_lets_two_workers_stream_at_once(
    fleet: Fleet, owner_skew: int, taker_skew: int
) -> None:
    """GIVEN one worker whose wall clock is off by nearly the self-fence margin (the skew
    budget of docs/decisions.md)
    WHEN the owner is cut off from the store and another worker waits to take over
    THEN the owner self-fences before the other can take over (the fixture's judge asserts
    at most one subscriber at every instant) and nothing is lost."""
    skew = fleet.config.self_fence_margin_ms * 9 // 10
    owner = fleet.add_worker("owner", skew_ms=owner_skew * skew)
    url = await fleet.start_streamed_by("owner", "c1")
    fleet.add_worker("taker", skew_ms=taker_skew * skew)
    await fleet.clock.advance(7)

    owner.store.outage = True
    await fleet.clock.run_until(lambda: fleet.owner_of("c1") == "taker", 60)
    owner.store.outage = False
    await fleet.clock.advance(5)

    state = await fleet.store.get("c1")
    assert state is not None
    assert worker_of(state.owner) == "taker"
    fleet.assert_sink_complete("c1", url, upto=await fleet.assert_checkpoint_stored("c1"))


async def test_a_gap_in_upstream_seqs_is_counted_not_hidden(fleet: Fleet) -> None:
    member = fleet.add_worker("a")
    url = await fleet.start("c1")
    fleet.upstream.streams[url].lost = {31, 32, 33}  # gone before anyone could read them
    await fleet.clock.run_until(lambda: fleet.owner_of("c1") == "a", 5)

    await fleet.clock.advance(6)

    assert member.metrics.counters["MessagesSkippedByUpstream"] == 3
    assert {31, 32, 33}.isdisjoint(fleet.sink.seqs("c1"))
    assert 34 in fleet.sink.seqs("c1")


class QueueWatch:
    """The worker's view of the queue, recording long polls abandoned mid-flight (on SQS such
    a poll can still catch a message on the server and hide it), receipts given back, and
    when each hint was sent (virtual seconds; the copies of application/hints.py, delayed or
    a shutdown's second round, are forwarded, not recorded)."""

    def __init__(self, inner: InMemoryNotificationQueue, clock: Clock) -> None:
        self._inner = inner
        self._clock = clock
        self.abandoned = 0
        self.released: list[str] = []
        self.sent: list[tuple[float, tuple[str, ...]]] = []

    async def send(
        self,
        connection_ids: Sequence[str],
        *,
        delay_s: int = 0,
        copy: bool = False,
        origin: HintOrigin | None = None,
    ) -> None:
        if not copy:
            self.sent.append((self._clock.monotonic(), tuple(connection_ids)))
        await self._inner.send(connection_ids, delay_s=delay_s, copy=copy, origin=origin)

    async def receive(self, max_messages: int, wait_s: float) -> Sequence[Delivery]:
        try:
            return await self._inner.receive(max_messages, wait_s)
        except asyncio.CancelledError:
            self.abandoned += 1
            raise

    async def release(self, receipts: Sequence[str]) -> None:
        self.released.extend(receipts)
        await self._inner.release(receipts)

    async def delete(self, receipts: Sequence[str]) -> None:
        await self._inner.delete(receipts)


async def test_shutdown_lets_the_last_long_poll_finish_and_gives_back_what_it_caught(
    fleet: Fleet,
) -> None:
    queue = QueueWatch(fleet.queue, fleet.clock)
    member = fleet.add_worker("a", queue=queue)
    await fleet.start_streamed_by("a", "c1")
    await fleet.clock.advance(1)

    await fleet.shutdown("a")

    assert queue.abandoned == 0
    assert len(queue.released) == 1, "its own poll caught the handoff hint and gave it back"
    hints = await fleet.queue.receive(10, 0)
    # The hint it gave back, and the second round it sent (application/hints.py).
    assert sorted((h.connection_id, h.copy) for h in hints) == [("c1", False), ("c1", True)]
    del member


async def test_a_hint_that_arrives_when_full_is_given_back_for_a_worker_with_room() -> None:
    """GIVEN a worker whose capacity fills while its long poll is out
    WHEN the poll returns a hint it cannot take
    THEN the hint is made visible again, not deleted, and another worker takes the connection
    at once (not at its next reconciliation)."""
    fleet = Fleet(WorkerConfig(max_connections=1, reconcile_interval_s=60, capacity_pause_s=0.2))
    try:
        full = fleet.add_worker("full")
        await fleet.start_streamed_by("full", "c1")
        spare = fleet.add_worker("spare")
        await fleet.clock.advance(1)
        # An acquire in flight (e.g. by reconciliation) fills the spare while it polls.
        spare.worker.sessions._acquiring.add("pretend")
        sent_before = fleet.queue.sent

        await fleet.start("c2")
        await fleet.clock.advance(0.05)
        spare.worker.sessions._acquiring.discard("pretend")
        took = await fleet.clock.run_until(lambda: fleet.owner_of("c2") == "spare", 30)

        # Before the START's delayed copy (1 s): taken through the hint given back, which was
        # not sent again.
        assert took < 1.0
        assert fleet.queue.sent == sent_before + 2  # the START's hint and its delayed copy
        del full
    finally:
        await fleet.close()


async def test_a_shutdown_hints_each_connection_as_it_is_released_not_after_the_slowest(
    fleet: Fleet,
) -> None:
    """GIVEN a worker holding four connections, one of whose releases is answered a second
    late WHEN it shuts down THEN the other three are hinted at once, not a second later with
    the slow one (the AWS fleet bench: a handoff's first hint waited for the last release)."""
    queue = QueueWatch(fleet.queue, fleet.clock)
    member = fleet.add_worker("a", queue=queue)
    for cid in ("c1", "c2", "c3", "c4"):
        await fleet.start_streamed_by("a", cid)
    await fleet.clock.advance(1)
    queue.sent.clear()  # the STARTs' own hints went through the router, not this view
    member.store.stall_next("Release", 1.0)
    began = fleet.clock.monotonic()

    await fleet.shutdown("a")

    assert sorted(cid for _, ids in queue.sent for cid in ids) == ["c1", "c2", "c3", "c4"]
    early = [cid for at, ids in queue.sent if at - began < 0.5 for cid in ids]
    assert len(early) == 3, queue.sent
