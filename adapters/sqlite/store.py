"""SqliteConnectionStore: connections and worker sessions on one SQLite file, shared by the
worker processes of one host.

Every command is one BEGIN IMMEDIATE transaction that reads the rows the domain needs (the
connection and, for Acquire, the sessions of its owner and of the acquirer), judges the command
with `domain.decide` / `domain.decide_session`, writes the folded state and appends the logged
events. BEGIN IMMEDIATE takes the database's single write lock before the reads, so no other
process can change those rows in between: a takeover that saw the owner's session dead cannot
race that session's renew, and read-decide-write is exactly as atomic as a conditional update,
with the domain's own preconditions rather than a hand-written copy of them in SQL.
"""

import os
import sqlite3
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from adapters.sqlite import store_sql as sql
from adapters.sqlite import store_steps as steps
from adapters.sqlite.db import SqliteDatabase
from adapters.sqlite.rows import (
    CONNECTION_COLUMNS,
    SESSION_COLUMNS,
    connection_from_row,
    event_from_row,
    session_event_from_row,
    session_from_row,
)
from adapters.sqlite.schema import CONNECTIONS, EVENTS, SESSION_EVENTS, SESSIONS, STORE_SCHEMA
from application.errors import ConfigurationError, StoreUnavailable
from application.ports.store import check_page_size
from application.ports.store_step import SteppedStore, StoreStep
from domain import Command, Connection, Event, SessionCommand, SessionEvent, WorkerSession

T = TypeVar("T")


class SqliteConnectionStore(SteppedStore):
    """Open with `async with SqliteConnectionStore.open(path) as store:` (or
    `store = await SqliteConnectionStore.connect(path)` ... `await store.close()`)."""

    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db
        self.operations: dict[str, int] = {}  # operation name -> round trips, for benches

    @classmethod
    async def connect(
        cls,
        path: str | os.PathLike[str],
        *,
        busy_timeout_s: float = 5.0,
        synchronous: str = "FULL",
    ) -> "SqliteConnectionStore":
        """Open the database file (created if missing; its directory must exist) and ensure the
        tables. `synchronous="FULL"` syncs every commit, so a granted lease survives a power
        loss; "NORMAL" is faster and may lose the last commits (never corrupts).
        Raises ConfigurationError (bad path or setting, or a file made by a wsfleet before
        session leases) or StoreUnavailable (locked)."""
        db = await SqliteDatabase.open(
            path,
            schema=STORE_SCHEMA,
            unavailable=StoreUnavailable,
            busy_timeout_s=busy_timeout_s,
            synchronous=synchronous,
            name="sqlite-store",
        )
        with db.closed_on_error():
            await _check_tables(db)
            return cls(db)

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        path: str | os.PathLike[str],
        *,
        busy_timeout_s: float = 5.0,
        synchronous: str = "FULL",
    ) -> AsyncIterator["SqliteConnectionStore"]:
        store = await cls.connect(path, busy_timeout_s=busy_timeout_s, synchronous=synchronous)
        try:
            yield store
        finally:
            await store.close()

    async def close(self) -> None:
        await self._db.close()

    # -- the commands' one primitive (the port's template does the rest) ------------------------

    async def _atomically(
        self, command: Command | SessionCommand, run: Callable[[StoreStep], Coroutine[Any, Any, T]]
    ) -> T:
        """One write transaction on the database thread; a domain refusal rolls it back."""
        self._count(type(command).__name__)
        return await self._db.write(lambda c: steps.finish(run(steps.SqliteStep(c))))

    # -- queries -------------------------------------------------------------------------------

    async def get(self, connection_id: str) -> Connection | None:
        return await self._read("get", lambda c: steps.select(c, connection_id))

    async def get_session(self, session_id: str) -> WorkerSession | None:
        return await self._read("get_session", lambda c: steps.select_session(c, session_id))

    async def list_sessions(self) -> Sequence[WorkerSession]:
        query = f"SELECT * FROM {SESSIONS} ORDER BY session_id"
        rows = await self._read("list_sessions", lambda c: c.execute(query).fetchall())
        return [session_from_row(r) for r in rows]

    async def iter_orphans(
        self, now_ms: int, page_size: int
    ) -> AsyncIterator[Sequence[Connection]]:
        """The unowned orphans, then each dead owner's: one query per page (each counted) plus
        one for the dead owners; a page shorter than `page_size` ends its part."""
        check_page_size(page_size)
        after: tuple[int, str] = (-1, "")
        while True:
            rows = await self._read(
                "iter_orphans", steps.rows(sql.UNOWNED_PAGE, (now_ms, *after, page_size))
            )
            if rows:
                yield [connection_from_row(r) for r in rows]
            if len(rows) < page_size:
                break
            after = (rows[-1]["not_before_ms"], rows[-1]["connection_id"])
        dead = await self._read("iter_orphans", steps.rows(sql.DEAD_OWNERS, {"now": now_ms}))
        for (owner,) in dead:
            last = ""
            while True:
                rows = await self._read(
                    "iter_orphans", steps.rows(sql.OWNED_PAGE, (owner, last, now_ms, page_size))
                )
                if rows:
                    yield [connection_from_row(r) for r in rows]
                if len(rows) < page_size:
                    break
                last = rows[-1]["connection_id"]

    async def next_available_at(self, now_ms: int) -> int | None:
        def query(c: sqlite3.Connection) -> int | None:
            found = c.execute(sql.NEXT_BACKOFF_END, (now_ms,)).fetchone()[0]
            return None if found is None else int(found)

        return await self._read("next_available_at", query)

    async def stop_requested(self, session_id: str) -> Sequence[str]:
        rows = await self._read(
            "stop_requested", lambda c: c.execute(sql.STOPS, (session_id,)).fetchall()
        )
        return [r[0] for r in rows]

    async def owned_by(self, session_id: str) -> Sequence[str]:
        rows = await self._read(
            "owned_by", lambda c: c.execute(sql.OWNED, (session_id,)).fetchall()
        )
        return [r[0] for r in rows]

    async def forget_session(self, session_id: str, now_ms: int) -> bool:
        self._count("forget_session")
        return await self._db.write(lambda c: steps.forget_session(c, session_id, now_ms))

    async def history(self, connection_id: str) -> Sequence[Event]:
        query = f"SELECT body FROM {EVENTS} WHERE connection_id = ? ORDER BY version"
        rows = await self._read("history", lambda c: c.execute(query, (connection_id,)).fetchall())
        return [event_from_row(r) for r in rows]

    async def session_history(self, session_id: str) -> Sequence[SessionEvent]:
        query = f"SELECT body FROM {SESSION_EVENTS} WHERE session_id = ? ORDER BY version"
        rows = await self._read(
            "session_history", lambda c: c.execute(query, (session_id,)).fetchall()
        )
        return [session_event_from_row(r) for r in rows]

    async def list_connections(self, limit: int = 1000) -> Sequence[Connection]:
        query = f"SELECT * FROM {CONNECTIONS} ORDER BY connection_id LIMIT ?"
        # max(): a negative LIMIT means "no limit" to SQLite.
        rows = await self._read(
            "list_connections", lambda c: c.execute(query, (max(limit, 0),)).fetchall()
        )
        return [connection_from_row(r) for r in rows]

    async def _read(self, op: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        self._count(op)
        return await self._db.read(fn)

    def _count(self, op: str) -> None:
        self.operations[op] = self.operations.get(op, 0) + 1


async def _check_tables(db: SqliteDatabase) -> None:
    """A file made before session leases has the old tables (CREATE IF NOT EXISTS keeps them):
    say so plainly rather than fail on the first write with a missing-column error."""

    def columns(c: sqlite3.Connection) -> dict[str, set[str]]:
        return {
            table: {row["name"] for row in c.execute(f"PRAGMA table_info({table})")}
            for table in (CONNECTIONS, SESSIONS)
        }

    found = await db.read(columns)
    if found[SESSIONS] == set(SESSION_COLUMNS) - {"rate_milli"}:
        # A file made before sessions reported their message rate (issue 27): add it.
        await db.write(
            lambda c: c.execute(
                f"ALTER TABLE {SESSIONS} ADD COLUMN rate_milli INTEGER NOT NULL DEFAULT 0"
            )
        )
        found[SESSIONS] = set(SESSION_COLUMNS)
    for table, expected in ((CONNECTIONS, CONNECTION_COLUMNS), (SESSIONS, SESSION_COLUMNS)):
        if found[table] != set(expected):
            raise ConfigurationError(
                f"SQLite database {db.path} has a {table} table from an earlier wsfleet "
                "(before session leases); there is no migration: move the file away and "
                "start again"
            )
