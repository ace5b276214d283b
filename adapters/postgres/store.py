"""PostgresConnectionStore: connections and worker sessions in one PostgreSQL database, shared
by every worker of a fleet on any number of hosts.

Every command is one transaction that reads the rows the domain needs under row locks (the
connection FOR UPDATE; for an Acquire the sessions of its owner and of the acquirer FOR SHARE),
judges the command with `domain.decide` / `domain.decide_session`, writes the folded state and
appends the logged events, as the SQLite store does under its file lock: no SQL copy of the
lease rule. Commands on one connection queue on its row; a takeover that saw the owner's session
dead holds that session's row until it commits, so the session's renew or end cannot slip in
between. The fencing token is the connection's `token` column, raised by the domain on every
change of owner. No advisory locks: they belong to a database connection and carry no token.
"""

from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import asyncpg

from adapters.postgres import store_sql as sql
from adapters.postgres import store_steps as steps
from adapters.postgres.db import PostgresDatabase, open_pool
from adapters.postgres.defaults import DEFAULT_POOL_SIZE
from adapters.postgres.rows import (
    connection_from_row,
    event_from_row,
    session_event_from_row,
    session_from_row,
)
from adapters.postgres.schema import Conn
from application.errors import StoreUnavailable
from application.ports.store import check_page_size
from application.ports.store_step import SteppedStore, StoreStep
from domain import Command, Connection, Event, SessionCommand, SessionEvent, WorkerSession

T = TypeVar("T")


class PostgresConnectionStore(SteppedStore):
    """Built on a PostgresDatabase over the process's pool (the composition root shares the
    pool with the queue and the sink), or opened alone: `async with
    PostgresConnectionStore.open(url) as store:`.

    `sessions`: where the worker session's own commands (open, renew, end) run, if not on
    `db`: a pool of their own, so that a renewal never waits for a connection behind a wave of
    takes and sink writes. On one shared pool of 10, a worker taking thousands of connections
    had its heartbeat wait up to 5.3 s for one, past its trust window, and fenced itself
    (bench/RESULTS.md section 27)."""

    def __init__(self, db: PostgresDatabase, sessions: PostgresDatabase | None = None) -> None:
        self._db = db
        self._sessions = sessions or db
        self.operations: dict[str, int] = {}  # operation name -> round trips, for benches

    @classmethod
    @asynccontextmanager
    async def open(
        cls, url: str, *, pool_size: int = DEFAULT_POOL_SIZE, **pool: Any
    ) -> AsyncIterator["PostgresConnectionStore"]:
        """A store with a pool of its own, closed afterwards. Raises ConfigurationError (bad
        URL, refused login, a schema this wsfleet does not know) or StoreUnavailable."""
        opened = await open_pool(url, size=pool_size, unavailable=StoreUnavailable, **pool)
        try:
            yield cls(PostgresDatabase(opened, StoreUnavailable))
        finally:
            await opened.close()

    # -- the commands' one primitive (the port's template does the rest) ------------------------

    async def _atomically(
        self, command: Command | SessionCommand, run: Callable[[StoreStep], Coroutine[Any, Any, T]]
    ) -> T:
        """One transaction (run again whole on a key collision, a serialization failure or a
        deadlock: PostgresDatabase.write)."""
        self._count(type(command).__name__)
        db = self._sessions if isinstance(command, SessionCommand) else self._db
        return await db.write(lambda c: run(steps.PostgresStep(c)))

    # -- queries -------------------------------------------------------------------------------

    async def get(self, connection_id: str) -> Connection | None:
        return await self._read("get", lambda c: steps.select(c, connection_id))

    async def get_session(self, session_id: str) -> WorkerSession | None:
        return await self._read("get_session", lambda c: steps.select_session(c, session_id))

    async def list_sessions(self) -> Sequence[WorkerSession]:
        rows = await self._read("list_sessions", lambda c: c.fetch(sql.LIST_SESSIONS))
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
                "iter_orphans", _fetch(sql.UNOWNED_PAGE, now_ms, *after, page_size)
            )
            if rows:
                yield [connection_from_row(r) for r in rows]
            if len(rows) < page_size:
                break
            after = (rows[-1]["not_before_ms"], rows[-1]["connection_id"])
        dead = await self._read("iter_orphans", _fetch(sql.DEAD_OWNERS, now_ms))
        for (owner,) in dead:
            last = ""
            while True:
                rows = await self._read(
                    "iter_orphans", _fetch(sql.OWNED_PAGE, owner, last, now_ms, page_size)
                )
                if rows:
                    yield [connection_from_row(r) for r in rows]
                if len(rows) < page_size:
                    break
                last = rows[-1]["connection_id"]

    async def next_available_at(self, now_ms: int) -> int | None:
        found = await self._read(
            "next_available_at", lambda c: c.fetchval(sql.NEXT_BACKOFF_END, now_ms)
        )
        return None if found is None else int(found)

    async def stop_requested(self, session_id: str) -> Sequence[str]:
        rows = await self._read("stop_requested", _fetch(sql.STOPS, session_id))
        return [r[0] for r in rows]

    async def owned_by(self, session_id: str) -> Sequence[str]:
        rows = await self._read("owned_by", _fetch(sql.OWNED, session_id))
        return [r[0] for r in rows]

    async def forget_session(self, session_id: str, now_ms: int) -> bool:
        self._count("forget_session")
        return await self._db.write(lambda c: steps.forget_session(c, session_id, now_ms))

    async def history(self, connection_id: str) -> Sequence[Event]:
        rows = await self._read("history", _fetch(sql.HISTORY, connection_id))
        return [event_from_row(r) for r in rows]

    async def session_history(self, session_id: str) -> Sequence[SessionEvent]:
        rows = await self._read("session_history", _fetch(sql.SESSION_HISTORY, session_id))
        return [session_event_from_row(r) for r in rows]

    async def list_connections(self, limit: int = 1000) -> Sequence[Connection]:
        # max(): PostgreSQL refuses a negative LIMIT; the port reads one as "none".
        rows = await self._read("list_connections", _fetch(sql.LIST_CONNECTIONS, max(limit, 0)))
        return [connection_from_row(r) for r in rows]

    async def _read(self, op: str, fn: Callable[[Conn], Awaitable[T]]) -> T:
        self._count(op)
        return await self._db.read(fn)

    def _count(self, op: str) -> None:
        self.operations[op] = self.operations.get(op, 0) + 1


def _fetch(query: str, *args: object) -> Callable[[Conn], Awaitable[list[asyncpg.Record]]]:
    return lambda c: c.fetch(query, *args)
