"""The `store` and `sink` fixtures: every ConnectionStore and MessageSink implementation, for
the contract suites. Adding an implementation is one factory and one entry in the dict.

A factory gets the pytest request (for other fixtures: `aws`, `tmp_path`) and an
AsyncExitStack that closes whatever it opened after the test. AWS clients are created per test:
an aiobotocore client is bound to the event loop it was made on, and each test has its own.
"""

import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path

import attrs
import pytest

from adapters.dynamodb.message_sink import DynamoDbMessageSink
from adapters.dynamodb.tables import create_tables
from adapters.faults.sink import FaultInjectingSink
from adapters.kinesis import KinesisMessageReader, KinesisMessageSink, create_stream
from adapters.memory.sink import InMemoryMessageSink
from adapters.memory.store import InMemoryConnectionStore
from adapters.sqlite.message_sink import SqliteMessageSink
from adapters.sqlite.store import SqliteConnectionStore
from adapters.system.clock import SystemClock
from application.errors import SinkUnavailable
from application.ports import ConnectionStore, MessageSink, StoredMessage
from entrypoints.devstack.aws import LocalAws
from entrypoints.devstack.aws import client as aws_client
from tests.support.dynamodb import TABLES, dynamodb_client, read_messages
from tests.support.postgres import migrated_database

# More shards than the default would make the pagination test cheaper to fool; 16 is the
# production default and makes "every shard is paged" a real property of the test.
DYNAMODB_SHARDS = 16

# Items per page of the DynamoDB sink's resume-point Query: small, so that the contract's
# multi-page cases cross page boundaries with a few hundred messages (1 MB pages would take
# thousands of writes; test_dynamodb_sink.py covers those).
DYNAMODB_QUERY_PAGE = 50

StoreFactory = Callable[[pytest.FixtureRequest, AsyncExitStack], Awaitable[ConnectionStore]]


async def memory_store(request: pytest.FixtureRequest, stack: AsyncExitStack) -> ConnectionStore:
    return InMemoryConnectionStore()


async def dynamodb_store(request: pytest.FixtureRequest, stack: AsyncExitStack) -> ConnectionStore:
    # Imported here: while one store is being rewritten, the others' contract still runs.
    from adapters.dynamodb.connection_store import DynamoDbConnectionStore

    aws: LocalAws = request.getfixturevalue("aws")
    client = await stack.enter_async_context(dynamodb_client(aws))
    await create_tables(client, TABLES, DYNAMODB_SHARDS)
    return DynamoDbConnectionStore(client, tables=TABLES, shards=DYNAMODB_SHARDS)


async def sqlite_store(request: pytest.FixtureRequest, stack: AsyncExitStack) -> ConnectionStore:
    tmp_path: Path = request.getfixturevalue("tmp_path")
    return await stack.enter_async_context(SqliteConnectionStore.open(tmp_path / "store.sqlite"))


async def postgres_store(request: pytest.FixtureRequest, stack: AsyncExitStack) -> ConnectionStore:
    from adapters.postgres.store import PostgresConnectionStore

    url = await migrated_database(request, stack)
    return await stack.enter_async_context(PostgresConnectionStore.open(url))


STORE_FACTORIES: dict[str, StoreFactory] = {
    "memory": memory_store,
    "dynamodb": dynamodb_store,
    "sqlite": sqlite_store,
    "postgres": postgres_store,
}


@pytest.fixture(params=list(STORE_FACTORIES))
async def store(request: pytest.FixtureRequest) -> AsyncIterator[ConnectionStore]:
    async with AsyncExitStack() as stack:
        yield await STORE_FACTORIES[request.param](request, stack)


@attrs.frozen
class SinkUnderTest:
    sink: MessageSink
    # Everything stored for a connection, in seq order, read the way the sink's own storage
    # is read (a test-side reader: the port itself has no read).
    read: Callable[[str], Awaitable[list[StoredMessage]]]
    # What the sink can do beyond storing: the cases marked `needs("fencing")` or
    # `needs("resume_point")` are skipped for a sink without it (Kinesis: a stream refuses
    # nothing and cannot say what it holds; its reader's rule stands in for the first).
    can: frozenset[str] = frozenset({"fencing", "resume_point"})


SinkFactory = Callable[[pytest.FixtureRequest, AsyncExitStack], Awaitable[SinkUnderTest]]


async def memory_sink(request: pytest.FixtureRequest, stack: AsyncExitStack) -> SinkUnderTest:
    sink = InMemoryMessageSink()

    async def read(connection_id: str) -> list[StoredMessage]:
        return [sink.messages[(connection_id, seq)] for seq in sink.seqs(connection_id)]

    return SinkUnderTest(sink, read)


async def faults_sink(request: pytest.FixtureRequest, stack: AsyncExitStack) -> SinkUnderTest:
    """The fault injector with no fault planned is a sink like any other (over the memory one)."""
    inner = await memory_sink(request, stack)
    return SinkUnderTest(FaultInjectingSink(inner.sink, SystemClock()), inner.read)


async def dynamodb_sink(request: pytest.FixtureRequest, stack: AsyncExitStack) -> SinkUnderTest:
    aws: LocalAws = request.getfixturevalue("aws")
    client = await stack.enter_async_context(dynamodb_client(aws))
    await create_tables(client, TABLES)

    async def read(connection_id: str) -> list[StoredMessage]:
        return await read_messages(client, TABLES.messages, connection_id)

    sink = DynamoDbMessageSink(client, TABLES.messages, query_page_limit=DYNAMODB_QUERY_PAGE)
    return SinkUnderTest(sink, read)


async def sqlite_sink(request: pytest.FixtureRequest, stack: AsyncExitStack) -> SinkUnderTest:
    tmp_path: Path = request.getfixturevalue("tmp_path")
    sink = await stack.enter_async_context(SqliteMessageSink.open(tmp_path / "messages.sqlite"))
    return SinkUnderTest(sink, sink.read)


async def postgres_sink(request: pytest.FixtureRequest, stack: AsyncExitStack) -> SinkUnderTest:
    from adapters.postgres.db import PostgresDatabase, open_pool
    from adapters.postgres.message_sink import PostgresMessageSink

    pool = await open_pool(await migrated_database(request, stack), size=2)
    stack.push_async_callback(pool.close)
    # Pages of 50 links, so the multi-page case crosses pages (as DYNAMODB_QUERY_PAGE does).
    sink = PostgresMessageSink(
        PostgresDatabase(pool, SinkUnavailable), link_page=DYNAMODB_QUERY_PAGE
    )
    return SinkUnderTest(sink, sink.read)


async def kinesis_sink(request: pytest.FixtureRequest, stack: AsyncExitStack) -> SinkUnderTest:
    aws: LocalAws = request.getfixturevalue("aws")
    client = await stack.enter_async_context(aws_client("kinesis", aws.moto_url, region=aws.region))
    stream = f"contract-{secrets.token_hex(4)}"
    await create_stream(client, stream, shards=2)
    stack.push_async_callback(client.delete_stream, StreamName=stream)
    reader = KinesisMessageReader(client, stream)
    return SinkUnderTest(KinesisMessageSink(client, stream), reader.messages, can=frozenset())


SINK_FACTORIES: dict[str, SinkFactory] = {
    "memory": memory_sink,
    "faults": faults_sink,
    "dynamodb": dynamodb_sink,
    "sqlite": sqlite_sink,
    "postgres": postgres_sink,
    "kinesis": kinesis_sink,
}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "needs(capability): a sink contract case for sinks that can (fencing, ...)"
    )


@pytest.fixture(params=list(SINK_FACTORIES))
async def sink(request: pytest.FixtureRequest) -> AsyncIterator[SinkUnderTest]:
    async with AsyncExitStack() as stack:
        made = await SINK_FACTORIES[request.param](request, stack)
        for mark in request.node.iter_markers("needs"):
            if mark.args[0] not in made.can:
                pytest.skip(f"the {request.param} sink has no {mark.args[0]}")
        yield made
