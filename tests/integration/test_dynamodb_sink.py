"""DynamoDbMessageSink beyond the shared contract: throttled puts surfaced as SinkUnavailable,
messages DynamoDB cannot store refused alone, retention TTLs, and the resume point's Query:
its 1 MB pages, no page read past the first hole, what it projects, and a throttled read."""

from collections.abc import AsyncIterator, Callable
from typing import Any, cast

import pytest

from adapters.dynamodb import schema
from adapters.dynamodb.items import message_to_item
from adapters.dynamodb.message_sink import DynamoDbMessageSink
from adapters.dynamodb.tables import create_tables
from application.errors import SinkRefused, SinkUnavailable
from application.ports import StoredMessage
from entrypoints.devstack.aws import LocalAws
from tests.support.dynamodb import (
    TABLES,
    FaultyClient,
    client_error,
    dynamodb_client,
    raising,
    read_messages,
)


@pytest.fixture
async def client(aws: LocalAws) -> AsyncIterator[Any]:
    async with dynamodb_client(aws) as client:
        await create_tables(client, TABLES)
        yield client


def batch(n: int, cid: str = "c1") -> list[StoredMessage]:
    return [
        StoredMessage(cid, seq, f"m{seq}", 1_700_000_000_000, "w1", 3, seq - 1) for seq in range(n)
    ]


async def test_a_batch_is_one_request_and_costs_one_write_unit_per_small_message(
    client: Any,
) -> None:
    sink = DynamoDbMessageSink(client, TABLES.messages)
    # 25 messages over 5 connections, each connection's first write (one mark read each).
    messages = [m for cid in "abcde" for m in batch(5, cid)]

    await sink.write(messages)
    await sink.write([m for cid in "abcde" for m in batch(10, cid)[5:]])

    assert sink.operations["BatchWriteItem"] == 2
    assert sink.operations["mark"] == 5, "one read per (connection, token), then none"
    assert "check" not in sink.operations, "a stream moving forward is never checked"
    assert sink.consumed_wcu == 50.0
    assert len(await read_messages(client, TABLES.messages, "c")) == 10


def unprocessed(times: int) -> FaultyClient.Fault:
    """The service takes only the first item of the batch and hands the rest back."""

    async def fault(call: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
        table, requests = next(iter(kwargs["RequestItems"].items()))
        response = await call(**{**kwargs, "RequestItems": {table: requests[:1]}})
        return {**response, "UnprocessedItems": {table: requests[1:]} if requests[1:] else {}}

    return fault


async def test_unprocessed_items_are_retried_until_stored_and_counted(client: Any) -> None:
    faulty = FaultyClient(client)
    retried: list[int] = []
    sink = DynamoDbMessageSink(cast(Any, faulty), TABLES.messages, on_retry=retried.append)
    faulty.plan("batch_write_item", unprocessed(3), times=3)

    await sink.write(batch(10))

    assert [m.seq for m in await read_messages(client, TABLES.messages, "c1")] == list(range(10))
    assert retried == [9, 8, 7]
    assert sink.operations["unprocessed"] == 24
    assert faulty.calls["batch_write_item"] == 4


async def test_items_left_unprocessed_past_the_budget_fail_the_batch_as_unavailable(
    client: Any,
) -> None:
    faulty = FaultyClient(client)
    sink = DynamoDbMessageSink(cast(Any, faulty), TABLES.messages, retry_budget_s=0.2)
    faulty.plan("batch_write_item", unprocessed(1), times=1_000)

    with pytest.raises(SinkUnavailable, match="unprocessed"):
        await sink.write(batch(20))
    # Some landed; the caller retries the whole batch, which is idempotent.
    assert 0 < len(await read_messages(client, TABLES.messages, "c1")) < 20
    faulty._plans.clear()
    await sink.write(batch(20))
    assert len(await read_messages(client, TABLES.messages, "c1")) == 20


async def test_a_throttled_batch_is_sink_unavailable(client: Any) -> None:
    faulty = FaultyClient(client)
    sink = DynamoDbMessageSink(cast(Any, faulty), TABLES.messages)
    faulty.plan("batch_write_item", raising(client_error("ThrottlingException")))

    with pytest.raises(SinkUnavailable, match="ThrottlingException"):
        await sink.write(batch(3))


async def test_a_message_larger_than_an_item_may_be_is_refused_alone(client: Any) -> None:
    sink = DynamoDbMessageSink(client, TABLES.messages)
    messages = batch(3)
    huge = StoredMessage("c1", 1, "x" * (sink.max_message_bytes + 1), 1, "w1", 3, 0)

    with pytest.raises(SinkRefused) as refused:
        await sink.write([messages[0], huge, messages[2]])

    assert refused.value.invalid == {("c1", 1)}
    assert [m.seq for m in await read_messages(client, TABLES.messages, "c1")] == [0, 2]


async def test_the_service_refusing_an_item_is_found_alone_and_reported_as_invalid(
    client: Any,
) -> None:
    faulty = FaultyClient(client)
    sink = DynamoDbMessageSink(cast(Any, faulty), TABLES.messages)
    faulty.plan("batch_write_item", raising(client_error("ValidationException")))
    faulty.plan("put_item", raising(client_error("ValidationException")))

    with pytest.raises(SinkRefused) as refused:
        await sink.write(batch(3))

    assert refused.value.invalid == {("c1", 0)}  # the first put was refused, the others stored
    assert [m.seq for m in await read_messages(client, TABLES.messages, "c1")] == [1, 2]


# Fencing by the key (docs/decisions.md): a stale owner's write that no check could stop (a
# request delayed past its deadline, a retry sent after it) lands on its own key, beside the
# newer owner's item; every reader and the resume point take the newer one.


async def test_a_stale_owners_late_write_never_replaces_a_newer_owners_message(
    client: Any,
) -> None:
    old = DynamoDbMessageSink(client, TABLES.messages)
    new = DynamoDbMessageSink(client, TABLES.messages)
    await old.write([StoredMessage("c1", 1, "one", 1, "w1#1", 1, 0)])  # its mark learned
    # The new owner resumed at 1 and stored 2 and 3; the old owner's delayed write of 2 (other
    # data, prev link elsewhere) then lands, blind: for the old owner 2 is above its mark.
    newer = [
        StoredMessage("c1", 2, "two", 2, "w2#1", 2, 1),
        StoredMessage("c1", 3, "3", 2, "w2#1", 2, 2),
    ]
    await new.write(newer)
    await old.write([StoredMessage("c1", 2, "late", 3, "w1#1", 1, 0)])

    stored = await read_messages(client, TABLES.messages, "c1")

    assert [m.data for m in stored] == ["one", "two", "3"]
    assert stored[1] == newer[0]
    assert await new.resume_point("c1", 0) == 3


async def test_a_stale_batch_sent_raw_after_the_newer_owner_cannot_overwrite_it(
    client: Any,
) -> None:
    """The key design alone, with no sink in the way: the stale token's items are its own."""
    new = DynamoDbMessageSink(client, TABLES.messages)
    await new.write(
        [StoredMessage("c1", seq, f"new {seq}", 1, "w2#1", 7, seq - 1) for seq in (1, 2)]
    )

    await seed(
        client, [StoredMessage("c1", seq, f"old {seq}", 1, "w1#1", 6, seq - 1) for seq in (1, 2, 3)]
    )

    stored = await read_messages(client, TABLES.messages, "c1")
    assert [(m.seq, m.data, m.token) for m in stored] == [
        (1, "new 1", 7),
        (2, "new 2", 7),
        (3, "old 3", 6),
    ]


async def test_a_resumed_owner_rewriting_seqs_below_its_mark_checks_each_once(
    client: Any,
) -> None:
    await DynamoDbMessageSink(client, TABLES.messages).write(batch(5))  # token 3 stored 0..4
    sink = DynamoDbMessageSink(client, TABLES.messages)
    replayed = [StoredMessage("c1", seq, f"m{seq}", 1, "w2", 4, seq - 1) for seq in range(3, 8)]

    await sink.write(replayed)

    assert sink.operations["check"] == 2, "3 and 4 may meet a copy; 5..7 cannot"
    assert [m.token for m in await read_messages(client, TABLES.messages, "c1")] == [
        3,
        3,
        3,
        4,
        4,
        4,
        4,
        4,
    ]


async def test_forgotten_marks_are_learned_again(client: Any) -> None:
    sink = DynamoDbMessageSink(client, TABLES.messages, tracked_owners=2)
    for cid in ("a", "b", "c", "a"):
        await sink.write(batch(1, cid))

    assert sink.operations["mark"] == 4  # a was forgotten when c was learned
    with pytest.raises(SinkRefused) as refused:
        await sink.write([StoredMessage("a", 0, "other", 1, "w1", 3, -1)])
    assert refused.value.conflicts == {("a", 0)}, "a forgotten mark is learned, never assumed"


async def test_a_retention_stamps_each_message_with_a_ttl(client: Any) -> None:
    sink = DynamoDbMessageSink(client, TABLES.messages, retention_s=86_400)
    kept = DynamoDbMessageSink(client, TABLES.messages)

    await sink.write(batch(1, "expiring"))
    await kept.write(batch(1, "kept"))

    def item(cid: str) -> Any:
        key = {"pk": {"S": f"CONN#{cid}"}, "sk": {"N": str(schema.message_key(0, 3))}}
        return client.get_item(TableName=TABLES.messages, Key=key)

    assert (await item("expiring"))["Item"]["expires_at"] == {"N": str(1_700_000_000 + 86_400)}
    assert "expires_at" not in (await item("kept"))["Item"]


async def seed(client: Any, messages: list[StoredMessage]) -> None:
    """Store messages as the sink would, 25 to a BatchWriteItem (fast, unfenced: test setup)."""
    for start in range(0, len(messages), 25):
        requests = [
            {"PutRequest": {"Item": message_to_item(m, None)}} for m in messages[start : start + 25]
        ]
        response = await client.batch_write_item(RequestItems={TABLES.messages: requests})
        assert not response.get("UnprocessedItems")


def stream(n: int, size: int = 20, skip: int | None = None) -> list[StoredMessage]:
    """Seqs 1..n linked contiguously, `size` bytes of data each, without seq `skip`."""
    return [
        StoredMessage("c1", seq, f"{seq:08d}".ljust(size, "x"), 1, "w1", 1, seq - 1)
        for seq in range(1, n + 1)
        if seq != skip
    ]


async def test_the_resume_point_reads_1_mb_pages_to_the_end(client: Any) -> None:
    sink = DynamoDbMessageSink(client, TABLES.messages)
    await seed(client, stream(1_200, size=1_000, skip=1_151))  # over 1 MB, a hole near the end

    assert await sink.resume_point("c1", 0) == 1_150
    assert sink.operations["Query"] == 2, "1.2 MB of items is two 1 MB pages"

    await seed(client, [stream(1_151, size=1_000)[-1]])
    assert await sink.resume_point("c1", 0) == 1_200


async def test_the_resume_point_reads_no_page_past_the_first_hole(client: Any) -> None:
    faulty = FaultyClient(client)
    sink = DynamoDbMessageSink(cast(Any, faulty), TABLES.messages, query_page_limit=100)
    requests: list[dict[str, Any]] = []

    async def recorded(call: Any, kwargs: dict[str, Any]) -> Any:
        requests.append(kwargs)
        return await call(**kwargs)

    faulty.plan("query", recorded, times=10)
    await seed(client, stream(1_000, skip=150))

    assert await sink.resume_point("c1", 0) == 149
    assert sink.operations == {"Query": 2, "links": 200}  # pages 1-100 and 101-201, no more
    first = requests[0]
    assert first["ConsistentRead"] is True
    assert first["ScanIndexForward"] is True
    names = first["ExpressionAttributeNames"]
    projected = {names[name.strip()] for name in first["ProjectionExpression"].split(",")}
    assert projected == {schema.SK, schema.MESSAGE_PREV}, "seq and prev only, never the data"
    assert first["ExpressionAttributeValues"][":first"] == {"N": str(schema.message_key(1, 0))}


async def test_a_throttled_resume_point_read_is_sink_unavailable(client: Any) -> None:
    faulty = FaultyClient(client)
    sink = DynamoDbMessageSink(cast(Any, faulty), TABLES.messages)
    faulty.plan("query", raising(client_error("ProvisionedThroughputExceededException")))

    with pytest.raises(SinkUnavailable, match="ProvisionedThroughputExceeded"):
        await sink.resume_point("c1", 0)


async def test_a_batch_of_more_owners_than_it_tracks_is_still_checked_by_its_marks(
    client: Any,
) -> None:
    await DynamoDbMessageSink(client, TABLES.messages).write([*batch(2, "a"), *batch(2, "b")])
    sink = DynamoDbMessageSink(client, TABLES.messages, tracked_owners=1)

    with pytest.raises(SinkRefused) as refused:
        await sink.write([StoredMessage(cid, 1, "other", 1, "w2", 4, 0) for cid in ("a", "b", "c")])

    assert refused.value.conflicts == {("a", 1), ("b", 1)}
    assert [m.seq for m in await read_messages(client, TABLES.messages, "c")] == [1]
