"""The chaos harness tells a worker frozen inside a store transaction on PostgreSQL (its row
locks hold up the takeovers of its connections) from one frozen outside it
(tests/chaos/backends.py, `postgres_locks_held`)."""

import os

import asyncpg

from adapters.postgres.db import migrate_database
from entrypoints.devstack.postgres import LocalPostgres
from tests.chaos.backends import postgres_locks_held


async def test_a_process_inside_a_transaction_holding_a_store_row_lock_is_named(
    postgres_server: LocalPostgres, postgres_url: str
) -> None:
    await migrate_database(postgres_url)
    conn = await asyncpg.connect(postgres_url)
    try:
        assert await postgres_locks_held(postgres_url, postgres_server, os.getpid()) == []
        async with conn.transaction():
            await conn.execute("SELECT * FROM sessions FOR UPDATE")
            held = await postgres_locks_held(postgres_url, postgres_server, os.getpid())
        assert held == ["store"]
        assert await postgres_locks_held(postgres_url, postgres_server, os.getpid()) == []
    finally:
        await conn.close()
