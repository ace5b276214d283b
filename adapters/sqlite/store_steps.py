"""The SQLite store's steps: each runs on the database thread inside the caller's transaction
(a write: BEGIN IMMEDIATE, so under the file's write lock from its first read)."""

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

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
from application.ports.store import CommandResult, SessionResult
from domain import (
    NO_OWNER,
    SESSION_LOG_EVENTS,
    Acquire,
    Command,
    Connection,
    OpenSession,
    SessionCommand,
    WorkerSession,
    decide,
    decide_session,
    fold,
    fold_session,
    is_ownership_event,
)


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


def sessions_for(
    c: sqlite3.Connection, state: Connection | None, command: Command
) -> dict[str, WorkerSession]:
    """The sessions `decide` consults: for an Acquire, the acquirer's and the owner's (a
    missing row stays missing: the domain reads it as dead); no other command reads any."""
    if not isinstance(command, Acquire):
        return {}
    ids = {command.session_id}
    if state is not None and state.owner != NO_OWNER:
        ids.add(state.owner)
    found = ((sid, select_session(c, sid)) for sid in ids)
    return {sid: session for sid, session in found if session is not None}


def execute(c: sqlite3.Connection, command: Command, now_ms: int) -> CommandResult:
    """Raises the domain's error (the write then rolls back, having written nothing)."""
    state = select(c, command.connection_id)
    events = decide(state, command, now_ms, sessions_for(c, state, command))
    if not events:
        assert state is not None  # decide returns no events only for an existing connection
        return CommandResult(state, False)
    new_state = fold(events, state)
    assert new_state is not None
    row: dict[str, Any] = connection_to_row(new_state)
    if state is None:
        c.execute(INSERT, row)
    elif c.execute(UPDATE, {**row, "expected_version": state.version}).rowcount != 1:
        raise RuntimeError(f"connection {state.connection_id!r} changed under the write lock")
    c.executemany(APPEND, [event_to_row(e) for e in events if is_ownership_event(e)])
    return CommandResult(new_state, True, tuple(events))


def execute_session(c: sqlite3.Connection, command: SessionCommand, now_ms: int) -> SessionResult:
    state = select_session(c, command.session_id)
    if state is None and isinstance(command, OpenSession):
        # A forgotten session's row is gone but its log is not: an id is never opened twice
        # (the port's promise), so the domain judges the open against its SessionOpened.
        opened = c.execute(OPENED, (command.session_id,)).fetchall()
        state = fold_session(session_event_from_row(r) for r in opened)
    events = decide_session(state, command, now_ms)
    if not events:
        assert state is not None  # an EndSession of an ended session; unknown ones raise
        return SessionResult(state, False)
    new_state = fold_session(events, state)
    assert new_state is not None
    row = session_to_row(new_state)
    if state is None:
        c.execute(INSERT_SESSION, row)
    elif c.execute(UPDATE_SESSION, {**row, "expected_version": state.version}).rowcount != 1:
        raise RuntimeError(f"session {state.session_id!r} changed under the write lock")
    logged = [session_event_to_row(e) for e in events if isinstance(e, SESSION_LOG_EVENTS)]
    c.executemany(APPEND_SESSION, logged)
    return SessionResult(new_state, True)


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
