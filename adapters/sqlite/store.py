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
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from adapters.sqlite.db import SqliteDatabase
from adapters.sqlite.rows import (
    CONNECTION_COLUMNS,
    SESSION_COLUMNS,
    connection_from_row,
    connection_to_row,
    event_from_row,
    event_to_row,
    session_event_from_row,
    session_event_to_row,
    session_from_row,
    session_to_row,
)
from adapters.sqlite.schema import CONNECTIONS, EVENTS, SESSION_EVENTS, SESSIONS, STORE_SCHEMA
from application.errors import ConfigurationError, StoreUnavailable
from application.ports.store import CommandResult, ConnectionStore, SessionResult
from domain import (
    NO_OWNER,
    SESSION_LOG_EVENTS,
    Acquire,
    Command,
    Connection,
    Event,
    OpenSession,
    SessionCommand,
    SessionEvent,
    WorkerSession,
    decide,
    decide_session,
    fold,
    fold_session,
    is_ownership_event,
)

T = TypeVar("T")


def _insert(table: str, columns: Sequence[str]) -> str:
    return (
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join(':' + c for c in columns)})"
    )


def _update(table: str, columns: Sequence[str]) -> str:
    # The version condition always holds under the write lock; it is checked anyway so that a
    # broken locking assumption fails loudly instead of silently granting a lease twice.
    key, *rest = columns
    return (
        f"UPDATE {table} SET {', '.join(f'{c} = :{c}' for c in rest)} "
        f"WHERE {key} = :{key} AND version = :expected_version"
    )


_SELECT = f"SELECT * FROM {CONNECTIONS} WHERE connection_id = ?"
_INSERT = _insert(CONNECTIONS, CONNECTION_COLUMNS)
_UPDATE = _update(CONNECTIONS, CONNECTION_COLUMNS)
_APPEND = _insert(EVENTS, ("connection_id", "version", "event_type", "at_ms", "body"))
_SELECT_SESSION = f"SELECT * FROM {SESSIONS} WHERE session_id = ?"
_INSERT_SESSION = _insert(SESSIONS, SESSION_COLUMNS)
_UPDATE_SESSION = _update(SESSIONS, SESSION_COLUMNS)
_APPEND_SESSION = _insert(SESSION_EVENTS, ("session_id", "version", "event_type", "at_ms", "body"))

# Unowned orphans: keyset pagination on the partial index connections_unowned.
_UNOWNED_PAGE = (
    f"SELECT * FROM {CONNECTIONS} WHERE desired_state = 'STARTED' AND owner = '' "
    "AND not_before_ms < ? AND (not_before_ms, connection_id) > (?, ?) "
    "ORDER BY not_before_ms, connection_id LIMIT ?"
)
# Every distinct owner, by a loose index scan of connections_by_owner (one seek per owner, not
# one row per connection), then the dead ones: no session row (never written, or cleaned up),
# ended, or expired at `now` — the same rule as WorkerSession.is_live, in SQL.
_DEAD_OWNERS = f"""
WITH RECURSIVE owners(owner) AS (
    SELECT MIN(owner) FROM {CONNECTIONS} WHERE owner != ''
    UNION ALL
    SELECT (SELECT MIN(owner) FROM {CONNECTIONS} WHERE owner != '' AND owner > owners.owner)
    FROM owners WHERE owners.owner IS NOT NULL
)
SELECT owners.owner FROM owners LEFT JOIN {SESSIONS} AS s ON s.session_id = owners.owner
WHERE owners.owner IS NOT NULL
  AND (s.session_id IS NULL OR s.ended_reason IS NOT NULL OR s.expires_at_ms < :now)
"""
# A dead owner's orphans: keyset pagination on connections_by_owner.
_OWNED_PAGE = (
    f"SELECT * FROM {CONNECTIONS} WHERE owner != '' AND owner = ? AND connection_id > ? "
    "AND desired_state = 'STARTED' AND not_before_ms < ? ORDER BY connection_id LIMIT ?"
)
_NEXT_BACKOFF_END = (
    f"SELECT MIN(not_before_ms) FROM {CONNECTIONS} "
    "WHERE desired_state = 'STARTED' AND owner = '' AND not_before_ms >= ?"
)
_OPENED = f"SELECT body FROM {SESSION_EVENTS} WHERE session_id = ? AND version = 1"
_STOPS = (
    f"SELECT connection_id FROM {CONNECTIONS} "
    "WHERE desired_state = 'STOPPED' AND owner != '' AND owner = ? ORDER BY connection_id"
)
_OWNS_ANY = f"SELECT 1 FROM {CONNECTIONS} WHERE owner != '' AND owner = ? LIMIT 1"


class SqliteConnectionStore(ConnectionStore):
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
        try:
            await _check_tables(db)
        except BaseException:
            await db.close()
            raise
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

    # -- the two commands ----------------------------------------------------------------------

    async def execute(self, command: Command, now_ms: int) -> CommandResult:
        self._count(type(command).__name__)
        return await self._db.write(lambda c: _execute(c, command, now_ms))

    async def execute_session(self, command: SessionCommand, now_ms: int) -> SessionResult:
        self._count(type(command).__name__)
        return await self._db.write(lambda c: _execute_session(c, command, now_ms))

    # -- queries -------------------------------------------------------------------------------

    async def get(self, connection_id: str) -> Connection | None:
        return await self._read("get", lambda c: _select(c, connection_id))

    async def get_session(self, session_id: str) -> WorkerSession | None:
        return await self._read("get_session", lambda c: _select_session(c, session_id))

    async def list_sessions(self) -> Sequence[WorkerSession]:
        sql = f"SELECT * FROM {SESSIONS} ORDER BY session_id"
        rows = await self._read("list_sessions", lambda c: c.execute(sql).fetchall())
        return [session_from_row(r) for r in rows]

    async def iter_orphans(
        self, now_ms: int, page_size: int
    ) -> AsyncIterator[Sequence[Connection]]:
        """The unowned orphans, then each dead owner's: one query per page (each counted) plus
        one for the dead owners; a page shorter than `page_size` ends its part."""
        if page_size < 1:
            raise ValueError(f"page_size must be positive, got {page_size}")
        after: tuple[int, str] = (-1, "")
        while True:
            rows = await self._read(
                "iter_orphans", _rows(_UNOWNED_PAGE, (now_ms, *after, page_size))
            )
            if rows:
                yield [connection_from_row(r) for r in rows]
            if len(rows) < page_size:
                break
            after = (rows[-1]["not_before_ms"], rows[-1]["connection_id"])
        dead = await self._read("iter_orphans", _rows(_DEAD_OWNERS, {"now": now_ms}))
        for (owner,) in dead:
            last = ""
            while True:
                rows = await self._read(
                    "iter_orphans", _rows(_OWNED_PAGE, (owner, last, now_ms, page_size))
                )
                if rows:
                    yield [connection_from_row(r) for r in rows]
                if len(rows) < page_size:
                    break
                last = rows[-1]["connection_id"]

    async def next_available_at(self, now_ms: int) -> int | None:
        def query(c: sqlite3.Connection) -> int | None:
            found = c.execute(_NEXT_BACKOFF_END, (now_ms,)).fetchone()[0]
            return None if found is None else int(found)

        return await self._read("next_available_at", query)

    async def stop_requested(self, session_id: str) -> Sequence[str]:
        rows = await self._read(
            "stop_requested", lambda c: c.execute(_STOPS, (session_id,)).fetchall()
        )
        return [r[0] for r in rows]

    async def forget_session(self, session_id: str, now_ms: int) -> bool:
        self._count("forget_session")
        return await self._db.write(lambda c: _forget_session(c, session_id, now_ms))

    async def history(self, connection_id: str) -> Sequence[Event]:
        sql = f"SELECT body FROM {EVENTS} WHERE connection_id = ? ORDER BY version"
        rows = await self._read("history", lambda c: c.execute(sql, (connection_id,)).fetchall())
        return [event_from_row(r) for r in rows]

    async def session_history(self, session_id: str) -> Sequence[SessionEvent]:
        sql = f"SELECT body FROM {SESSION_EVENTS} WHERE session_id = ? ORDER BY version"
        rows = await self._read(
            "session_history", lambda c: c.execute(sql, (session_id,)).fetchall()
        )
        return [session_event_from_row(r) for r in rows]

    async def list_connections(self, limit: int = 1000) -> Sequence[Connection]:
        sql = f"SELECT * FROM {CONNECTIONS} ORDER BY connection_id LIMIT ?"
        # max(): a negative LIMIT means "no limit" to SQLite.
        rows = await self._read(
            "list_connections", lambda c: c.execute(sql, (max(limit, 0),)).fetchall()
        )
        return [connection_from_row(r) for r in rows]

    async def _read(self, op: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        self._count(op)
        return await self._db.read(fn)

    def _count(self, op: str) -> None:
        self.operations[op] = self.operations.get(op, 0) + 1


# These run on the database thread, inside the caller's transaction (a write: under the lock).


def _rows(
    sql: str, params: Sequence[object] | dict[str, object]
) -> Callable[[sqlite3.Connection], list[sqlite3.Row]]:
    return lambda c: c.execute(sql, params).fetchall()


def _select(c: sqlite3.Connection, connection_id: str) -> Connection | None:
    row = c.execute(_SELECT, (connection_id,)).fetchone()
    return None if row is None else connection_from_row(row)


def _select_session(c: sqlite3.Connection, session_id: str) -> WorkerSession | None:
    row = c.execute(_SELECT_SESSION, (session_id,)).fetchone()
    return None if row is None else session_from_row(row)


def _sessions_for(
    c: sqlite3.Connection, state: Connection | None, command: Command
) -> dict[str, WorkerSession]:
    """The sessions `decide` consults: for an Acquire, the acquirer's and the owner's (a
    missing row stays missing: the domain reads it as dead); no other command reads any."""
    if not isinstance(command, Acquire):
        return {}
    ids = {command.session_id}
    if state is not None and state.owner != NO_OWNER:
        ids.add(state.owner)
    found = ((sid, _select_session(c, sid)) for sid in ids)
    return {sid: session for sid, session in found if session is not None}


def _execute(c: sqlite3.Connection, command: Command, now_ms: int) -> CommandResult:
    """Raises the domain's error (the write then rolls back, having written nothing)."""
    state = _select(c, command.connection_id)
    events = decide(state, command, now_ms, _sessions_for(c, state, command))
    if not events:
        assert state is not None  # decide returns no events only for an existing connection
        return CommandResult(state, False)
    new_state = fold(events, state)
    assert new_state is not None
    row: dict[str, Any] = connection_to_row(new_state)
    if state is None:
        c.execute(_INSERT, row)
    elif c.execute(_UPDATE, {**row, "expected_version": state.version}).rowcount != 1:
        raise RuntimeError(f"connection {state.connection_id!r} changed under the write lock")
    c.executemany(_APPEND, [event_to_row(e) for e in events if is_ownership_event(e)])
    return CommandResult(new_state, True)


def _execute_session(c: sqlite3.Connection, command: SessionCommand, now_ms: int) -> SessionResult:
    state = _select_session(c, command.session_id)
    if state is None and isinstance(command, OpenSession):
        # A forgotten session's row is gone but its log is not: an id is never opened twice
        # (the port's promise), so the domain judges the open against its SessionOpened.
        opened = c.execute(_OPENED, (command.session_id,)).fetchall()
        state = fold_session(session_event_from_row(r) for r in opened)
    events = decide_session(state, command, now_ms)
    if not events:
        assert state is not None  # an EndSession of an ended session; unknown ones raise
        return SessionResult(state, False)
    new_state = fold_session(events, state)
    assert new_state is not None
    row = session_to_row(new_state)
    if state is None:
        c.execute(_INSERT_SESSION, row)
    elif c.execute(_UPDATE_SESSION, {**row, "expected_version": state.version}).rowcount != 1:
        raise RuntimeError(f"session {state.session_id!r} changed under the write lock")
    logged = [session_event_to_row(e) for e in events if isinstance(e, SESSION_LOG_EVENTS)]
    c.executemany(_APPEND_SESSION, logged)
    return SessionResult(new_state, True)


def _forget_session(c: sqlite3.Connection, session_id: str, now_ms: int) -> bool:
    """Under the write lock, so no acquire can make the session an owner in between (and a
    dead session never acquires anything anyway)."""
    session = _select_session(c, session_id)
    if session is None or session.is_live(now_ms):
        return False
    if c.execute(_OWNS_ANY, (session_id,)).fetchone() is not None:
        return False
    c.execute(f"DELETE FROM {SESSIONS} WHERE session_id = ?", (session_id,))
    return True


async def _check_tables(db: SqliteDatabase) -> None:
    """A file made before session leases has the old tables (CREATE IF NOT EXISTS keeps them):
    say so plainly rather than fail on the first write with a missing-column error."""

    def columns(c: sqlite3.Connection) -> dict[str, set[str]]:
        return {
            table: {row["name"] for row in c.execute(f"PRAGMA table_info({table})")}
            for table in (CONNECTIONS, SESSIONS)
        }

    found = await db.read(columns)
    for table, expected in ((CONNECTIONS, CONNECTION_COLUMNS), (SESSIONS, SESSION_COLUMNS)):
        if found[table] != set(expected):
            raise ConfigurationError(
                f"SQLite database {db.path} has a {table} table from an earlier wsfleet "
                "(before session leases); there is no migration: move the file away and "
                "start again"
            )
