"""The `queue` fixture: every NotificationQueue implementation, for the one contract suite.

Each factory builds a queue with a short visibility timeout plus a way to put a raw body on it
(malformed hints). Adding an implementation is one entry in QUEUE_FACTORIES. The fixture lives
here rather than in conftest.py so the store's fixtures and these evolve independently; test
modules import `queue_fixture`.
"""

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path

import aioboto3
import attrs
import pytest

from adapters.memory.queue import InMemoryNotificationQueue
from adapters.sqlite.queue import SqliteNotificationQueue
from adapters.sqs import SqsNotificationQueue, create_queue
from adapters.system.clock import SystemClock
from application.errors import QueueUnavailable
from application.ports.queue import NotificationQueue
from entrypoints.devstack.aws import LocalAws

# Short, so redelivery tests take about a second (SQS counts visibility in whole seconds).
VISIBILITY_TIMEOUT_S = 1


@attrs.frozen
class QueueUnderTest:
    queue: NotificationQueue
    inject_raw: Callable[[str], Awaitable[None]]  # enqueue a body as a foreign producer would


QueueFactory = Callable[[pytest.FixtureRequest, AsyncExitStack], Awaitable[QueueUnderTest]]


async def memory_queue(request: pytest.FixtureRequest, stack: AsyncExitStack) -> QueueUnderTest:
    queue = InMemoryNotificationQueue(SystemClock(), visibility_timeout_s=VISIBILITY_TIMEOUT_S)

    async def inject_raw(body: str) -> None:
        queue.inject_raw(body)

    return QueueUnderTest(queue=queue, inject_raw=inject_raw)


async def sqs_queue(request: pytest.FixtureRequest, stack: AsyncExitStack) -> QueueUnderTest:
    aws: LocalAws = request.getfixturevalue("aws")
    client = await stack.enter_async_context(
        aioboto3.Session().client("sqs", endpoint_url=aws.moto_url, region_name=aws.region)
    )
    url = await create_queue(client, "contract-hints", VISIBILITY_TIMEOUT_S, with_dlq=False)
    queue = SqsNotificationQueue(client, url, visibility_timeout_s=VISIBILITY_TIMEOUT_S)

    async def inject_raw(body: str) -> None:
        await client.send_message(QueueUrl=url, MessageBody=body)

    return QueueUnderTest(queue=queue, inject_raw=inject_raw)


async def sqlite_queue(request: pytest.FixtureRequest, stack: AsyncExitStack) -> QueueUnderTest:
    tmp_path: Path = request.getfixturevalue("tmp_path")
    queue = await stack.enter_async_context(
        SqliteNotificationQueue.open(
            tmp_path / "hints.sqlite", SystemClock(), visibility_timeout_s=VISIBILITY_TIMEOUT_S
        )
    )

    async def inject_raw(body: str) -> None:
        await queue.send_raw([body])

    return QueueUnderTest(queue=queue, inject_raw=inject_raw)


async def postgres_queue(request: pytest.FixtureRequest, stack: AsyncExitStack) -> QueueUnderTest:
    from adapters.postgres.db import PostgresDatabase, open_pool
    from adapters.postgres.queue import PostgresNotificationQueue
    from tests.support.postgres import migrated_database

    url = await migrated_database(request, stack)
    pool = await open_pool(url, size=2)
    stack.push_async_callback(pool.close)
    queue = PostgresNotificationQueue(
        PostgresDatabase(pool, QueueUnavailable),
        SystemClock(),
        listen_url=url,
        visibility_timeout_s=VISIBILITY_TIMEOUT_S,
    )
    stack.push_async_callback(queue.close)

    async def inject_raw(body: str) -> None:
        await queue.send_raw([body])

    return QueueUnderTest(queue=queue, inject_raw=inject_raw)


QUEUE_FACTORIES: dict[str, QueueFactory] = {
    "memory": memory_queue,
    "sqs": sqs_queue,
    "sqlite": sqlite_queue,
    "postgres": postgres_queue,
}


@pytest.fixture(name="queue", params=list(QUEUE_FACTORIES))
async def queue_fixture(request: pytest.FixtureRequest) -> AsyncIterator[QueueUnderTest]:
    async with AsyncExitStack() as stack:
        yield await QUEUE_FACTORIES[request.param](request, stack)
