"""What the contract suites cannot see of the PostgreSQL adapters: a waiting receiver is woken
by LISTEN/NOTIFY rather than found by its poll, the schema's version is checked at open and
an unknown one refused by name, migrating twice (or twice at once) is harmless, a database that
does not answer in time is the port's "unavailable", an unreachable server's error never
quotes the password, and a session's renewal does not wait for the process's busy pool."""

import asyncio
import time
from contextlib import AsyncExitStack

import asyncpg
import pytest

from adapters.postgres.db import PostgresDatabase, open_pool
from adapters.postgres.queue import PostgresNotificationQueue
from adapters.postgres.schema import SCHEMA_VERSION, VERSION_TABLE, migrate
from adapters.postgres.store import PostgresConnectionStore
from adapters.system.clock import SystemClock
from application.errors import ConfigurationError, QueueUnavailable, StoreUnavailable
from entrypoints.devstack.service import free_port


async def _migrate(url: str) -> tuple[int, int]:
    pool = await open_pool(url, size=1, check=False)
    try:
        async with pool.acquire() as conn:
            return await migrate(conn)
    finally:
        await pool.close()


async def test_a_waiting_receiver_is_woken_by_a_send_not_by_its_poll(postgres_url: str) -> None:
    await _migrate(postgres_url)
    async with AsyncExitStack() as stack:
        pool = await open_pool(postgres_url, size=2)
        stack.push_async_callback(pool.close)
        db = PostgresDatabase(pool, QueueUnavailable)
        # A poll interval far longer than the test: only the notification can wake it in time.
        receiver = PostgresNotificationQueue(
            db, SystemClock(), listen_url=postgres_url, poll_interval_s=30
        )
        stack.push_async_callback(receiver.close)
        sender = PostgresNotificationQueue(db, SystemClock())
        waiting = asyncio.create_task(receiver.receive(10, wait_s=20))
        await asyncio.sleep(0.5)  # the receiver has claimed nothing and is waiting
        sent = time.monotonic()
        await sender.send(["c1"])
        deliveries = await asyncio.wait_for(waiting, 10)
        assert [d.connection_id for d in deliveries] == ["c1"]
        assert time.monotonic() - sent < 2.0


async def test_a_database_without_the_schema_is_refused_naming_the_command(
    postgres_url: str,
) -> None:
    with pytest.raises(ConfigurationError, match="no wsfleet schema: run `wsfleet migrate`"):
        async with PostgresConnectionStore.open(postgres_url):
            pass


async def test_a_schema_version_this_wsfleet_does_not_know_is_refused_by_name(
    postgres_url: str,
) -> None:
    await _migrate(postgres_url)
    conn = await asyncpg.connect(postgres_url)
    try:
        await conn.execute(f"UPDATE {VERSION_TABLE} SET version = $1", SCHEMA_VERSION + 1)
    finally:
        await conn.close()
    unknown = f"schema version {SCHEMA_VERSION + 1}, which this wsfleet does not know"
    with pytest.raises(ConfigurationError, match=unknown):
        async with PostgresConnectionStore.open(postgres_url):
            pass
    with pytest.raises(ConfigurationError, match=unknown):
        await _migrate(postgres_url)


async def test_migrating_twice_or_twice_at_once_is_harmless(postgres_url: str) -> None:
    first, second = await asyncio.gather(_migrate(postgres_url), _migrate(postgres_url))
    assert sorted([first, second]) == [(0, SCHEMA_VERSION), (SCHEMA_VERSION, SCHEMA_VERSION)]
    assert await _migrate(postgres_url) == (SCHEMA_VERSION, SCHEMA_VERSION)
    async with PostgresConnectionStore.open(postgres_url) as store:
        assert await store.list_connections() == []


async def test_a_database_that_does_not_answer_in_time_is_store_unavailable(
    postgres_url: str,
) -> None:
    """A command stuck behind a row lock past the timeout: outcome unknown, StoreUnavailable."""
    await _migrate(postgres_url)
    async with PostgresConnectionStore.open(postgres_url, timeout_s=1) as store:
        await store.start("c1", "wss://upstream.example/1", 1)
        holder = await asyncpg.connect(postgres_url)
        try:
            async with holder.transaction():
                await holder.execute(
                    "SELECT 1 FROM connections WHERE connection_id = 'c1' FOR UPDATE"
                )
                with pytest.raises(StoreUnavailable, match="TimeoutError"):
                    await store.stop("c1", 2)
        finally:
            await holder.close()
        assert (await store.get("c1")) is not None  # the pool serves again afterwards


async def test_a_renewal_goes_through_while_every_connection_of_the_process_pool_is_taken(
    postgres_url: str,
) -> None:
    """The worker session's commands have a pool of their own: a wave of takes and sink writes
    holding the process's pool must not make a heartbeat wait past its trust window."""
    await _migrate(postgres_url)
    async with AsyncExitStack() as stack:
        busy = await open_pool(postgres_url, size=1)
        stack.push_async_callback(busy.close)
        lane = await open_pool(postgres_url, size=1)
        stack.push_async_callback(lane.close)
        store = PostgresConnectionStore(
            PostgresDatabase(busy, StoreUnavailable, timeout_s=1),
            PostgresDatabase(lane, StoreUnavailable, timeout_s=1),
        )
        await store.open_session("w1#1", 4_000, 10, 1_000)
        async with busy.acquire():  # the process's pool, all taken
            with pytest.raises(StoreUnavailable):  # what a take would meet
                await store.start("c1", "wss://upstream.example/1", 1_500)
            renewed = await store.renew_session("w1#1", 4_000, 0, 10, 2_000)
        assert renewed is not None
        assert renewed.expires_at_ms == 6_000


async def test_an_unreachable_server_is_named_without_its_password() -> None:
    url = f"postgresql://wsfleet:secret-password@127.0.0.1:{free_port()}/fleet"
    with pytest.raises(StoreUnavailable, match="PostgreSQL") as refused:
        async with PostgresConnectionStore.open(url, timeout_s=2):
            pass
    assert "secret-password" not in str(refused.value)
