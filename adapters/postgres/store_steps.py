"""The PostgreSQL store's steps, each run inside the caller's transaction (PostgresDatabase
.write). The shape of adapters/sqlite/store_steps.py: read (here under row locks), the
domain's decide, fold, write, append the logged events. That read-decide-fold-write step is
now written in each store (memory, SQLite, DynamoDB, PostgreSQL); lifting it into the port's
base, leaving each store its primitives, is the next step for the stores."""

from adapters.postgres import store_sql as sql
from adapters.postgres.rows import (
    connection_from_row,
    connection_to_row,
    log_row,
    session_event_from_row,
    session_from_row,
    session_to_row,
)
from adapters.postgres.schema import Conn
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


async def select(c: Conn, connection_id: str) -> Connection | None:
    row = await c.fetchrow(sql.SELECT, connection_id)
    return None if row is None else connection_from_row(row)


async def select_session(c: Conn, session_id: str) -> WorkerSession | None:
    row = await c.fetchrow(sql.SELECT_SESSION, session_id)
    return None if row is None else session_from_row(row)


async def sessions_for(
    c: Conn, state: Connection | None, command: Command
) -> dict[str, WorkerSession]:
    """The sessions `decide` consults, locked shared: for an Acquire, the acquirer's and the
    owner's (a missing row stays missing: the domain reads it as dead); none otherwise."""
    if not isinstance(command, Acquire):
        return {}
    ids = {command.session_id}
    if state is not None and state.owner != NO_OWNER:
        ids.add(state.owner)
    rows = await c.fetch(sql.SESSIONS_FOR_SHARE, sorted(ids))
    return {row["session_id"]: session_from_row(row) for row in rows}


async def execute(c: Conn, command: Command, now_ms: int) -> CommandResult:
    """Raises the domain's error (the transaction then rolls back, having written nothing).
    Two commands creating one connection collide on its key: the caller retries, and the
    loser decides again on the winner's row."""
    row = await c.fetchrow(sql.SELECT_FOR_UPDATE, command.connection_id)
    state = None if row is None else connection_from_row(row)
    events = decide(state, command, now_ms, await sessions_for(c, state, command))
    if not events:
        assert state is not None  # decide returns no events only for an existing connection
        return CommandResult(state, False)
    new_state = fold(events, state)
    assert new_state is not None
    values = connection_to_row(new_state)
    if state is None:
        await c.execute(sql.INSERT, *values)
    elif await c.execute(sql.UPDATE, *values, state.version) != "UPDATE 1":
        raise RuntimeError(f"connection {state.connection_id!r} changed under its row lock")
    logged = [log_row(e.connection_id, e) for e in events if is_ownership_event(e)]
    if logged:
        await c.executemany(sql.APPEND, logged)
    return CommandResult(new_state, True, tuple(events))


async def execute_session(c: Conn, command: SessionCommand, now_ms: int) -> SessionResult:
    row = await c.fetchrow(sql.SELECT_SESSION_FOR_UPDATE, command.session_id)
    state = None if row is None else session_from_row(row)
    if state is None and isinstance(command, OpenSession):
        # A forgotten session's row is gone but its log is not: an id is never opened twice
        # (the port's promise), so the domain judges the open against its SessionOpened.
        opened = await c.fetch(sql.OPENED, command.session_id)
        state = fold_session(session_event_from_row(r) for r in opened)
    events = decide_session(state, command, now_ms)
    if not events:
        assert state is not None  # an EndSession of an ended session; unknown ones raise
        return SessionResult(state, False)
    new_state = fold_session(events, state)
    assert new_state is not None
    values = session_to_row(new_state)
    if row is None or state is None:
        await c.execute(sql.INSERT_SESSION, *values)
    elif await c.execute(sql.UPDATE_SESSION, *values, state.version) != "UPDATE 1":
        raise RuntimeError(f"session {state.session_id!r} changed under its row lock")
    logged = [log_row(e.session_id, e) for e in events if isinstance(e, SESSION_LOG_EVENTS)]
    if logged:
        await c.executemany(sql.APPEND_SESSION, logged)
    return SessionResult(new_state, True)


async def forget_session(c: Conn, session_id: str, now_ms: int) -> bool:
    """Under the session's row lock: an acquire judging it (which holds it shared) finishes
    first, and a dead session never acquires anything anyway."""
    row = await c.fetchrow(sql.SELECT_SESSION_FOR_UPDATE, session_id)
    if row is None or session_from_row(row).is_live(now_ms):
        return False
    if await c.fetchrow(sql.OWNS_ANY, session_id) is not None:
        return False
    await c.execute(sql.DELETE_SESSION, session_id)
    return True
