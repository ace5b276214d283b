"""The postgres composition root (entrypoints/postgres.py) on a real server: where its hint
queue LISTENs."""

import asyncpg

from adapters.postgres.db import migrate_database
from entrypoints.containers import provide, shutdown
from entrypoints.devstack.postgres import LocalPostgres, fresh_database
from entrypoints.postgres import PostgresContainer
from entrypoints.settings import load_settings


async def listeners(server: LocalPostgres) -> dict[str, int]:
    """database -> sessions whose last statement was a LISTEN."""
    admin = await asyncpg.connect(server.url())
    try:
        rows = await admin.fetch(
            "SELECT datname, count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN %' "
            "GROUP BY datname"
        )
    finally:
        await admin.close()
    return {row[0]: row[1] for row in rows}


async def test_the_queue_listens_on_the_pool_url_unless_a_listen_url_is_given(
    postgres_server: LocalPostgres,
) -> None:
    async with (
        fresh_database(postgres_server, "pool") as url,
        fresh_database(postgres_server, "listen") as listen_url,
    ):
        await migrate_database(url)
        where = {"WSFLEET_BACKEND": "postgres", "WSFLEET_POSTGRES_URL": url}
        found = {}
        for name, env in (
            ("default", where),
            ("listen-url", {**where, "WSFLEET_POSTGRES_LISTEN_URL": listen_url}),
        ):
            container = PostgresContainer(settings=load_settings(env))
            try:
                queue = await provide(container.queue)
                assert await queue.receive(1, wait_s=0.1) == []  # a wait opens the listener
                found[name] = await listeners(postgres_server)
            finally:
                await shutdown(container)

    pool_db, listen_db = url.rsplit("/", 1)[1], listen_url.rsplit("/", 1)[1]
    assert found["default"] == {pool_db: 1}
    # (The first container's listener may not have left pg_stat_activity yet.)
    assert found["listen-url"].get(listen_db) == 1
