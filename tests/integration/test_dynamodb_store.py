"""DynamoDbConnectionStore beyond the shared contract: what each operation costs in requests,
the item layout (the article's attributes, the sparse sharded index), and the failure paths
moto does not simulate (throttling, conflicts, unprocessed keys), injected by a client wrapper."""

import asyncio
import logging
import socket
from collections.abc import AsyncIterator
from typing import Any

import attrs
import pytest

from adapters.dynamodb import schema
from adapters.dynamodb.connection_store import DynamoDbConnectionStore
from adapters.dynamodb.items import event_to_item
from adapters.dynamodb.tables import create_tables
from adapters.memory.store import InMemoryConnectionStore
from application.errors import StoreUnavailable
from domain import InvalidTransition, StopRequested
from entrypoints.devstack.aws import LocalAws
from tests.support.dynamodb import (
    TABLES,
    FaultyClient,
    client_error,
    dynamodb_client,
    half_batch_get,
    raising,
)

T = 1_700_000_000_000
LEASE = 20_000
URL = "wss://upstream.example/s"


@pytest.fixture
async def client(aws: LocalAws) -> AsyncIterator[Any]:
    async with dynamodb_client(aws) as client:
        await create_tables(client, TABLES)
        yield client


@pytest.fixture
def faulty(client: Any) -> FaultyClient:
    return FaultyClient(client)


def new_store(client: Any, **options: Any) -> DynamoDbConnectionStore:
    return DynamoDbConnectionStore(client, tables=TABLES, shards=4, **options)


async def raw_item(client: Any, cid: str) -> dict[str, Any]:
    response = await client.get_item(
        TableName=TABLES.connections, Key={"pk": {"S": f"CONN#{cid}"}}, ConsistentRead=True
    )
    return dict(response["Item"])


async def leased(store: DynamoDbConnectionStore, cid: str = "c1") -> Any:
    await store.start(cid, URL, T)
    conn = await store.try_acquire(cid, "w1", LEASE, T)
    assert conn is not None
    return conn


# --- what operations cost ----------------------------------------------------------------------


async def test_a_heartbeat_is_one_update_with_no_read_and_no_log_write(client: Any) -> None:
    store = new_store(client)
    conn = await leased(store)
    store.requests.clear()

    for i in range(1, 4):
        renewed = await store.renew("c1", "w1", conn.token, LEASE, i // 2, T + i * 1_000)
        assert renewed.renewed

    assert store.requests == {"UpdateItem": 3}
    assert len(await store.history("c1")) == 2  # started, acquired: renewals are not logged


async def test_a_worker_without_the_checkpoint_in_memory_reads_once_then_renews_cheaply(
    client: Any,
) -> None:
    conn = await leased(new_store(client))
    restarted = new_store(client)  # e.g. another adapter instance in the same worker

    first = await restarted.renew("c1", "w1", conn.token, LEASE, 5, T + 1)
    requests_after_first = dict(restarted.requests)
    second = await restarted.renew("c1", "w1", conn.token, LEASE, 6, T + 2)

    assert first.renewed
    assert second.renewed
    assert requests_after_first == {"GetItem": 1, "UpdateItem": 1}
    assert restarted.requests == {"GetItem": 1, "UpdateItem": 2}
    assert second.connection == await restarted.get("c1")
    assert second.connection is not None
    assert (second.connection.checkpoint_seq, second.connection.version) == (6, 6)


async def test_a_refused_renew_returns_the_refusing_state_without_a_read(client: Any) -> None:
    store = new_store(client)
    old = await leased(store)
    new = await store.try_acquire("c1", "w2", LEASE, T + LEASE + 1)
    store.requests.clear()

    refused = await store.renew("c1", "w1", old.token, LEASE, 0, T + LEASE + 2)

    assert not refused.renewed
    assert refused.connection == new
    assert store.requests == {"UpdateItem": 1}


async def test_a_renew_asking_for_less_than_remains_costs_one_more_write(client: Any) -> None:
    store = new_store(client)
    conn = await leased(store)
    await store.renew("c1", "w1", conn.token, 3 * LEASE, 0, T + 1)
    store.requests.clear()

    kept = await store.renew("c1", "w1", conn.token, LEASE, 1, T + 2)

    assert kept.connection is not None
    assert kept.connection.expires_at_ms == T + 1 + 3 * LEASE
    assert kept.connection.checkpoint_seq == 1
    assert store.requests == {"UpdateItem": 2}  # the fast write's condition, then the exact one


async def test_an_ownership_change_is_one_read_and_one_transaction(client: Any) -> None:
    store = new_store(client)
    await store.start("c1", URL, T)
    store.requests.clear()

    await store.try_acquire("c1", "w1", LEASE, T)
    refused = await store.try_acquire("c1", "w2", LEASE, T + 1)

    assert refused is None
    assert store.requests == {"GetItem": 2, "TransactWriteItems": 1}  # a refusal is just a read


async def test_a_repeated_start_is_a_read_only(client: Any) -> None:
    store = new_store(client)
    await store.start("c1", URL, T)
    store.requests.clear()

    await store.start("c1", URL, T + 1)

    assert store.requests == {"GetItem": 1}


async def test_orphan_queries_ask_every_shard_once_per_page(client: Any) -> None:
    store = new_store(client)
    await store.start("c1", URL, T)
    store.requests.clear()

    pages = [page async for page in store.iter_orphans(T + 1, 100)]
    await store.next_available_at(T)

    assert [[c.connection_id for c in page] for page in pages] == [["c1"]]
    assert store.requests == {"Query": 4 + 4}  # 4 shards, twice


async def test_operations_are_counted_with_the_memory_stores_names(client: Any) -> None:
    dynamodb = new_store(client)
    memory = InMemoryConnectionStore()
    for store in (dynamodb, memory):
        await store.start("c1", URL, T)
        conn = await store.try_acquire("c1", "w1", LEASE, T)
        assert conn is not None
        await store.renew("c1", "w1", conn.token, LEASE, 1, T + 1)
        await store.get("c1")
        await store.desired_states(["c1"])
        [page async for page in store.iter_orphans(T, 10)]
        await store.next_available_at(T)
        await store.history("c1")
        await store.end_stream("c1", "w1", conn.token, 2, T + 2)
        await store.stop("c1", T + 3)

    assert dynamodb.operations == memory.operations


# --- the stored item ---------------------------------------------------------------------------


async def test_the_item_keeps_the_articles_attributes_and_leaves_the_index_when_stopped(
    client: Any,
) -> None:
    store = new_store(client)
    conn = await leased(store)
    await store.renew("c1", "w1", conn.token, LEASE, 12, T + 1)

    item = await raw_item(client, "c1")

    assert item["pk"] == {"S": "CONN#c1"}
    assert item["desired_state"] == {"S": "STARTED"}
    assert item["ws_url"] == {"S": URL}
    assert item["last_seq"] == {"N": "12"}
    assert item["lease_owner"] == {"S": "w1"}
    assert item["lease_token"] == {"N": "1"}
    assert item["lease_expires_at_ms"] == {"N": str(T + 1 + LEASE)}
    assert item["available_at_ms"] == item["lease_expires_at_ms"]
    assert item["updated_at_ms"] == {"N": str(T + 1)}
    assert item["orphan_shard"] == {"S": schema.orphan_shard("c1", 4)}

    await store.stop("c1", T + 2)
    stopped = await raw_item(client, "c1")
    assert "orphan_shard" not in stopped  # sparse: stopped connections cost the index nothing
    assert stopped["stop_reason"] == {"S": "REQUESTED"}
    await store.start("c1", URL, T + 3)
    restarted = await raw_item(client, "c1")
    assert "stop_reason" not in restarted
    assert restarted["orphan_shard"] == item["orphan_shard"]


async def test_the_event_log_holds_codec_json_keyed_by_version(client: Any) -> None:
    store = new_store(client)
    await store.start("c1", URL, T)

    response = await client.query(
        TableName=TABLES.events,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": "CONN#c1"}},
    )

    (item,) = response["Items"]
    assert item["sk"] == {"N": "1"}
    assert item["event_type"] == {"S": "ConnectionStarted"}
    assert '"ws_url":"wss://upstream.example/s"' in item["event"]["S"]


async def test_an_event_log_ahead_of_the_state_is_reported_not_retried(client: Any) -> None:
    store = new_store(client)
    state = (await store.start("c1", URL, T)).connection
    stray = StopRequested(connection_id="c1", version=state.version + 1, at_ms=T)
    await client.put_item(TableName=TABLES.events, Item=event_to_item(stray))

    with pytest.raises(InvalidTransition, match="event log"):
        await store.stop("c1", T + 1)
    assert await store.get("c1") == state


# --- failures ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("ProvisionedThroughputExceededException", 400),
        ("ThrottlingException", 400),
        ("RequestLimitExceeded", 400),
        ("InternalServerError", 500),
        ("ServiceUnavailable", 503),
    ],
)
async def test_throttling_and_server_errors_become_store_unavailable(
    faulty: FaultyClient, code: str, status: int
) -> None:
    store = new_store(faulty)
    conn = await leased(store)
    error = client_error(code, status)
    faulty.plan("get_item", raising(error))
    faulty.plan("transact_write_items", raising(error))
    faulty.plan("update_item", raising(error))
    faulty.plan("query", raising(error))
    faulty.plan("batch_get_item", raising(error))

    with pytest.raises(StoreUnavailable, match=code):
        await store.get("c1")
    await store.get("c1")  # the next call is fine
    with pytest.raises(StoreUnavailable, match=code):
        await store.stop("c1", T + 1)
    with pytest.raises(StoreUnavailable, match=code):
        await store.renew("c1", "w1", conn.token, LEASE, 0, T + 1)
    with pytest.raises(StoreUnavailable, match=code):
        await store.history("c1")
    with pytest.raises(StoreUnavailable, match=code):
        await store.desired_states(["c1"])


async def test_a_throttled_transaction_item_becomes_store_unavailable(faulty: FaultyClient) -> None:
    store = new_store(faulty)
    await store.start("c1", URL, T)
    faulty.plan(
        "transact_write_items",
        raising(
            client_error(
                "TransactionCanceledException",
                CancellationReasons=[{"Code": "ThrottlingError"}, {"Code": "None"}],
            )
        ),
    )

    with pytest.raises(StoreUnavailable, match="throttled"):
        await store.stop("c1", T + 1)


async def test_an_unreachable_endpoint_becomes_store_unavailable(aws: LocalAws) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    unreachable = attrs.evolve(aws, dynamodb_url=f"http://127.0.0.1:{port}")
    async with dynamodb_client(
        unreachable, retries={"max_attempts": 1}, connect_timeout=1, read_timeout=1
    ) as client:
        store = new_store(client)
        with pytest.raises(StoreUnavailable):
            await store.get("c1")
        with pytest.raises(StoreUnavailable):
            await store.start("c1", URL, T)


async def test_errors_that_are_not_transient_are_raised_unchanged(aws: LocalAws) -> None:
    async with dynamodb_client(aws) as client:  # no tables: a deployment error
        store = new_store(client)
        with pytest.raises(Exception, match="ResourceNotFound") as raised:
            await store.get("c1")
    assert not isinstance(raised.value, StoreUnavailable)


async def test_a_transaction_conflict_is_retried(faulty: FaultyClient) -> None:
    store = new_store(faulty)
    await store.start("c1", URL, T)
    conflict = client_error(
        "TransactionCanceledException",
        CancellationReasons=[{"Code": "TransactionConflict"}, {"Code": "None"}],
    )
    faulty.plan("transact_write_items", raising(conflict), times=2)

    conn = await store.try_acquire("c1", "w1", LEASE, T)

    assert conn is not None
    assert faulty.calls["transact_write_items"] == 4  # start, two conflicts, the acquire


async def test_an_acquire_whose_response_was_lost_is_recognised_as_won(
    faulty: FaultyClient,
) -> None:
    """GIVEN a transaction that is applied but answered with a failure (a retry after a lost
    response meets its own write) THEN the adapter sees its own state and reports success."""
    store = new_store(faulty)
    await store.start("c1", URL, T)

    async def applied_then_retried(call: Any, kwargs: dict[str, Any]) -> Any:
        await call(**kwargs)
        return await call(**kwargs)  # fails: the condition no longer holds

    faulty.plan("transact_write_items", applied_then_retried)

    conn = await store.try_acquire("c1", "w1", LEASE, T)

    assert conn is not None
    assert conn == await store.get("c1")
    assert conn.owner == "w1"


async def test_a_renew_conflicting_with_a_transaction_is_retried(faulty: FaultyClient) -> None:
    store = new_store(faulty)
    conn = await leased(store)
    faulty.plan("update_item", raising(client_error("TransactionConflictException")))

    renewed = await store.renew("c1", "w1", conn.token, LEASE, 3, T + 1)

    assert renewed.renewed
    assert faulty.calls["update_item"] == 2


async def test_losing_races_is_not_logged_as_a_problem(
    client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    store = new_store(client)
    await store.start("c1", URL, T)
    caplog.set_level(logging.INFO, logger="adapters")

    results = await asyncio.gather(*(store.try_acquire("c1", f"w{i}", LEASE, T) for i in range(10)))

    assert sum(r is not None for r in results) == 1
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_unprocessed_keys_are_fetched_again(faulty: FaultyClient) -> None:
    store = new_store(faulty, retry_base_s=0.001)
    ids = [f"c{i}" for i in range(150)]
    for cid in ids[:10]:
        await store.start(cid, URL, T)
    faulty.plan("batch_get_item", half_batch_get, times=3)

    states = await store.desired_states(ids)

    assert sorted(states) == sorted(ids[:10])
    assert faulty.calls["batch_get_item"] >= 4


async def test_keys_left_unprocessed_too_long_become_store_unavailable(
    faulty: FaultyClient,
) -> None:
    store = new_store(faulty, retry_base_s=0.001, max_attempts=3)
    await store.start("c1", URL, T)
    faulty.plan("batch_get_item", half_batch_get, times=10)

    with pytest.raises(StoreUnavailable, match="unprocessed"):
        await store.desired_states(["c1", "c2", "c3", "c4"])
