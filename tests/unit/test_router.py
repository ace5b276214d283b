"""EventRouter: START/STOP land in the store first, then (for a START that changed something)
a hint goes to the queue, and a delayed copy of it. In-memory store and queue, fake clock,
static DNS."""

import logging
from collections.abc import Sequence

import pytest

from adapters.memory.clock import FakeClock
from adapters.memory.queue import InMemoryNotificationQueue
from adapters.memory.store import InMemoryConnectionStore
from application.errors import QueueUnavailable
from application.hints import REPEAT_S as START_HINT_REPEAT_S
from application.ports import Delivery, HintOrigin, NotificationQueue
from application.router import EventRouter
from application.url_policy import ForbiddenUrl, UrlPolicy
from domain import (
    ConnectionConflict,
    ConnectionNotFound,
    ConnectionRestarted,
    ConnectionStarted,
    DesiredState,
    InvalidCommand,
    StopRequested,
)
from tests.support.resolver import StaticResolver

CID = "meeting-42"
URL = "wss://feeds.example.com/meeting/42"
OTHER_URL = "wss://feeds.example.com/meeting/43"
DNS = {"feeds.example.com": ["93.184.216.34"], "internal.example.com": ["10.0.0.7"]}


class UnavailableQueue:
    """A queue whose every call fails, as SQS does during an outage."""

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
    def __init__(self, queue: NotificationQueue | None = None) -> None:
        self.clock = FakeClock()
        self.store = InMemoryConnectionStore()
        self.queue = InMemoryNotificationQueue(self.clock)
        self.router = EventRouter(
            store=self.store,
            queue=self.queue if queue is None else queue,  # an empty queue is falsy
            clock=self.clock,
            url_policy=UrlPolicy(resolver=StaticResolver(DNS)),
        )

    async def hints(self) -> list[str | None]:
        return [d.connection_id for d in await self.queue.receive(max_messages=10, wait_s=0)]

    async def nothing_written(self) -> bool:
        return not await self.store.list_connections() and len(self.queue) == 0


@pytest.fixture
def app() -> Setup:
    return Setup()


async def test_start_writes_the_connection_and_sends_a_hint_now_and_a_delayed_copy(
    app: Setup,
) -> None:
    outcome = await app.router.start(CID, URL)

    assert outcome.changed
    assert outcome.connection.desired_state is DesiredState.STARTED
    assert outcome.connection.ws_url == URL
    assert await app.store.get(CID) == outcome.connection
    assert [type(e) for e in await app.store.history(CID)] == [ConnectionStarted]
    assert await app.hints() == [CID]
    # The copy, for a hint a dead worker's open long poll may have swallowed.
    await app.clock.advance(START_HINT_REPEAT_S - 0.1)
    assert await app.hints() == []
    await app.clock.advance(0.1)
    assert await app.hints() == [CID]


async def test_repeated_start_changes_nothing_and_sends_no_second_hint(app: Setup) -> None:
    first = await app.router.start(CID, URL)
    app.clock.skew_ms = 5_000  # a later retry

    again = await app.router.start(CID, URL)

    assert not again.changed
    assert again.connection == first.connection
    assert len(await app.store.history(CID)) == 1
    assert await app.hints() == [CID]
    assert app.queue.sent == 2  # the first START's hint and its copy


async def test_start_with_other_url_is_a_conflict_and_writes_nothing(app: Setup) -> None:
    before = (await app.router.start(CID, URL)).connection
    await app.hints()  # drain the first hint

    with pytest.raises(ConnectionConflict, match=CID):
        await app.router.start(CID, OTHER_URL)

    assert await app.store.get(CID) == before
    assert len(await app.store.history(CID)) == 1
    assert app.queue.sent == 2  # the first START's hint and its copy


async def test_stop_of_unknown_connection_is_not_found(app: Setup) -> None:
    with pytest.raises(ConnectionNotFound, match=f"{CID!r} was never started"):
        await app.router.stop(CID)

    assert await app.nothing_written()


async def test_stop_marks_stopped_once_and_repeats_as_unchanged(app: Setup) -> None:
    await app.router.start(CID, URL)

    first = await app.router.stop(CID)
    again = await app.router.stop(CID)

    assert first.changed
    assert first.connection.desired_state is DesiredState.STOPPED
    assert not again.changed
    assert [type(e) for e in await app.store.history(CID)] == [ConnectionStarted, StopRequested]


async def test_start_after_stop_restarts_and_hints_again(app: Setup) -> None:
    await app.router.start(CID, URL)
    await app.router.stop(CID)

    outcome = await app.router.start(CID, OTHER_URL)

    assert outcome.changed
    assert outcome.connection.ws_url == OTHER_URL
    assert type((await app.store.history(CID))[-1]) is ConnectionRestarted
    assert app.queue.sent == 4  # a hint and its copy per START


@pytest.mark.parametrize("connection_id", ["", "has space", "x" * 129, "meeting-42\n", "a/b"])
async def test_start_with_invalid_id_is_refused_with_nothing_written(
    app: Setup, connection_id: str
) -> None:
    with pytest.raises(InvalidCommand, match="invalid connection id"):
        await app.router.start(connection_id, URL)

    assert await app.nothing_written()


@pytest.mark.parametrize("ws_url", ["https://feeds.example.com/", "feeds.example.com", "wss://"])
async def test_start_with_invalid_url_is_refused_with_nothing_written(
    app: Setup, ws_url: str
) -> None:
    with pytest.raises(InvalidCommand, match="ws_url"):
        await app.router.start(CID, ws_url)

    assert await app.nothing_written()


@pytest.mark.parametrize(
    "ws_url", ["wss://internal.example.com/", "ws://127.0.0.1:9000/", "wss://unknown.example.com/"]
)
async def test_start_with_forbidden_url_is_refused_with_nothing_written(
    app: Setup, ws_url: str
) -> None:
    with pytest.raises(ForbiddenUrl):
        await app.router.start(CID, ws_url)

    assert await app.nothing_written()


async def test_stop_with_invalid_id_is_refused(app: Setup) -> None:
    with pytest.raises(InvalidCommand, match="invalid connection id"):
        await app.router.stop("no spaces allowed")


async def test_start_succeeds_when_the_queue_is_down_after_the_store_write(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The hint is lost, not the START: reconciliation finds the orphan instead."""
    app = Setup(queue=UnavailableQueue())

    outcome = await app.router.start(CID, URL)

    assert outcome.changed
    assert await app.store.get(CID) == outcome.connection
    assert outcome.connection.is_orphan(app.clock.now_ms() + 1, {})
    assert "picked up by reconciliation" in caplog.text


class NoDelayedHintsQueue(InMemoryNotificationQueue):
    """Takes a hint for now, fails a delayed one (an outage that began between the two)."""

    async def send(
        self,
        connection_ids: Sequence[str],
        *,
        delay_s: int = 0,
        copy: bool = False,
        origin: HintOrigin | None = None,
    ) -> None:
        if delay_s:
            raise QueueUnavailable("queue endpoint timed out")
        await super().send(connection_ids, origin=origin)


async def test_a_start_whose_delayed_copy_fails_still_succeeds_with_its_first_hint(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    queue = NoDelayedHintsQueue(FakeClock())
    app = Setup(queue=queue)

    outcome = await app.router.start(CID, URL)

    assert outcome.changed
    assert [d.connection_id for d in await queue.receive(max_messages=10, wait_s=0)] == [CID]
    assert "went out once, not twice" in caplog.text


async def test_get_and_history_read_back_what_was_written(app: Setup) -> None:
    await app.router.start(CID, URL)

    assert (await app.router.get(CID)) == await app.store.get(CID)
    assert await app.router.get("never-started") is None
    assert [type(e) for e in await app.router.history(CID)] == [ConnectionStarted]
