"""DynamoDbMessageSink beyond the shared contract: throttled puts surfaced as SinkUnavailable,
messages DynamoDB cannot store refused alone, and retention TTLs."""

from collections.abc import AsyncIterator
from typing import Any, cast

import pytest

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
    return [StoredMessage(cid, seq, f"m{seq}", 1_700_000_000_000, "w1", 3) for seq in range(n)]


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
    huge = StoredMessage("c1", 1, "x" * (sink.max_message_bytes + 1), 1, "w1", 3)

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
