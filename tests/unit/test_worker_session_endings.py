"""How a ConnectionSession ends (application/worker/session.py), on virtual time: a stop asked
during a balancing handoff's wait for the sink, a resumed stream's held first message, a drain
cut short by the fence, a stream ending with its last message unstored, a STOP undone by a
START while the session ends, the giver's own handoff copy arriving after it finished, and
the hand-back's retry schedule. Found unasserted by the mutation run of session.py."""

import itertools
import logging
from collections.abc import Iterator

import pytest

from application.worker.session import ConnectionSession, SessionEnd
from domain import NO_OWNER, DesiredState
from tests.support.fleet import Fleet, Member
from tests.support.queues import HintRounds

HELD_WARNING = (
    "a resumed stream's first message, without a seq, is not stored: the session ended "
    "before the stream said whether it numbers its messages"
)


def only_session(member: Member) -> ConnectionSession:
    (session,) = member.worker.sessions
    return session


class HandBackAttempts(logging.Handler):
    """The failed hand-back attempts a session logs, with the virtual time of each."""

    def __init__(self, fleet: Fleet) -> None:
        super().__init__(logging.WARNING)
        self._fleet = fleet
        self.seen: list[tuple[float, str, object]] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("hand-back attempt"):
            when = self._fleet.clock.monotonic()
            self.seen.append((when, message, record.__dict__.get("connection_id")))


@pytest.fixture
def attempts(fleet: Fleet) -> Iterator[HandBackAttempts]:
    handler = HandBackAttempts(fleet)
    logger = logging.getLogger("application.worker.session")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


async def test_a_stop_during_a_balancing_handoffs_wait_for_the_sink_ends_it_as_stopped(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    """A handoff waits, still streaming, until what it received is stored; a STOP asked
    meanwhile ends the wait and is the session's end (it must not be handed on as wanted)."""
    caplog.set_level(logging.INFO, logger="application.worker.session")
    a = fleet.add_worker("a")
    await fleet.start_streamed_by("a", "c1")
    await fleet.clock.advance(1)
    a.sink.latency_s = 30.0  # the handoff would wait half a minute for the sink
    await fleet.clock.advance(0.5)
    session = only_session(a)
    assert a.worker.sessions.hand_off(1) == ["c1"]
    await fleet.clock.advance(0.5)
    assert session.end is None, "still waiting for the sink"

    a.worker.sessions.stop("c1", SessionEnd.STOPPED)
    await fleet.clock.run_until(lambda: session.end is not None, 120)

    assert session.end is SessionEnd.STOPPED
    assert HELD_WARNING not in caplog.messages  # nothing was held


async def test_a_resumed_streams_held_first_message_is_reported_when_the_session_ends_first(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    """A resumed stream's first message without a seq waits for the next to say whether the
    stream numbers its messages; if the session ends first, the message is not stored, and
    that is said (never a silent loss)."""
    caplog.set_level(logging.INFO, logger="application.worker.session")
    fleet.add_worker("a")
    url = await fleet.start_streamed_by("a", "plain")
    stream = fleet.upstream.streams[url]
    stream.numbered = False
    await fleet.clock.advance(1)
    await fleet.shutdown("a")
    checkpoint = (await fleet.store.get("plain") or pytest.fail("gone")).checkpoint_seq
    stream.lost.update(range(checkpoint + 2, checkpoint + 100_000))  # one message, then none
    b = fleet.add_worker("b")
    await fleet.clock.run_until(lambda: fleet.owner_of("plain") == "b", 5)
    await fleet.clock.advance(1)
    session = only_session(b)

    b.worker.sessions.stop("plain", SessionEnd.STOPPED)
    await fleet.clock.run_until(lambda: session.end is not None, 10)

    (record,) = [r for r in caplog.records if r.getMessage() == HELD_WARNING]
    assert record.levelno == logging.WARNING
    assert record.__dict__["connection_id"] == "plain"
    assert fleet.sink.seqs("plain") == list(range(1, checkpoint + 1))


async def test_writes_pending_when_trust_lapses_end_the_session_and_not_the_worker(
    fleet: Fleet,
) -> None:
    """Once the worker's session is no longer trusted nothing more is written: writes still
    pending when trust lapses end the session as lease lost, not as a failure."""
    a = fleet.add_worker("a")
    await fleet.start_streamed_by("a", "c1")
    await fleet.clock.advance(1)
    session = only_session(a)
    a.sink.latency_s = 5.0  # messages stay pending...
    await fleet.clock.advance(0.5)
    a.store.outage = True  # ...while the store goes away: the trust lapses

    await fleet.clock.run_until(lambda: session.end is not None, 60)

    assert session.end is SessionEnd.LEASE_LOST
    assert not a.task.done(), "the worker must live on"


async def test_a_stream_ending_with_only_its_last_message_unstored_is_not_ended_there() -> None:
    """One message short is short: ending the stream at that checkpoint would lose it. It is
    handed back still wanted, hinted, and a worker already running resumes it and ends it."""
    fleet = Fleet(rate_per_s=1.0)  # a message a second: the writer stores each before the next
    try:
        await _last_message_unstored(fleet)
    finally:
        await fleet.close()


async def _last_message_unstored(fleet: Fleet) -> None:
    a = fleet.add_worker("a")
    url = await fleet.start_streamed_by("a", "c1")
    fleet.add_worker("b")
    await fleet.clock.advance(5)  # b's first full scan is behind it: only a hint moves c1
    stream = fleet.upstream.streams[url]
    session = only_session(a)

    def settled() -> bool:
        now = fleet.clock.monotonic()
        return (now - stream.started_at_s) % 1.0 >= 0.5 and (
            session.ingest.checkpoint == stream.due(now)
        )

    await fleet.clock.run_until(settled, 5)
    # Everything received is stored; one more message comes, the last, and cannot be stored;
    # the worker's trust lapses in the drain.
    stream.total = stream.due(fleet.clock.monotonic()) + 1
    a.sink.outage = True
    lease_s = fleet.config.lease_ms / 1000
    a.store.stall_next("RenewSession", 2 * lease_s, n=10)
    await fleet.clock.run_until(lambda: session.end is not None, 2 * lease_s)
    a.sink.outage = False
    assert session.end is SessionEnd.LEASE_LOST
    assert session.ingest.checkpoint == stream.total - 1, "exactly the last message unstored"

    conn = None
    for _ in range(100):  # well within the 60 s full scan
        await fleet.clock.advance(0.1)
        conn = await fleet.store.get("c1")
        if conn is not None and conn.desired_state is DesiredState.STOPPED:
            break
    assert conn is not None
    assert conn.desired_state is DesiredState.STOPPED, conn
    assert conn.checkpoint_seq == stream.total, "ended with a checkpoint below the stream's end"
    fleet.assert_sink_complete("c1", url, upto=stream.total)


async def test_a_stop_undone_by_a_start_while_the_session_ends_is_hinted_and_a_plain_stop_not(
    fleet: Fleet,
) -> None:
    a = fleet.add_worker("a")
    await fleet.start_streamed_by("a", "c1")
    await fleet.start_streamed_by("a", "c2")
    fleet.add_worker("b")
    await fleet.clock.advance(5)  # b's first full scan is behind it

    # A plain STOP: the connection wants no owner, so no hint.
    sent = fleet.queue.sent
    await fleet.store.stop("c2", fleet.clock.now_ms())
    await fleet.clock.run_until(lambda: fleet.owner_of("c2") is None, 5)
    await fleet.clock.advance(1)
    assert fleet.queue.sent == sent

    # A STOP, then a START (straight to the store: no hint of its own) while the session
    # drains into a slow sink: handed back STOPPED but wanted again, so hinted.
    a.sink.latency_s = 2.0
    await fleet.store.stop("c1", fleet.clock.now_ms())
    session = only_session(a)  # c2's has ended
    await fleet.clock.run_until(lambda: session.stopping, 5)
    await fleet.store.start("c1", "ws://upstream.test/stream/c1", fleet.clock.now_ms())
    await fleet.clock.run_until(lambda: session.end is not None, 10)
    assert session.end is SessionEnd.STOPPED

    await fleet.clock.run_until(lambda: fleet.owner_of("c1") is not None, 5)  # not a scan


async def test_the_givers_own_late_copy_of_a_handoff_hint_is_given_back_for_another(
    fleet: Fleet,
) -> None:
    """The giver's poll receives its handoff's delayed copy after the session has finished
    (its first round lost): handed off lately, it is given back, not taken again."""
    giver = fleet.add_worker("giver", queue=HintRounds(fleet.queue, first=False))
    for cid in ("c1", "c2"):
        await fleet.start_streamed_by("giver", cid)
    await fleet.clock.advance(1)

    [moving] = giver.worker.sessions.hand_off(1)
    await fleet.clock.advance(3)  # the copy landed 1 s after the hand-back; the giver saw it

    assert fleet.owner_of(moving) is None, "the giver took back what it had just handed off"
    assert len(fleet.queue) == 1
    fleet.add_worker("taker")
    await fleet.clock.run_until(lambda: fleet.owner_of(moving) == "taker", 2)


async def test_a_hand_back_refused_by_an_unreachable_store_is_retried_on_a_growing_schedule(
    fleet: Fleet, attempts: HandBackAttempts
) -> None:
    """While the lease is trusted a failed hand-back is retried, 0.1 s more apart each time
    up to a second."""
    a = fleet.add_worker("a")
    await fleet.start_streamed_by("a", "c1")
    await fleet.clock.advance(1)
    session = only_session(a)
    a.store.fail_next("Release", 12)

    a.worker.sessions.stop("c1", SessionEnd.STOPPED)
    await fleet.clock.run_until(lambda: session.end is not None, 20)

    assert [message for _, message, _ in attempts.seen] == [
        f"hand-back attempt {n} failed: injected failure (Release)" for n in range(1, 13)
    ]
    assert {cid for _, _, cid in attempts.seen} == {"c1"}
    times = [at for at, _, _ in attempts.seen]
    gaps = [round(later - at, 3) for at, later in itertools.pairwise(times)]
    assert gaps == [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.0]


async def test_a_hand_back_is_given_up_after_three_attempts_once_the_lease_is_not_trusted(
    fleet: Fleet, attempts: HandBackAttempts
) -> None:
    """Untrusted, the session's end makes the connection an orphan anyway: three attempts."""
    a = fleet.add_worker("a")
    await fleet.start_streamed_by("a", "c1")
    await fleet.clock.advance(1)
    session = only_session(a)
    a.store.outage = True

    await fleet.clock.run_until(lambda: session.end is not None, 30)
    await fleet.clock.advance(5)

    assert len(attempts.seen) == 3
    assert session.end is SessionEnd.LEASE_LOST
    assert (await fleet.store.get("c1") or pytest.fail("gone")).owner != NO_OWNER


async def test_a_balancing_handoff_under_steady_inflow_waits_only_for_what_it_had_received(
    fleet: Fleet,
) -> None:
    """The handoff waits until what was received when it was asked is stored, not until
    nothing is pending: under a steady inflow into a slow sink there always is something."""
    a = fleet.add_worker("a")
    await fleet.start_streamed_by("a", "c1")
    await fleet.clock.advance(1)
    a.sink.latency_s = 0.3  # slow, yet keeping up: a write in flight nearly all the time
    await fleet.clock.advance(1)
    session = only_session(a)

    assert a.worker.sessions.hand_off(1) == ["c1"]
    # What was received when asked is stored within two writes (0.6 s): the wait, and the
    # stream, end then; waiting for nothing pending would stream on past it.
    await fleet.clock.advance(0.6)
    assert not session.upstream_open
    await fleet.clock.run_until(lambda: session.end is not None, 3)

    assert session.end is SessionEnd.REBALANCE


async def test_a_session_whose_upstream_never_opens_is_not_shown_as_streaming(
    fleet: Fleet,
) -> None:
    a = fleet.add_worker("a")
    url = await fleet.start("c1")
    fleet.upstream.streams[url].fail_opens = 1_000
    await fleet.clock.run_until(lambda: len(list(a.worker.sessions)) == 1, 5)
    await fleet.clock.advance(1)

    assert only_session(a).upstream_open is False  # false, not null, in the status
    assert fleet.owner_of("c1") is None


async def test_a_quiet_stream_is_ended_by_the_fence_itself(fleet: Fleet) -> None:
    """Nothing arrives to be refused: the lease's watch ends the session as lease lost the
    moment the worker stops trusting its session."""
    a = fleet.add_worker("a")
    url = await fleet.start_streamed_by("a", "c1")
    await fleet.clock.advance(1)
    fleet.upstream.streams[url].lost.update(range(1, 100_000))  # the upstream goes quiet
    session = only_session(a)
    a.store.outage = True

    await fleet.clock.run_until(lambda: session.end is not None, 30)

    assert session.end is SessionEnd.LEASE_LOST
