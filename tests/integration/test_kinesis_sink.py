"""KinesisMessageSink and its reader on moto's Kinesis (server mode): a connection's messages
of a batch aggregated into one record (one request per batch), read back once per seq by the
reader's rule, a connection's records in order on its shard even when some of a request fail,
records of the format before aggregation still read, the service's limits, outages as
SinkUnavailable, no resume point."""

import json
from collections.abc import AsyncIterator, Callable
from typing import Any, cast

import pytest

from adapters.kinesis import KinesisMessageReader, KinesisMessageSink, messages_of
from application.errors import SinkRefused, SinkUnavailable
from application.ports import StoredMessage
from entrypoints.devstack.aws import LocalAws
from entrypoints.devstack.aws import client as aws_client
from tests.support.dynamodb import FaultyClient, client_error, raising

STREAM = "test-messages"
LARGE = 300_000  # three such messages to a record


@pytest.fixture
async def client(aws: LocalAws) -> AsyncIterator[Any]:
    async with aws_client("kinesis", aws.moto_url, region=aws.region) as client:
        await client.create_stream(StreamName=STREAM, ShardCount=2)
        yield client
        await client.delete_stream(StreamName=STREAM, EnforceConsumerDeletion=True)


def message(seq: int, cid: str = "c1", token: int = 1, data: str | None = None) -> StoredMessage:
    text = f'{{"seq": {seq}}}' if data is None else data
    return StoredMessage(cid, seq, text, 1_700_000_000_000 + seq, f"w{token}#1", token, seq - 1)


async def shard_order(client: Any, cid: str) -> list[int]:
    """The seqs of a connection's records in the order its shard holds them."""
    seqs: list[int] = []
    for shard in (await client.list_shards(StreamName=STREAM))["Shards"]:
        iterator = (
            await client.get_shard_iterator(
                StreamName=STREAM, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
            )
        )["ShardIterator"]
        records = (await client.get_records(ShardIterator=iterator, Limit=10_000))["Records"]
        seqs += [m.seq for r in records if r["PartitionKey"] == cid for m in messages_of(r["Data"])]
    return seqs


async def test_messages_are_read_back_once_per_seq_in_order(client: Any) -> None:
    sink = KinesisMessageSink(client, STREAM)
    batch = [message(seq, cid) for seq in (1, 2, 3) for cid in ("a", "b")]

    await sink.write(batch)
    await sink.write(batch[:4])  # a batch retried after an outage puts its records again

    reader = KinesisMessageReader(client, STREAM)
    assert await reader.messages("a") == [message(s, "a") for s in (1, 2, 3)]
    assert [m.seq for m in await reader.messages("b", from_seq=2)] == [2, 3]
    assert [m.seq for m in await reader.messages("b", limit=2)] == [1, 2]
    assert await reader.messages("nobody") == []
    assert await sink.resume_point("a", 0) is None


async def test_a_stale_owners_late_record_loses_to_the_newer_owners(client: Any) -> None:
    sink = KinesisMessageSink(client, STREAM)
    newer = message(2, token=5, data="newer")
    await sink.write([message(1, token=4), newer])
    await sink.write([message(2, token=4, data="late")])  # Kinesis cannot refuse it

    assert await KinesisMessageReader(client, STREAM).messages("c1") == [message(1, token=4), newer]


async def test_a_batch_is_one_request_whatever_its_connections_rate(client: Any) -> None:
    sink = KinesisMessageSink(client, STREAM)

    await sink.write([message(1, cid) for cid in ("a", "b", "c")])
    assert sink.operations["PutRecords"] == 1

    await sink.write([message(seq, "a") for seq in (4, 2, 3)] + [message(2, "b")])
    assert sink.operations["PutRecords"] == 2  # a's 2, 3 and 4 in one record
    assert sink.operations["records"] == 5

    await sink.write([message(seq, "d") for seq in range(1, sink.max_batch + 1)])
    assert sink.operations["PutRecords"] == 3
    assert await shard_order(client, "a") == [1, 2, 3, 4], "a record holds its run in seq order"
    assert await shard_order(client, "d") == list(range(1, sink.max_batch + 1))


async def test_a_connections_batch_larger_than_a_record_goes_one_record_per_round(
    client: Any,
) -> None:
    sink = KinesisMessageSink(client, STREAM)
    batch = [message(seq, "a", data="x" * LARGE) for seq in (1, 2, 3, 4)] + [message(1, "b")]

    await sink.write(batch)

    assert sink.operations["PutRecords"] == 2  # a's 1-3, then a's 4
    assert await shard_order(client, "a") == [1, 2, 3, 4]
    assert await KinesisMessageReader(client, STREAM).messages("a") == batch[:4]


def failing(indexes: set[int]) -> FaultyClient.Fault:
    """PutRecords that fails the records at `indexes` (not sent) and puts the rest."""

    async def fault(call: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
        records = kwargs["Records"]
        sent = [r for i, r in enumerate(records) if i not in indexes]
        answer = await call(**{**kwargs, "Records": sent}) if sent else {"Records": []}
        results = iter(answer["Records"])
        return {
            "FailedRecordCount": len(indexes),
            "Records": [
                {"ErrorCode": "ProvisionedThroughputExceededException", "ErrorMessage": "slow"}
                if i in indexes
                else next(results)
                for i in range(len(records))
            ],
        }

    return fault


async def test_failed_records_are_retried_alone_before_a_later_record_of_theirs(
    client: Any,
) -> None:
    faulty = FaultyClient(client)
    retried: list[int] = []
    sink = KinesisMessageSink(cast(Any, faulty), STREAM, on_retry=retried.append)
    # a's first record (seqs 1-3) fails, b's lands; a's second (4) is in the next round.
    faulty.plan("put_records", failing({0}))
    large = [message(seq, "a", data="x" * LARGE) for seq in (1, 2, 3, 4)]

    await sink.write([*large, message(1, "b"), message(2, "b")])

    assert await shard_order(client, "a") == [1, 2, 3, 4]
    assert await shard_order(client, "b") == [1, 2]
    assert retried == [3], "the metric counts the failed record's messages"
    assert sink.operations["failed"] == 1
    assert sink.operations["PutRecords"] == 3


async def test_records_failing_past_the_budget_fail_the_batch_as_unavailable(client: Any) -> None:
    faulty = FaultyClient(client)
    sink = KinesisMessageSink(cast(Any, faulty), STREAM, retry_budget_s=0.2)
    faulty.plan("put_records", failing({0}), times=1_000)

    with pytest.raises(SinkUnavailable, match="ProvisionedThroughputExceededException"):
        await sink.write([message(seq, "a", data="x" * LARGE) for seq in (1, 2, 3, 4)])
    assert await shard_order(client, "a") == [], "a's second record never went before its first"


async def test_a_failed_request_is_an_outage_not_a_bad_message(client: Any) -> None:
    faulty = FaultyClient(client)
    sink = KinesisMessageSink(cast(Any, faulty), STREAM)
    faulty.plan("put_records", raising(client_error("ResourceNotFoundException")))

    with pytest.raises(SinkUnavailable, match="ResourceNotFoundException"):
        await sink.write([message(1)])


async def test_what_a_record_cannot_hold_is_refused_alone(client: Any) -> None:
    sink = KinesisMessageSink(client, STREAM)
    too_large = message(2, data="x" * (sink.max_message_bytes + 1))
    escaped = message(3, data="\x01" * (sink.max_message_bytes // 2))  # 6 bytes each in JSON

    with pytest.raises(SinkRefused) as refused:
        await sink.write([message(1), too_large, escaped, message(4)])

    assert refused.value.invalid == {("c1", 2), ("c1", 3)}
    assert [m.seq for m in await KinesisMessageReader(client, STREAM).messages("c1")] == [1, 4]
    assert sink.operations["records"] == 1, "the others still share one record"


async def test_records_written_before_aggregation_are_read_with_the_new_ones(
    client: Any,
) -> None:
    """A stream keeps its records across a rolling upgrade: an old worker's single-message
    records and a new one's aggregated copies of the same seqs meet the one rule."""
    old = [message(seq, token=1) for seq in (1, 2)]
    await client.put_records(
        StreamName=STREAM,
        Records=[{"Data": json.dumps(_single(m)).encode(), "PartitionKey": "c1"} for m in old],
    )
    newer = [message(seq, token=2, data=f"newer {seq}") for seq in (2, 3)]
    await KinesisMessageSink(client, STREAM).write(newer)

    reader = KinesisMessageReader(client, STREAM)
    assert await reader.messages("c1") == [old[0], *newer]
    assert [m.seq for m in await reader.copies("c1")] == [1, 2, 2, 3]


def _single(m: StoredMessage) -> dict[str, Any]:
    """A record of the format before aggregation: one message, its connection id inline."""
    return {
        "connection_id": m.connection_id,
        "seq": m.seq,
        "prev_seq": m.prev_seq,
        "data": m.data,
        "token": m.token,
        "worker_session": m.worker_id,
        "received_at_ms": m.received_at_ms,
    }


async def test_a_batch_larger_than_max_batch_is_refused(client: Any) -> None:
    sink = KinesisMessageSink(client, STREAM)
    with pytest.raises(ValueError, match="max_batch"):
        await sink.write([message(seq) for seq in range(sink.max_batch + 1)])


async def test_a_reader_reads_on_from_where_it_left_each_shard(client: Any) -> None:
    """`wsfleet messages` asks page after page (and --follow every second): the second call
    reads only what was added, not the stream's whole retention again."""
    sink = KinesisMessageSink(client, STREAM)
    reader = KinesisMessageReader(client, STREAM, page=50)
    requests: list[str] = []
    client.meta.events.register(
        "before-send.kinesis.GetRecords", lambda **_: requests.append("GetRecords")
    )
    await sink.write([message(seq) for seq in range(1, 201)])
    assert len(await reader.messages("c1")) == 200
    first = len(requests)

    await sink.write([message(seq) for seq in range(201, 204)])
    again = await reader.messages("c1", from_seq=200)

    assert [m.seq for m in again] == [200, 201, 202, 203]
    # Two shards: each at most the new records' page and the tip's empty answer. Reading the
    # 203 records again from the oldest would take five pages of 50 on c1's shard alone.
    assert len(requests) - first <= 4, (first, len(requests))
    assert [m.seq for m in await KinesisMessageReader(client, STREAM).messages("c1")] == list(
        range(1, 204)
    )


async def test_an_iterator_that_expired_between_reads_starts_the_scan_over(client: Any) -> None:
    """Kinesis iterators live five minutes: a `--follow` left idle longer reads from the oldest
    record again, keeping nothing twice."""
    sink = KinesisMessageSink(client, STREAM)
    faulty = FaultyClient(client)
    reader = KinesisMessageReader(cast(Any, faulty), STREAM)
    await sink.write([message(seq) for seq in (1, 2)])
    assert [m.seq for m in await reader.copies("c1")] == [1, 2]

    await sink.write([message(3)])
    faulty.plan("get_records", raising(client_error("ExpiredIteratorException")))

    assert [m.seq for m in await reader.copies("c1")] == [1, 2, 3]
    assert faulty.calls["get_shard_iterator"] == 4  # two shards, twice from the oldest
