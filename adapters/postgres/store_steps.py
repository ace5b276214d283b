"""The PostgreSQL store's primitives, each run inside the caller's transaction
(PostgresDatabase.write): the loads take row locks, the saves write the decided row and append
the logged events. The read-decide-fold-write step around them is the port's template
(application/ports/store_step.py), as for every store."""

from collections.abc import Mapping, Sequence
from typing import Any

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
from application.ports.store_step import Change, SessionChange, StoreStep, consulted_sessions
from domain import Command, Connection, SessionCommand, SessionEvent, WorkerSession


async def select(c: Conn, connection_id: str) -> Connection | None:
    row = await c.fetchrow(sql.SELECT, connection_id)
    return None if row is None else connection_from_row(row)


async def select_session(c: Conn, session_id: str) -> WorkerSession | None:
    row = await c.fetchrow(sql.SELECT_SESSION, session_id)
    return None if row is None else session_from_row(row)


class PostgresStep(StoreStep):
    """The primitives on one connection inside the caller's transaction, under row locks: the
    connection FOR UPDATE, an Acquire's sessions FOR SHARE (in id order), a session FOR UPDATE.
    Two commands creating one row collide on its key: the transaction is run again, and the
    loser decides on the winner's row."""

    def __init__(self, c: Conn) -> None:
        self._c = c

    async def load(self, command: Command) -> tuple[Connection | None, Mapping[str, WorkerSession]]:
        row = await self._c.fetchrow(sql.SELECT_FOR_UPDATE, command.connection_id)
        state = None if row is None else connection_from_row(row)
        ids = sorted(consulted_sessions(command, state))
        rows = await self._c.fetch(sql.SESSIONS_FOR_SHARE, ids) if ids else []
        return state, {r["session_id"]: session_from_row(r) for r in rows}

    async def save(self, change: Change) -> None:
        before = None if change.before is None else change.before.version
        what = f"connection {change.after.connection_id!r}"
        await self._write(sql.INSERT, sql.UPDATE, connection_to_row(change.after), before, what)
        await self._append(sql.APPEND, [log_row(e.connection_id, e) for e in change.logged])

    async def load_session(self, command: SessionCommand) -> WorkerSession | None:
        row = await self._c.fetchrow(sql.SELECT_SESSION_FOR_UPDATE, command.session_id)
        return None if row is None else session_from_row(row)

    async def opened(self, session_id: str) -> Sequence[SessionEvent]:
        return [session_event_from_row(r) for r in await self._c.fetch(sql.OPENED, session_id)]

    async def save_session(self, change: SessionChange) -> None:
        before = None if change.before is None else change.before.version
        what = f"session {change.after.session_id!r}"
        values = session_to_row(change.after)
        await self._write(sql.INSERT_SESSION, sql.UPDATE_SESSION, values, before, what)
        await self._append(sql.APPEND_SESSION, [log_row(e.session_id, e) for e in change.logged])

    async def _write(
        self, insert: str, update: str, values: Sequence[Any], version: int | None, what: str
    ) -> None:
        """INSERT a new row, or UPDATE the one at `version` (which its row lock keeps)."""
        if version is None:
            await self._c.execute(insert, *values)
        elif await self._c.execute(update, *values, version) != "UPDATE 1":
            raise RuntimeError(f"{what} changed under its row lock")

    async def _append(self, statement: str, logged: list[tuple[Any, ...]]) -> None:
        if logged:
            await self._c.executemany(statement, logged)


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
