"""SQLite adapters never let a cursor leave their database thread (found by tests/chaos: a
cursor freed on the event loop's thread reset the shared cached statement while the database
thread was stepping it, failing one write in about a thousand with "bad parameter or other API
misuse")."""

import asyncio
import sqlite3
from pathlib import Path

import pytest

from adapters.sqlite.db import SqliteDatabase
from adapters.sqlite.message_sink import SqliteMessageSink
from application.errors import SinkUnavailable
from application.ports.sink import StoredMessage


async def test_concurrent_batches_of_upserts_all_succeed(tmp_path: Path) -> None:
    async with SqliteMessageSink.open(tmp_path / "m.sqlite", synchronous="OFF") as sink:

        async def writer(cid: str) -> None:
            for start in range(1, 1_500, 10):
                batch = [
                    StoredMessage(cid, seq, f"{cid}:{seq}", 0, "w", 1, seq - 1)
                    for seq in range(start, start + 10)
                ]
                await sink.write(batch)
                await sink.write(batch[:3])  # rewrites too, as after a takeover

        await asyncio.gather(*(writer(f"c{i}") for i in range(8)))
        assert await sink.seqs("c7") == list(range(1, 1_501))


async def test_a_call_returning_a_cursor_is_refused_and_rolled_back(tmp_path: Path) -> None:
    db = await SqliteDatabase.open(
        tmp_path / "x.sqlite", schema="CREATE TABLE t (v INTEGER)", unavailable=SinkUnavailable
    )
    try:
        with pytest.raises(TypeError, match="returned a cursor"):
            await db.write(lambda c: c.execute("INSERT INTO t VALUES (1)"))

        def count(c: sqlite3.Connection) -> int:
            return int(c.execute("SELECT COUNT(*) FROM t").fetchone()[0])

        assert await db.read(count) == 0
    finally:
        await db.close()
