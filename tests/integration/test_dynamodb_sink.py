"""DynamoDbMessageSink beyond the shared contract: throttled puts surfaced as SinkUnavailable,
messages DynamoDB cannot store refused alone, retention TTLs, and the resume point's Query:
its 1 MB pages, no page read past the first hole, what it projects, and a throttled read."""

from collections.abc import AsyncIterator
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


async def test_a_put_left_throttled_fails_the_batch_which_is_then_retried_whole(
    client: Any,
) -> None:
    faulty = FaultyClient(client)
    sink = DynamoDbMessageSink(cast(Any, faulty), TABLES.messages)
    faulty.plan("put_item", raising(client_error("ThrottlingException")))

    with pytest.raises(SinkUnavailable, match="ThrottlingException"):
        await sink.write(batch(20))
    # The other puts landed; the caller retries the whole batch, which is idempotent.
    assert 0 < len(await read_messages(client, TABLES.messages, "c1")) < 20
    await sink.write(batch(20))
    assert len(await read_messages(client, TABLES.messages, "c1")) == 20
    assert faulty.calls["put_item"] == 40


async def test_a_message_larger_than_an_item_may_be_is_refused_alone(client: Any) -> None:
    sink = DynamoDbMessageSink(client, TABLES.messages)
    messages = batch(3)
    huge = StoredMessage("c1", 1, "x" * (sink.max_message_bytes + 1), 1, "w1", 3, 0)

    with pytest.raises(SinkRefused) as refused:
        await sink.write([messages[0], huge, messages[2]])

    assert refused.value.invalid == {("c1", 1)}
    assert [m.seq for m in await read_messages(client, TABLES.messages, "c1")] == [0, 2]


async def test_the_service_refusing_an_item_is_reported_as_invalid_not_raised(
    client: Any,
) -> None:
    faulty = FaultyClient(client)
    sink = DynamoDbMessageSink(cast(Any, faulty), TABLES.messages)
    faulty.plan("put_item", raising(client_error("ValidationException")))

    with pytest.raises(SinkRefused) as refused:
        await sink.write(batch(1))

    assert refused.value.invalid == {("c1", 0)}


async def test_a_retention_stamps_each_message_with_a_ttl(client: Any) -> None:
    sink = DynamoDbMessageSink(client, TABLES.messages, retention_s=86_400)
    kept = DynamoDbMessageSink(client, TABLES.messages)

    await sink.write(batch(1, "expiring"))
    await kept.write(batch(1, "kept"))

    def item(cid: str) -> Any:
        return client.get_item(
            TableName=TABLES.messages, Key={"pk": {"S": f"CONN#{cid}"}, "sk": {"N": "0"}}
        )

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
    assert first["ExpressionAttributeValues"][":checkpoint"] == {"N": "0"}


async def test_a_throttled_resume_point_read_is_sink_unavailable(client: Any) -> None:
    faulty = FaultyClient(client)
    sink = DynamoDbMessageSink(cast(Any, faulty), TABLES.messages)
    faulty.plan("query", raising(client_error("ProvisionedThroughputExceededException")))

    with pytest.raises(SinkUnavailable, match="ProvisionedThroughputExceeded"):
        await sink.resume_point("c1", 0)
