"""SqliteNotificationQueue: the hint queue on an SQLite file, with SQS's delivery semantics.

A received message is claimed inside BEGIN IMMEDIATE: it gets a fresh receipt and becomes
invisible until now + visibility timeout, so one consumer (in any process) holds it at a time;
not deleted in time, it is delivered again (at least once). Times are the injected clock's
wall time, comparable across the processes sharing the file. Long polling re-checks the table
every `poll_interval_s` with a read-only query, taking the write lock only to claim.

The queue is bounded (`max_depth`): a send that would overflow it raises QueueUnavailable.
Hints are droppable (the router logs it; reconciliation finds every orphan from the store), so
refusing is safe, while growing without bound behind absent consumers would not be. Hints
older than `retention_s` are dropped, as SQS does, because reconciliation has found their
connections long before.
"""

import os
import secrets
import sqlite3
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from adapters.sqlite.db import SqliteDatabase
from adapters.sqlite.hints import delivery_of, encode_hint
from adapters.sqlite.schema import NOTIFICATIONS, QUEUE_SCHEMA
from application.errors import QueueUnavailable
from application.ports import Clock
from application.ports.queue import Delivery, HintOrigin, check_delay

MAX_MESSAGES = 10  # per receive, as SQS
DEFAULT_VISIBILITY_TIMEOUT_S = 30.0
DEFAULT_POLL_INTERVAL_S = 0.1
DEFAULT_MAX_DEPTH = 10_000
DEFAULT_RETENTION_S = 3600.0

_ANY_VISIBLE = f"SELECT 1 FROM {NOTIFICATIONS} WHERE visible_at_ms <= ? LIMIT 1"
_DROP_EXPIRED = f"DELETE FROM {NOTIFICATIONS} WHERE visible_at_ms <= ? AND sent_at_ms < ?"
_VISIBLE = (
    f"SELECT id, body FROM {NOTIFICATIONS} WHERE visible_at_ms <= ? "
    "ORDER BY visible_at_ms, id LIMIT ?"
)
_CLAIM = (
    f"UPDATE {NOTIFICATIONS} SET receipt = ?, visible_at_ms = ?, "
    "receive_count = receive_count + 1 WHERE id = ?"
)
_INSERT = f"INSERT INTO {NOTIFICATIONS} (body, sent_at_ms, visible_at_ms) VALUES (?, ?, ?)"
_DELETE = f"DELETE FROM {NOTIFICATIONS} WHERE id = ? AND receipt = ?"
_RELEASE = (
    f"UPDATE {NOTIFICATIONS} SET receipt = NULL, visible_at_ms = ? WHERE id = ? AND receipt = ?"
)
_DEPTH = f"SELECT COUNT(*) FROM {NOTIFICATIONS}"


class SqliteNotificationQueue:
    """Open with `async with SqliteNotificationQueue.open(path, clock) as queue:` (or
    `queue = await SqliteNotificationQueue.connect(path, clock)` ... `await queue.close()`)."""

    def __init__(
        self,
        db: SqliteDatabase,
        clock: Clock,
        *,
        visibility_timeout_s: float = DEFAULT_VISIBILITY_TIMEOUT_S,
        poll_interval_s: float = DEFAULT_POLL_INTERVAL_S,
        max_depth: int = DEFAULT_MAX_DEPTH,
        retention_s: float = DEFAULT_RETENTION_S,
    ) -> None:
        if visibility_timeout_s <= 0 or poll_interval_s <= 0 or max_depth < 1 or retention_s <= 0:
            raise ValueError("visibility timeout, poll interval, depth and retention must be > 0")
        self._db = db
        self._clock = clock
        self._visibility_ms = round(visibility_timeout_s * 1000)
        self._poll_interval_s = poll_interval_s
        self._max_depth = max_depth
        self._retention_ms = round(retention_s * 1000)

    @classmethod
    async def connect(
        cls,
        path: str | os.PathLike[str],
        clock: Clock,
        *,
        visibility_timeout_s: float = DEFAULT_VISIBILITY_TIMEOUT_S,
        poll_interval_s: float = DEFAULT_POLL_INTERVAL_S,
        max_depth: int = DEFAULT_MAX_DEPTH,
        retention_s: float = DEFAULT_RETENTION_S,
        busy_timeout_s: float = 5.0,
    ) -> "SqliteNotificationQueue":
        """Open the database file (it may be the store's) and ensure the queue's table.
        Raises ConfigurationError (bad path or setting) or QueueUnavailable (locked)."""
        # synchronous=NORMAL: a hint lost to a power cut costs one reconciliation delay.
        db = await SqliteDatabase.open(
            path,
            schema=QUEUE_SCHEMA,
            unavailable=QueueUnavailable,
            busy_timeout_s=busy_timeout_s,
            synchronous="NORMAL",
            name="sqlite-queue",
        )
        with db.closed_on_error():
            return cls(
                db,
                clock,
                visibility_timeout_s=visibility_timeout_s,
                poll_interval_s=poll_interval_s,
                max_depth=max_depth,
                retention_s=retention_s,
            )

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        path: str | os.PathLike[str],
        clock: Clock,
        *,
        visibility_timeout_s: float = DEFAULT_VISIBILITY_TIMEOUT_S,
        poll_interval_s: float = DEFAULT_POLL_INTERVAL_S,
        max_depth: int = DEFAULT_MAX_DEPTH,
        retention_s: float = DEFAULT_RETENTION_S,
        busy_timeout_s: float = 5.0,
    ) -> AsyncIterator["SqliteNotificationQueue"]:
        queue = await cls.connect(
            path,
            clock,
            visibility_timeout_s=visibility_timeout_s,
            poll_interval_s=poll_interval_s,
            max_depth=max_depth,
            retention_s=retention_s,
            busy_timeout_s=busy_timeout_s,
        )
        try:
            yield queue
        finally:
            await queue.close()

    async def close(self) -> None:
        await self._db.close()

    async def send(
        self,
        connection_ids: Sequence[str],
        *,
        delay_s: int = 0,
        copy: bool = False,
        origin: HintOrigin | None = None,
    ) -> None:
        bodies = [encode_hint(cid, copy=copy, origin=origin) for cid in connection_ids]
        await self.send_raw(bodies, delay_s=delay_s)

    async def send_raw(self, bodies: Sequence[str], *, delay_s: int = 0) -> None:
        """Enqueue bodies as they are (tests and tools use it to add malformed ones)."""
        check_delay(delay_s)
        if not bodies:
            return
        now = self._clock.now_ms()
        visible_at = now + delay_s * 1000

        def insert(c: sqlite3.Connection) -> None:
            if c.execute(_DEPTH).fetchone()[0] + len(bodies) > self._max_depth:
                c.execute(f"DELETE FROM {NOTIFICATIONS} WHERE sent_at_ms < ?", (self._cutoff(now),))
                depth = c.execute(_DEPTH).fetchone()[0]
                if depth + len(bodies) > self._max_depth:
                    raise QueueUnavailable(
                        f"notification queue is full ({depth} hints, at most {self._max_depth}); "
                        "reconciliation will find these connections instead"
                    )
            c.executemany(_INSERT, [(body, now, visible_at) for body in bodies])

        await self._db.write(insert)

    async def receive(self, max_messages: int, wait_s: float) -> Sequence[Delivery]:
        if not 1 <= max_messages <= MAX_MESSAGES:
            raise ValueError(f"max_messages must be 1-{MAX_MESSAGES}, got {max_messages}")
        deadline = self._clock.monotonic() + wait_s
        while True:
            deliveries = await self._claim(max_messages)
            remaining = deadline - self._clock.monotonic()
            if deliveries or remaining <= 0:
                return deliveries
            await self._clock.sleep(min(self._poll_interval_s, remaining))

    async def release(self, receipts: Sequence[str]) -> None:
        keys = [key for key in map(_receipt_key, receipts) if key is not None]
        if keys:
            now = self._clock.now_ms()

            def release(c: sqlite3.Connection) -> None:
                c.executemany(_RELEASE, [(now, id_, receipt) for id_, receipt in keys])

            await self._db.write(release)

    async def delete(self, receipts: Sequence[str]) -> None:
        keys = [key for key in map(_receipt_key, receipts) if key is not None]
        if keys:

            def delete(c: sqlite3.Connection) -> None:
                c.executemany(_DELETE, keys)  # the cursor must die on the DB thread (see db.py)

            await self._db.write(delete)

    async def _claim(self, max_messages: int) -> list[Delivery]:
        now = self._clock.now_ms()
        # A read first: an empty poll never takes the write lock the store's writers need.
        if await self._db.read(lambda c: c.execute(_ANY_VISIBLE, (now,)).fetchone()) is None:
            return []

        def claim(c: sqlite3.Connection) -> list[Delivery]:
            c.execute(_DROP_EXPIRED, (now, self._cutoff(now)))
            rows = c.execute(_VISIBLE, (now, max_messages)).fetchall()
            claimed = [(row["id"], f"{row['id']}:{secrets.token_hex(8)}", row) for row in rows]
            invisible_until = now + self._visibility_ms
            c.executemany(_CLAIM, [(receipt, invisible_until, id_) for id_, receipt, _ in claimed])
            return [delivery_of(row["body"], receipt) for _, receipt, row in claimed]

        return await self._db.write(claim)

    def _cutoff(self, now_ms: int) -> int:
        return now_ms - self._retention_ms


def _receipt_key(receipt: str) -> tuple[int, str] | None:
    """(row id, receipt) for a receipt this queue issued; None for anything else (ignored)."""
    id_, _, nonce = receipt.partition(":")
    # At most 18 digits: always within SQLite's 64-bit integers.
    return (int(id_), receipt) if id_.isdigit() and len(id_) <= 18 and nonce else None
