"""The NotificationQueue contract: the same assertions hold for every implementation
(hints are at-least-once, invisible while in flight, and never crash the consumer)."""

import asyncio
import time
from collections.abc import Sequence

import pytest

from application.ports.queue import Delivery, HintOrigin
from tests.contract.queue_fixtures import VISIBILITY_TIMEOUT_S, QueueUnderTest
from tests.contract.queue_fixtures import queue_fixture as queue_fixture  # the `queue` fixture

# Malformed in every body format (JSON hints, bare ids): none names a valid connection.
# A valid connection with an origin that is not a session id is malformed as a whole.
MALFORMED_BODIES = [
    "not a hint!",
    '{"connection_id": 42}',
    '["c-1"]',
    '{"pk": "CONN#a b"}',
    '{"connection_id": "c-1", "from": 7}',
    '{"connection_id": "c-1", "from": ""}',
    '{"connection_id": "c-1", "from": "w-1#1", "leaving": "yes"}',
    '{"connection_id": "c-1", "leaving": true}',
]


async def receive_all(
    queue: QueueUnderTest, expected: int, max_messages: int = 10, within_s: float = 10.0
) -> list[Delivery]:
    """Receive until `expected` deliveries arrived (a queue may return fewer per call)."""
    got: list[Delivery] = []
    deadline = time.monotonic() + within_s
    while len(got) < expected and time.monotonic() < deadline:
        batch = await queue.queue.receive(max_messages=max_messages, wait_s=1)
        assert len(batch) <= max_messages
        got.extend(batch)
    return got


def ids_of(deliveries: Sequence[Delivery]) -> list[str | None]:
    return sorted((d.connection_id for d in deliveries), key=str)


async def test_sent_hint_is_received_once_and_gone_after_delete(queue: QueueUnderTest) -> None:
    await queue.queue.send(["conn-1"])

    [delivery] = await receive_all(queue, expected=1)
    assert delivery.connection_id == "conn-1"
    assert delivery.problem is None
    await queue.queue.delete([delivery.receipt])

    await asyncio.sleep(VISIBILITY_TIMEOUT_S + 0.2)
    assert await queue.queue.receive(max_messages=10, wait_s=1) == []


async def test_hint_in_flight_is_invisible_until_the_timeout_then_redelivered(
    queue: QueueUnderTest,
) -> None:
    await queue.queue.send(["conn-1"])
    [first] = await receive_all(queue, expected=1)

    assert await queue.queue.receive(max_messages=10, wait_s=0) == []

    started = time.monotonic()
    again = await queue.queue.receive(max_messages=10, wait_s=10)
    assert ids_of(again) == ["conn-1"]
    assert again[0].receipt != first.receipt  # each delivery has its own receipt
    # The long poll returned when the hint became visible again, not at the end of its wait.
    assert time.monotonic() - started < 5
    await queue.queue.delete([d.receipt for d in again])


async def test_released_hint_is_visible_to_others_at_once_not_after_the_timeout(
    queue: QueueUnderTest,
) -> None:
    """A consumer that is shutting down gives back what its last long poll caught."""
    await queue.queue.send(["conn-1", "conn-2"])
    caught = await receive_all(queue, expected=2)

    await queue.queue.release([caught[0].receipt, "not-a-receipt"])

    again = await queue.queue.receive(max_messages=10, wait_s=0)
    assert ids_of(again) == [caught[0].connection_id]
    assert again[0].receipt != caught[0].receipt
    await queue.queue.delete([caught[1].receipt, again[0].receipt])
    await queue.queue.release([caught[1].receipt])  # stale: already deleted, harmless
    assert await queue.queue.receive(max_messages=10, wait_s=0) == []


async def test_receive_returns_at_most_max_messages(queue: QueueUnderTest) -> None:
    sent = [f"conn-{i}" for i in range(5)]
    await queue.queue.send(sent)

    first = await queue.queue.receive(max_messages=2, wait_s=1)
    assert 1 <= len(first) <= 2
    rest = await receive_all(queue, expected=len(sent) - len(first), max_messages=2)

    assert ids_of([*first, *rest]) == sorted(sent)


async def test_long_poll_returns_as_soon_as_a_hint_arrives(queue: QueueUnderTest) -> None:
    started = time.monotonic()
    poll = asyncio.create_task(queue.queue.receive(max_messages=10, wait_s=10))
    await asyncio.sleep(0.3)
    await queue.queue.send(["conn-late"])

    got = await asyncio.wait_for(poll, timeout=15)

    assert ids_of(got) == ["conn-late"]
    assert time.monotonic() - started < 5


async def test_long_poll_on_an_empty_queue_returns_nothing(queue: QueueUnderTest) -> None:
    assert await queue.queue.receive(max_messages=10, wait_s=1) == []


async def test_more_than_ten_hints_are_sent_and_deleted_in_one_call_each(
    queue: QueueUnderTest,
) -> None:
    sent = [f"conn-{i:02d}" for i in range(25)]
    await queue.queue.send(sent)

    got = await receive_all(queue, expected=len(sent))
    assert ids_of(got) == sent
    await queue.queue.delete([d.receipt for d in got])

    await asyncio.sleep(VISIBILITY_TIMEOUT_S + 0.2)
    assert await queue.queue.receive(max_messages=10, wait_s=1) == []


async def test_deleting_unknown_repeated_or_no_receipts_is_harmless(queue: QueueUnderTest) -> None:
    """Harmless means: no error, nothing else deleted, the deleted hint stays deleted, and the
    queue goes on working."""
    await queue.queue.send(["conn-1", "conn-2"])
    await queue.queue.delete([])
    await queue.queue.delete(["not-a-receipt", "also-not-one"])
    got = await receive_all(queue, expected=2)
    assert ids_of(got) == ["conn-1", "conn-2"], "unknown receipts deleted nothing"
    deleted, kept = got

    await queue.queue.delete([deleted.receipt, deleted.receipt])  # repeated in one call
    await queue.queue.delete([deleted.receipt])  # and again later
    await asyncio.sleep(VISIBILITY_TIMEOUT_S + 0.2)

    again = await receive_all(queue, expected=1)
    assert ids_of(again) == [kept.connection_id], "only the undeleted hint came back"
    await queue.queue.delete([again[0].receipt])
    await queue.queue.send(["conn-3"])
    assert ids_of(await receive_all(queue, expected=1)) == ["conn-3"]
    await asyncio.sleep(VISIBILITY_TIMEOUT_S + 0.2)
    assert ids_of(await queue.queue.receive(max_messages=10, wait_s=0)) == ["conn-3"]


async def test_malformed_hints_surface_as_problems_beside_valid_ones(
    queue: QueueUnderTest,
) -> None:
    for body in MALFORMED_BODIES:
        await queue.inject_raw(body)
    await queue.queue.send(["conn-ok"])

    got = await receive_all(queue, expected=len(MALFORMED_BODIES) + 1)

    valid = [d for d in got if d.connection_id is not None]
    malformed = [d for d in got if d.connection_id is None]
    assert [(d.connection_id, d.problem) for d in valid] == [("conn-ok", None)]
    assert len(malformed) == len(MALFORMED_BODIES)
    assert all(d.problem for d in malformed)
    await queue.queue.delete([d.receipt for d in got])  # the consumer deletes them all
    await asyncio.sleep(VISIBILITY_TIMEOUT_S + 0.2)
    assert await queue.queue.receive(max_messages=10, wait_s=0) == []


async def test_sending_nothing_is_a_no_op(queue: QueueUnderTest) -> None:
    await queue.queue.send([])
    assert await queue.queue.receive(max_messages=10, wait_s=0) == []


async def test_a_delayed_copy_is_received_by_nobody_until_its_delay_has_passed_and_says_so(
    queue: QueueUnderTest,
) -> None:
    sent_at = time.monotonic()
    await queue.queue.send(["conn-later"], delay_s=2, copy=True)
    await queue.queue.send(["conn-now"])

    now = await receive_all(queue, expected=1)
    assert ids_of(now) == ["conn-now"]
    assert not now[0].copy
    await queue.queue.delete([d.receipt for d in now])
    [later] = await receive_all(queue, expected=1)
    assert later.connection_id == "conn-later"
    assert later.copy  # said, so that a consumer can treat it as the copy it is
    # A lower bound only (a slow machine delivers later, never earlier); SQS counts from its
    # own receipt of the send, which is after `sent_at`.
    assert time.monotonic() - sent_at >= 2 - 0.1
    await queue.queue.delete([later.receipt])


async def test_a_copy_sent_without_a_delay_is_received_at_once_and_says_so(
    queue: QueueUnderTest,
) -> None:
    """A shutting-down worker's second round (application/hints.py): a copy, due now."""
    await queue.queue.send(["conn-copy"], copy=True)
    await queue.queue.send(["conn-plain"], delay_s=1)

    [copy] = await receive_all(queue, expected=1)
    assert (copy.connection_id, copy.copy) == ("conn-copy", True)
    await queue.queue.delete([copy.receipt])
    [plain] = await receive_all(queue, expected=1)
    assert (plain.connection_id, plain.copy) == ("conn-plain", False)
    await queue.queue.delete([plain.receipt])


async def test_a_hint_carries_its_origin_and_keeps_it_through_a_give_back(
    queue: QueueUnderTest,
) -> None:
    """A released connection's hint names its releaser (application/worker/balance.py counts
    the connection once with it); a START's names none. Given back, a hint is the same hint:
    its origin and its copy flag stay."""
    releaser = HintOrigin("worker-a#3")
    leaver = HintOrigin("worker-b#1", leaving=True)  # a shutting-down worker's handoff
    # Balancing by load: meant for c, and what the connection receives (a heavy one is left to c).
    addressed = HintOrigin("worker-a#3", to="worker-c#2", rate=52.5)
    await queue.queue.send(["conn-released"], copy=True, origin=releaser)
    await queue.queue.send(["conn-started"])
    await queue.queue.send(["conn-handed-over"], origin=leaver)
    await queue.queue.send(["conn-meant-for-c"], origin=addressed)

    caught = {d.connection_id: d for d in await receive_all(queue, expected=4)}
    assert (caught["conn-released"].origin, caught["conn-released"].copy) == (releaser, True)
    assert caught["conn-started"].origin is None
    assert (caught["conn-handed-over"].origin, caught["conn-handed-over"].copy) == (leaver, False)
    assert caught["conn-meant-for-c"].origin == addressed

    await queue.queue.release([d.receipt for d in caught.values()])
    again = {d.connection_id: d for d in await receive_all(queue, expected=4)}
    assert (again["conn-released"].origin, again["conn-released"].copy) == (releaser, True)
    assert (again["conn-started"].origin, again["conn-started"].copy) == (None, False)
    assert again["conn-handed-over"].origin == leaver
    assert again["conn-meant-for-c"].origin == addressed
    await queue.queue.delete([d.receipt for d in again.values()])


@pytest.mark.parametrize("delay_s", [-1, 901])
async def test_a_delay_beyond_what_the_queue_allows_is_refused_and_sends_nothing(
    queue: QueueUnderTest, delay_s: int
) -> None:
    with pytest.raises(ValueError, match="delay must be 0-900"):
        await queue.queue.send(["conn-1"], delay_s=delay_s)
    assert await queue.queue.receive(max_messages=10, wait_s=0) == []
