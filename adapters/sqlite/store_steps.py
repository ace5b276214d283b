"""The SQLite store's primitives: each runs on the database thread inside the caller's
transaction (a write: BEGIN IMMEDIATE, so under the file's write lock from its first read)."""

import sqlite3
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, TypeVar

from adapters.sqlite.rows import (
    connection_from_row,
    connection_to_row,
    event_to_row,
    session_event_from_row,
    session_event_to_row,
    session_from_row,
    session_to_row,
)
from adapters.sqlite.schema import SESSIONS
from adapters.sqlite.store_sql import (
    APPEND,
    APPEND_SESSION,
    INSERT,
    INSERT_SESSION,
    OPENED,
    OWNS_ANY,
    SELECT,
    SELECT_SESSION,
    UPDATE,
    UPDATE_SESSION,
)
from application.ports.store_step import Change, SessionChange, StoreStep, consulted_sessions
from domain import Command, Connection, SessionCommand, SessionEvent, WorkerSession

T = TypeVar("T")


def rows(
    sql: str, params: Sequence[object] | dict[str, object]
) -> Callable[[sqlite3.Connection], list[sqlite3.Row]]:
    return lambda c: c.execute(sql, params).fetchall()


def select(c: sqlite3.Connection, connection_id: str) -> Connection | None:
    row = c.execute(SELECT, (connection_id,)).fetchone()
    return None if row is None else connection_from_row(row)


def select_session(c: sqlite3.Connection, session_id: str) -> WorkerSession | None:
    row = c.execute(SELECT_SESSION, (session_id,)).fetchone()
    return None if row is None else session_from_row(row)


class SqliteStep(StoreStep):
    """The primitives on one sqlite3 connection, inside the caller's write transaction. They
    are coroutines for the port's template, but never suspend: `finish` runs the template on
    the database thread to its end."""

    def __init__(self, c: sqlite3.Connection) -> None:
        self._c = c

    async def load(self, command: Command) -> tuple[Connection | None, Mapping[str, WorkerSession]]:
        state = select(self._c, command.connection_id)
        found = ((s, select_session(self._c, s)) for s in consulted_sessions(command, state))
        return state, {sid: session for sid, session in found if session is not None}

    async def save(self, change: Change) -> None:
        before = None if change.before is None else change.before.version
        what = f"connection {change.after.connection_id!r}"
        self._write(INSERT, UPDATE, connection_to_row(change.after), before, what)
        self._c.executemany(APPEND, [event_to_row(e) for e in change.logged])

    async def load_session(self, command: SessionCommand) -> WorkerSession | None:
        return select_session(self._c, command.session_id)

    async def opened(self, session_id: str) -> Sequence[SessionEvent]:
        return [
            session_event_from_row(r) for r in self._c.execute(OPENED, (session_id,)).fetchall()
        ]

    async def save_session(self, change: SessionChange) -> None:
        before = None if change.before is None else change.before.version
        what = f"session {change.after.session_id!r}"
        self._write(INSERT_SESSION, UPDATE_SESSION, session_to_row(change.after), before, what)
        self._c.executemany(APPEND_SESSION, [session_event_to_row(e) for e in change.logged])

    def _write(
        self, insert: str, update: str, row: dict[str, Any], version: int | None, what: str
    ) -> None:
        """INSERT a new row, or UPDATE the one at `version` (which the write lock keeps)."""
        if version is None:
            self._c.execute(insert, row)
        elif self._c.execute(update, {**row, "expected_version": version}).rowcount != 1:
            raise RuntimeError(f"{what} changed under the write lock")


def finish(run: Coroutine[Any, Any, T]) -> T:
    """The template's coroutine run to its end on this thread: SqliteStep never suspends, so
    its first step ends it (a suspension would be a bug: it is closed and refused)."""
    try:
        run.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    run.close()
    raise RuntimeError("a SQLite store step suspended; its primitives must not await")


def forget_session(c: sqlite3.Connection, session_id: str, now_ms: int) -> bool:
    """Under the write lock, so no acquire can make the session an owner in between (and a
    dead session never acquires anything anyway)."""
    session = select_session(c, session_id)
    if session is None or session.is_live(now_ms):
        return False
    if c.execute(OWNS_ANY, (session_id,)).fetchone() is not None:
        return False
    c.execute(f"DELETE FROM {SESSIONS} WHERE session_id = ?", (session_id,))
    return True
