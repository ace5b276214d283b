"""How a ConnectionSession streams its upstream (ConnectionSession._stream), on virtual time:
the received count the metrics loop publishes, how many opens an upstream that keeps failing
gets before it is given up on (and that a message received starts the count again), the
reconnects counted, the logs that say why an upstream was left or reconnected, the fault
recorded in the store, the status view between two subscriptions, and a resumed stream whose
one message ends it. The mutation run of application/worker/session.py found each of these
unasserted: its lines could be changed without any test noticing."""

import logging

import pytest

from adapters.memory.upstream import FakeStream
from application.ports import UpstreamMessage
from application.ports.metrics import MESSAGES_RECEIVED, UPSTREAM_RECONNECTS
from domain import NO_OWNER, DesiredState, StreamEnded, UpstreamFailed
from tests.support.fleet import Fleet, Member

SESSION_LOGGER = "application.worker.session"
HELD_WARNING = (
    "a resumed stream's first message, without a seq, is not stored: the session ended "
    "before the stream said whether it numbers its messages"
)


@pytest.fixture(autouse=True)
def _info_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=SESSION_LOGGER)


def _logged(caplog: pytest.LogCaptureFixture, text: str) -> list[logging.LogRecord]:
    """The session's records saying exactly `text`, each about connection c1."""
    records = [r for r in caplog.records if r.name == SESSION_LOGGER and r.getMessage() == text]
    for record in records:
        assert record.__dict__["connection_id"] == "c1", record
    return records


def _starting_with(caplog: pytest.LogCaptureFixture, prefix: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith(prefix)]


async def _streamed(fleet: Fleet) -> tuple[Member, FakeStream]:
    """c1 streamed by worker "a"."""
    a = fleet.add_worker("a")
    url = await fleet.start_streamed_by("a", "c1")
    return a, fleet.upstream.streams[url]


async def _failing_from_the_start(fleet: Fleet) -> tuple[Member, FakeStream]:
    """c1, whose upstream refuses every open, taken by worker "a"."""
    url = await fleet.start("c1")
    stream = fleet.upstream.streams[url]
    stream.fail_opens = 1_000
    return fleet.add_worker("a"), stream


async def _given_up(fleet: Fleet) -> UpstreamFailed:
    """Wait until c1's upstream is given up on; the store's record of it."""
    await fleet.clock.run_until(
        lambda: fleet.store.operations.get("ReportUpstreamFailure", 0) == 1, 60
    )
    state = await fleet.store.get("c1")
    assert state is not None
    assert state.owner == NO_OWNER
    [failed] = [e for e in await fleet.store.history("c1") if isinstance(e, UpstreamFailed)]
    return failed


async def test_the_received_count_published_is_what_the_upstream_delivered(
    fleet: Fleet,
) -> None:
    a, stream = await _streamed(fleet)
    stream.total = 25
    await fleet.clock.run_until(lambda: fleet.store.operations.get("EndStream", 0) == 1, 10)
    # The metrics loop publishes the count's growth once an interval.
    await fleet.clock.advance(fleet.config.metrics_interval_s + 1)

    assert a.worker.ingest.received == 25
    assert a.metrics.counters[MESSAGES_RECEIVED] == 25


async def test_an_upstream_that_keeps_refusing_is_given_up_after_the_configured_opens(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    a, stream = await _failing_from_the_start(fleet)
    attempts = fleet.config.reconnect_attempts

    failed = await _given_up(fleet)

    assert stream.opens == attempts
    assert failed.reason == "upstream kept failing"  # no contract broken: the default reason
    # Every failure but the last is followed by a reconnect, counted and logged.
    assert a.metrics.counters[UPSTREAM_RECONNECTS] == attempts - 1
    refused = f"{stream.url} connection refused"
    assert len(_logged(caplog, f"upstream dropped, reconnecting: {refused}")) == attempts - 1
    [gave_up] = _logged(caplog, f"upstream failed {attempts} times: {refused}")
    assert gave_up.levelno == logging.WARNING


async def test_a_drop_after_messages_starts_the_count_of_failures_at_one(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    """The drop is the first consecutive failure: the opens refused after it make up the
    rest, not one more nor one fewer."""
    a, stream = await _streamed(fleet)
    await fleet.clock.advance(2)
    assert a.worker.ingest.received > 0
    stream.drop_after, stream.fail_opens = 0, 1_000  # dropped, then refused on reconnecting
    attempts = fleet.config.reconnect_attempts

    await _given_up(fleet)

    assert stream.opens == 1 + (attempts - 1)  # the one that streamed, then the refused
    assert a.metrics.counters[UPSTREAM_RECONNECTS] == attempts - 1
    [dropped] = _logged(
        caplog, f"upstream dropped, reconnecting: {stream.url} dropped the connection"
    )
    assert dropped.levelno == logging.INFO
    assert _logged(caplog, f"upstream failed {attempts} times: {stream.url} connection refused")


async def test_an_upstream_that_drops_after_every_message_is_never_given_up_on(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    """Each message received restarts the count: many more drops than reconnect_attempts
    cost nothing while messages keep coming."""
    url = await fleet.start("c1")
    stream = fleet.upstream.streams[url]
    stream.drop_after = 1
    a = fleet.add_worker("a")

    await fleet.clock.advance(15)

    assert stream.opens > 3 * fleet.config.reconnect_attempts
    assert fleet.store.operations.get("ReportUpstreamFailure", 0) == 0
    assert not _starting_with(caplog, "upstream failed")
    # One message per subscription, each counted; each drop a reconnect, counted and logged.
    assert a.worker.ingest.received == stream.opens
    assert a.metrics.counters[UPSTREAM_RECONNECTS] == stream.opens
    drops = _logged(caplog, f"upstream dropped, reconnecting: {url} dropped the connection")
    assert len(drops) == stream.opens


async def test_the_status_says_the_upstream_is_closed_between_subscriptions(
    fleet: Fleet,
) -> None:
    """A boolean: the /status JSON says false, never null, while the session reconnects."""
    a, stream = await _streamed(fleet)
    await fleet.clock.advance(1)
    [view] = a.worker.health().connections
    assert view.upstream_open is True
    stream.drop_after, stream.fail_opens = 0, 1_000

    await fleet.clock.run_until(lambda: a.metrics.counters[UPSTREAM_RECONNECTS] >= 2, 10)

    [view] = a.worker.health().connections
    assert view.upstream_open is False


async def test_a_broken_contract_is_logged_and_recorded_as_the_reason(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    a, stream = await _streamed(fleet)
    stream.inject = {20: [UpstreamMessage(10**15, "jump")]}

    failed = await _given_up(fleet)

    fault = "seq jumped from 19 to 1000000000000000, more than 1000000 ahead"
    assert failed.reason == fault  # what the store keeps says why
    [record] = _logged(caplog, f"upstream broke the message contract: {fault}")
    assert record.levelno == logging.WARNING
    assert stream.opens == 1
    assert a.worker.ingest.received == 20  # the bad message was received too


async def test_a_refused_subscription_is_logged_and_given_up_at_once(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    url = await fleet.start("c1")
    stream = fleet.upstream.streams[url]
    stream.rejected = True
    a = fleet.add_worker("a")

    await _given_up(fleet)

    [record] = _logged(caplog, f"upstream rejected: {url} refused the subscription (403)")
    assert record.levelno == logging.WARNING
    assert stream.opens == 1
    assert a.metrics.counters[UPSTREAM_RECONNECTS] == 0


async def test_a_resumed_stream_ending_after_its_one_message_stores_it_and_ends(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    """GIVEN a stream that numbers nothing, handed over at checkpoint c WHEN it sends one
    message and ends THEN that message, held until the stream said more, is stored as c + 1
    when the stream ends, and the connection ends normally (nothing left held)."""
    url = await fleet.start("c1")
    stream = fleet.upstream.streams[url]
    stream.numbered = False
    fleet.add_worker("a")
    await fleet.clock.run_until(lambda: fleet.owner_of("c1") == "a", 5)
    await fleet.clock.advance(1)
    await fleet.shutdown("a")
    state = await fleet.store.get("c1")
    assert state is not None
    checkpoint = state.checkpoint_seq
    assert checkpoint > 0
    stream.total = checkpoint + 1  # one message for the next owner, then the end
    fleet.add_worker("b")

    await fleet.clock.run_until(lambda: fleet.store.operations.get("EndStream", 0) == 1, 10)

    assert fleet.sink.seqs("c1") == list(range(1, checkpoint + 2))
    assert fleet.sink.messages[("c1", checkpoint + 1)].data == f"{url}#{checkpoint + 1}"
    state = await fleet.store.get("c1")
    assert state is not None
    assert (state.desired_state, state.checkpoint_seq) == (DesiredState.STOPPED, checkpoint + 1)
    assert any(isinstance(e, StreamEnded) for e in await fleet.store.history("c1"))
    assert HELD_WARNING not in caplog.messages
