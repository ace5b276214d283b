"""SqliteDatabase commits concurrent writes together (group commit), and each write still
succeeds or fails on its own."""

import asyncio
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from adapters.sqlite.db import SqliteDatabase
from application.errors import StoreUnavailable


class Refused(Exception):
    pass


async def open_db(path: Path) -> SqliteDatabase:
    return await SqliteDatabase.open(
        path,
        schema="CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY, v TEXT)",
        unavailable=StoreUnavailable,
    )


def insert(k: int) -> Callable[[sqlite3.Connection], int]:
    def run(c: sqlite3.Connection) -> int:
        c.execute("INSERT INTO t VALUES (?, ?)", (k, f"v{k}"))
        if k % 7 == 0:
            raise Refused(k)  # after writing: the savepoint must undo it
        return k

    return run


async def keys(db: SqliteDatabase) -> list[int]:
    return await db.read(lambda c: [r[0] for r in c.execute("SELECT k FROM t ORDER BY k")])


async def test_concurrent_writes_share_commits_and_fail_alone(tmp_path: Path) -> None:
    db = await open_db(tmp_path / "g.sqlite")
    try:
        outcomes = await asyncio.gather(
            *(db.write(insert(k)) for k in range(1, 301)), return_exceptions=True
        )
        for k, outcome in zip(range(1, 301), outcomes, strict=True):
            if k % 7 == 0:
                assert isinstance(outcome, Refused), (k, outcome)
            else:
                assert outcome == k
        assert await keys(db) == [k for k in range(1, 301) if k % 7]
        # 300 writes issued at once: the first runs alone, the rest queue behind it together.
        assert 1 <= db.commits < 30, db.commits
    finally:
        await db.close()


async def test_a_write_is_answered_only_after_it_is_durable(tmp_path: Path) -> None:
    db = await open_db(tmp_path / "d.sqlite")
    try:
        await asyncio.gather(*(db.write(insert(k)) for k in (1, 2, 3)))
        # Another connection (another process, in production) sees all three at once.
        other = sqlite3.connect(tmp_path / "d.sqlite")
        try:
            assert [r[0] for r in other.execute("SELECT k FROM t ORDER BY k")] == [1, 2, 3]
        finally:
            other.close()
    finally:
        await db.close()


async def test_a_group_that_cannot_get_the_write_lock_fails_every_write(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    db = await SqliteDatabase.open(
        path,
        schema="CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY, v TEXT)",
        unavailable=StoreUnavailable,
        busy_timeout_s=0.2,
    )
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # another process holds the host's write lock
        outcomes = await asyncio.gather(
            *(db.write(insert(k)) for k in (1, 2, 3)), return_exceptions=True
        )
        assert all(isinstance(o, StoreUnavailable) for o in outcomes), outcomes
        holder.execute("ROLLBACK")
        assert await db.write(insert(4)) == 4  # and the database works again afterwards
        assert await keys(db) == [4]
    finally:
        holder.close()
        await db.close()


async def test_writes_after_close_are_refused(tmp_path: Path) -> None:
    db = await open_db(tmp_path / "c.sqlite")
    await db.close()
    with pytest.raises(RuntimeError, match="closed"):
        await db.write(insert(1))


async def test_a_block_that_fails_under_closed_on_error_closes_the_database(
    tmp_path: Path,
) -> None:
    """What every SQLite adapter's open relies on: one that fails after the file is open
    (a refused schema, a bad option) leaves no open connection behind."""
    db = await open_db(tmp_path / "db.sqlite")

    with pytest.raises(Refused), db.closed_on_error():
        raise Refused

    with pytest.raises(RuntimeError, match="is closed"):
        await db.read(lambda c: c.execute("SELECT 1").fetchall())
    for _ in range(100):  # the close is queued on the database's thread, not waited for
        if db._conn is None:
            break
        await asyncio.sleep(0.01)
    assert db._conn is None
    await db.close()  # still idempotent
