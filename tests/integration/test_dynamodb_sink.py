"""DynamoDbMessageSink beyond the shared contract: unprocessed items (moto never returns them)
re-sent with back-off or surfaced as SinkUnavailable, error translation, and retention TTLs."""

from collections.abc import AsyncIterator
from typing import Any, cast

import pytest

from adapters.dynamodb.message_sink import DynamoDbMessageSink
from adapters.dynamodb.tables import create_tables
from application.errors import SinkUnavailable
from application.ports import StoredMessage
from entrypoints.devstack.aws import LocalAws
from tests.support.dynamodb import (
    TABLES,
    FaultyClient,
    client_error,
    dynamodb_client,
    half_batch_write,
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


async def test_unprocessed_items_are_sent_again_until_all_are_stored(client: Any) -> None:
    faulty = FaultyClient(client)
    sink = DynamoDbMessageSink(cast(Any, faulty), TABLES.messages, retry_base_s=0.001)
    faulty.plan("batch_write_item", half_batch_write, times=3)

    await sink.write(batch(25))

    assert [m.seq for m in await read_messages(client, TABLES.messages, "c1")] == list(range(25))
    assert faulty.calls["batch_write_item"] == 4  # 25 -> 13 -> 7 -> 4 left, then the rest


async def test_items_left_unprocessed_too_long_raise_sink_unavailable(client: Any) -> None:
    faulty = FaultyClient(client)
    sink = DynamoDbMessageSink(
        cast(Any, faulty), TABLES.messages, max_attempts=3, retry_base_s=0.001
    )
    faulty.plan("batch_write_item", half_batch_write, times=10)

    with pytest.raises(SinkUnavailable, match="unprocessed"):
        await sink.write(batch(20))
    # Part of it is stored; the caller retries the whole batch, which is idempotent.
    await DynamoDbMessageSink(client, TABLES.messages).write(batch(20))
    assert len(await read_messages(client, TABLES.messages, "c1")) == 20


async def test_throttling_becomes_sink_unavailable(client: Any) -> None:
    faulty = FaultyClient(client)
    sink = DynamoDbMessageSink(cast(Any, faulty), TABLES.messages)
    faulty.plan("batch_write_item", raising(client_error("ThrottlingException")))

    with pytest.raises(SinkUnavailable, match="ThrottlingException"):
        await sink.write(batch(2))


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
