"""What only the SQLite adapters have: a file, a lock shared between processes, a bounded queue.
The port behaviour itself is in tests/contract; this covers what no other adapter could get
wrong the same way."""

import asyncio
import sqlite3
import sys
from pathlib import Path

import pytest

from adapters.memory.clock import FakeClock
from adapters.sqlite import store_sql
from adapters.sqlite.queue import SqliteNotificationQueue
from adapters.sqlite.store import SqliteConnectionStore
from adapters.system.clock import SystemClock
from application.errors import ConfigurationError, QueueUnavailable, StoreUnavailable
from domain import LeaseTakenOver

URL = "wss://upstream.example/stream"
NOW = 1_700_000_000_000

# Holds the database's write lock until killed: a worker process dying mid-transaction.
LOCK_HOLDER = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
db.execute("UPDATE connections SET owner = 'zombie'")
print("locked", flush=True)
time.sleep(60)
"""


async def test_missing_data_directory_is_a_configuration_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir"
    with pytest.raises(ConfigurationError, match=str(missing)):
        await SqliteConnectionStore.connect(missing / "wsfleet.sqlite")
    with pytest.raises(ConfigurationError, match=str(missing)):
        await SqliteNotificationQueue.connect(missing / "wsfleet.sqlite", SystemClock())
    assert not missing.exists()  # nothing was created on the way


async def test_a_file_that_is_not_a_database_is_a_configuration_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not a database, " * 100)
    with pytest.raises(ConfigurationError, match=str(path)):
        await SqliteConnectionStore.connect(path)


async def test_invalid_synchronous_setting_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="synchronous"):
        await SqliteConnectionStore.connect(tmp_path / "db.sqlite", synchronous="SOMETIMES")


async def test_the_store_connection_uses_the_settings_it_was_given(tmp_path: Path) -> None:
    """busy_timeout_s and synchronous reach the connection itself (PRAGMAs are per
    connection): a setting lost on the way would be ignored silently."""
    async with SqliteConnectionStore.open(
        tmp_path / "db.sqlite", busy_timeout_s=0.25, synchronous="NORMAL"
    ) as store:
        db = store._db  # the store's own connection; no public API reads its PRAGMAs
        assert await db.read(lambda c: c.execute("PRAGMA busy_timeout").fetchone()[0]) == 250
        assert await db.read(lambda c: c.execute("PRAGMA synchronous").fetchone()[0]) == 1
    async with SqliteConnectionStore.open(tmp_path / "db.sqlite") as store:  # the defaults
        db = store._db
        assert await db.read(lambda c: c.execute("PRAGMA busy_timeout").fetchone()[0]) == 5000
        assert await db.read(lambda c: c.execute("PRAGMA synchronous").fetchone()[0]) == 2


async def test_lock_held_past_busy_timeout_is_store_unavailable_until_its_holder_dies(
    tmp_path: Path,
) -> None:
    """GIVEN another process holding the write lock mid-transaction
    WHEN the store writes THEN it waits busy_timeout and raises StoreUnavailable (not a crash);
    once the holder is SIGKILLed, its transaction is gone and writes succeed."""
    path = tmp_path / "fleet.sqlite"
    async with SqliteConnectionStore.open(path, busy_timeout_s=0.2) as store:
        await store.start("conn-1", URL, NOW)
        await store.open_session("worker-a", 60_000, 10, NOW)
        holder = await asyncio.create_subprocess_exec(
            sys.executable, "-c", LOCK_HOLDER, str(path), stdout=asyncio.subprocess.PIPE
        )
        try:
            assert holder.stdout is not None
            assert (await holder.stdout.readline()).strip() == b"locked"
            with pytest.raises(StoreUnavailable, match="locked"):
                await store.try_acquire("conn-1", "worker-a", NOW + 1)
            assert (await store.get("conn-1")) is not None  # readers are never blocked (WAL)
        finally:
            holder.kill()
            await holder.wait()

        acquired = await store.try_acquire("conn-1", "worker-a", NOW + 2)
        assert acquired is not None
        assert (acquired.owner, acquired.token) == ("worker-a", 1)


async def test_orphan_pages_return_every_orphan_once_even_when_all_share_one_time(
    tmp_path: Path,
) -> None:
    """Never-leased connections all have not_before_ms 0: the keyset must break the tie; a dead
    owner's connections are paged by id the same way."""
    async with SqliteConnectionStore.open(tmp_path / "db.sqlite") as store:
        ids = [f"conn-{i:03d}" for i in range(23)]
        for cid in ids:
            await store.start(cid, URL, NOW)
        await store.open_session("worker-a", 60_000, 10, NOW)
        await store.try_acquire("conn-007", "worker-a", NOW)

        pages = [page async for page in store.iter_orphans(NOW + 1, page_size=5)]

        assert [len(p) for p in pages] == [5, 5, 5, 5, 2]
        assert sorted(c.connection_id for p in pages for c in p) == sorted(set(ids) - {"conn-007"})
        for cid in ids[:12]:
            await store.try_acquire(cid, "worker-a", NOW + 2)
        await store.end_session("worker-a", "gone", NOW + 3)
        pages = [page async for page in store.iter_orphans(NOW + 4, page_size=5)]
        assert sorted(c.connection_id for p in pages for c in p) == ids
        assert all(len(p) <= 5 for p in pages)


async def test_a_connection_whose_owner_row_is_gone_is_an_orphan_and_is_taken_over(
    tmp_path: Path,
) -> None:
    """The store never deletes a session that owns something (forget_session checks under the
    write lock), but a file edited by hand or restored from a partial copy may hold one: a
    missing session is a dead one, to discovery (iter_orphans) as to acquire."""
    path = tmp_path / "db.sqlite"
    async with SqliteConnectionStore.open(path) as store:
        await store.start("conn-1", URL, NOW)
        await store.open_session("lost", 60_000, 10, NOW)
        await store.open_session("worker-b", 60_000, 10, NOW)
        assert await store.try_acquire("conn-1", "lost", NOW) is not None
        with sqlite3.connect(path) as raw:
            raw.execute("DELETE FROM sessions WHERE session_id = 'lost'")

        assert [c.connection_id async for p in store.iter_orphans(NOW + 1, 10) for c in p] == [
            "conn-1"
        ]
        taken = await store.try_acquire("conn-1", "worker-b", NOW + 1)

        assert taken is not None
        assert (taken.owner, taken.token) == ("worker-b", 2)
        last = (await store.history("conn-1"))[-1]
        assert isinstance(last, LeaseTakenOver)
        assert last.previous_owner == "lost"


async def test_every_store_query_is_served_by_its_index(tmp_path: Path) -> None:
    """The reconciliation, STOP and forget queries read an index, not the table: their cost
    follows what they return (orphans, STOPs, owners), not the connections stored."""
    path = tmp_path / "db.sqlite"
    async with SqliteConnectionStore.open(path):
        pass
    queries: dict[str, tuple[tuple[object, ...] | dict[str, object], str]] = {
        store_sql.UNOWNED_PAGE: ((NOW, 0, "", 10), "connections_unowned"),
        store_sql.DEAD_OWNERS: ({"now": NOW}, "connections_by_owner"),
        store_sql.OWNED_PAGE: (("s", "", NOW, 10), "connections_by_owner"),
        store_sql.NEXT_BACKOFF_END: ((NOW,), "connections_unowned"),
        store_sql.STOPS: (("s",), "connections_stops"),
        store_sql.OWNS_ANY: (("s",), "connections_by_owner"),
    }
    with sqlite3.connect(path) as raw:
        for sql, (params, index) in queries.items():
            plan = " | ".join(row[3] for row in raw.execute(f"EXPLAIN QUERY PLAN {sql}", params))
            assert f"INDEX {index}" in plan, (sql, plan)
            assert "SCAN connections" not in plan, (sql, plan)


async def test_a_file_from_before_session_leases_is_refused_by_name(tmp_path: Path) -> None:
    """The connections table as wsfleet created it before issue 12 (per-lease expiry)."""
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as raw:
        raw.execute(
            "CREATE TABLE connections (connection_id TEXT PRIMARY KEY, version INTEGER NOT NULL, "
            "desired_state TEXT NOT NULL, ws_url TEXT NOT NULL, owner TEXT NOT NULL, "
            "token INTEGER NOT NULL, expires_at_ms INTEGER NOT NULL, "
            "checkpoint_seq INTEGER NOT NULL, failures INTEGER NOT NULL, "
            "not_before_ms INTEGER NOT NULL, stop_reason TEXT, updated_at_ms INTEGER NOT NULL, "
            "available_at_ms INTEGER NOT NULL) WITHOUT ROWID"
        )

    with pytest.raises(ConfigurationError, match="before session leases"):
        await SqliteConnectionStore.connect(path)


async def test_two_queue_instances_on_one_file_never_hold_the_same_hint_at_once(
    tmp_path: Path,
) -> None:
    """Two instances stand for two processes: each has its own connection and thread."""
    clock = FakeClock(start_ms=NOW)
    path = tmp_path / "db.sqlite"
    async with (
        SqliteNotificationQueue.open(path, clock, visibility_timeout_s=30) as first,
        SqliteNotificationQueue.open(path, clock, visibility_timeout_s=30) as second,
    ):
        await first.send(["conn-1"])
        [delivery] = await second.receive(10, wait_s=0)
        assert await first.receive(10, wait_s=0) == []

        await clock.advance(31, step_s=31)
        [again] = await first.receive(10, wait_s=0)
        assert (again.connection_id, again.receipt != delivery.receipt) == ("conn-1", True)

        await second.delete([delivery.receipt])  # stale: the hint was delivered again since
        await clock.advance(31, step_s=31)
        assert [d.connection_id for d in await second.receive(10, wait_s=0)] == ["conn-1"]


async def test_a_full_queue_refuses_the_send_with_queue_unavailable(tmp_path: Path) -> None:
    async with SqliteNotificationQueue.open(
        tmp_path / "db.sqlite", SystemClock(), max_depth=3
    ) as queue:
        await queue.send(["conn-1", "conn-2"])
        with pytest.raises(QueueUnavailable, match="full"):
            await queue.send(["conn-3", "conn-4"])  # all or nothing
        await queue.send(["conn-3"])

        got = await queue.receive(10, wait_s=0)
        assert sorted(d.connection_id or "" for d in got) == ["conn-1", "conn-2", "conn-3"]


async def test_hints_older_than_the_retention_are_dropped(tmp_path: Path) -> None:
    clock = FakeClock(start_ms=NOW)
    async with SqliteNotificationQueue.open(
        tmp_path / "db.sqlite", clock, retention_s=60, max_depth=2
    ) as queue:
        await queue.send(["conn-old", "conn-old-2"])
        await clock.advance(61, step_s=61)
        await queue.send(["conn-new"])  # the queue was full only of expired hints

        assert [d.connection_id for d in await queue.receive(10, wait_s=0)] == ["conn-new"]


async def test_store_and_queue_share_one_database_file(tmp_path: Path) -> None:
    path = tmp_path / "wsfleet.sqlite"
    async with (
        SqliteConnectionStore.open(path) as store,
        SqliteNotificationQueue.open(path, SystemClock()) as queue,
    ):
        await store.start("conn-1", URL, NOW)
        await queue.send(["conn-1"])
        [hint] = await queue.receive(1, wait_s=0)
        assert hint.connection_id is not None
        await store.open_session("worker-a", 60_000, 10, NOW)
        assert await store.try_acquire(hint.connection_id, "worker-a", NOW) is not None
