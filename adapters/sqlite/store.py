"""SqliteConnectionStore: the connection store on one SQLite file, shared by the worker
processes of one host.

Every command is one BEGIN IMMEDIATE transaction that reads the row, judges the command with
`domain.decide`, writes the folded state and appends the ownership events. BEGIN IMMEDIATE
takes the database's single write lock before the read, so no other process can change the
row between the read and the write: read-decide-write is exactly as atomic as a conditional
update, with the domain's own preconditions rather than a hand-written copy of them in SQL.
Renewals and checkpoints update the row only; the log holds ownership events (as in DynamoDB).
"""

import os
import sqlite3
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from adapters.sqlite.db import SqliteDatabase
from adapters.sqlite.rows import (
    CONNECTION_COLUMNS,
    connection_from_row,
    connection_to_row,
    event_from_row,
    event_to_row,
)
from adapters.sqlite.schema import CONNECTIONS, EVENTS, STORE_SCHEMA
from application.errors import StoreUnavailable
from application.ports.store import CommandResult, RenewResult
from domain import (
    Acquire,
    Command,
    Connection,
    DesiredState,
    DomainError,
    EndStream,
    Event,
    Release,
    Renew,
    ReportUpstreamFailure,
    Start,
    Stop,
    decide,
    fold,
    is_ownership_event,
)

T = TypeVar("T")

# Far below SQLite's bound-parameter limit (999 before 3.32, 32766 since).
MAX_IDS_PER_QUERY = 500

_SELECT = f"SELECT * FROM {CONNECTIONS} WHERE connection_id = ?"
_INSERT = (
    f"INSERT INTO {CONNECTIONS} ({', '.join(CONNECTION_COLUMNS)}) "
    f"VALUES ({', '.join(':' + c for c in CONNECTION_COLUMNS)})"
)
# The version condition always holds under the write lock; it is checked anyway so that a
# broken locking assumption fails loudly instead of silently granting a lease twice.
_UPDATE = (
    f"UPDATE {CONNECTIONS} SET {', '.join(f'{c} = :{c}' for c in CONNECTION_COLUMNS[1:])} "
    "WHERE connection_id = :connection_id AND version = :expected_version"
)
_APPEND = (
    f"INSERT INTO {EVENTS} (connection_id, version, event_type, at_ms, body) "
    "VALUES (:connection_id, :version, :event_type, :at_ms, :body)"
)
# Keyset pagination on the index (desired_state, available_at_ms, connection_id).
_ORPHAN_PAGE = (
    f"SELECT * FROM {CONNECTIONS} WHERE desired_state = 'STARTED' AND available_at_ms < ? "
    "AND (available_at_ms, connection_id) > (?, ?) "
    "ORDER BY available_at_ms, connection_id LIMIT ?"
)
_NEXT_AVAILABLE = (
    f"SELECT MIN(available_at_ms) FROM {CONNECTIONS} "
    "WHERE desired_state = 'STARTED' AND available_at_ms >= ?"
)


class SqliteConnectionStore:
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
        Raises ConfigurationError (bad path or setting) or StoreUnavailable (locked)."""
        db = await SqliteDatabase.open(
            path,
            schema=STORE_SCHEMA,
            unavailable=StoreUnavailable,
            busy_timeout_s=busy_timeout_s,
            synchronous=synchronous,
            name="sqlite-store",
        )
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

    async def start(self, connection_id: str, ws_url: str, now_ms: int) -> CommandResult:
        conn, changed = await self._apply(Start(connection_id, ws_url), now_ms, "start")
        return CommandResult(conn, changed)

    async def stop(self, connection_id: str, now_ms: int) -> CommandResult:
        conn, changed = await self._apply(Stop(connection_id), now_ms, "stop")
        return CommandResult(conn, changed)

    async def get(self, connection_id: str) -> Connection | None:
        return await self._read("get", lambda c: _select(c, connection_id))

    async def try_acquire(
        self, connection_id: str, worker_id: str, lease_ms: int, now_ms: int
    ) -> Connection | None:
        try:
            cmd = Acquire(connection_id, worker_id, lease_ms)
            return (await self._apply(cmd, now_ms, "try_acquire"))[0]
        except DomainError:
            return None

    async def renew(
        self,
        connection_id: str,
        worker_id: str,
        token: int,
        lease_ms: int,
        checkpoint_seq: int,
        now_ms: int,
    ) -> RenewResult:
        cmd = Renew(connection_id, worker_id, token, lease_ms, checkpoint_seq)

        def renew(c: sqlite3.Connection) -> RenewResult:
            state = _select(c, connection_id)
            try:
                return RenewResult(True, _decide_and_write(c, state, cmd, now_ms)[0])
            except DomainError:
                return RenewResult(False, state)  # the state that refused it, read under lock

        self._count("renew")
        return await self._db.write(renew)

    async def release(
        self, connection_id: str, worker_id: str, token: int, checkpoint_seq: int, now_ms: int
    ) -> Connection:
        cmd = Release(connection_id, worker_id, token, checkpoint_seq)
        return (await self._apply(cmd, now_ms, "release"))[0]

    async def end_stream(
        self, connection_id: str, worker_id: str, token: int, checkpoint_seq: int, now_ms: int
    ) -> Connection:
        cmd = EndStream(connection_id, worker_id, token, checkpoint_seq)
        return (await self._apply(cmd, now_ms, "end_stream"))[0]

    async def report_upstream_failure(
        self,
        connection_id: str,
        worker_id: str,
        token: int,
        checkpoint_seq: int,
        not_before_ms: int,
        reason: str,
        now_ms: int,
    ) -> Connection:
        cmd = ReportUpstreamFailure(
            connection_id, worker_id, token, checkpoint_seq, not_before_ms, reason
        )
        return (await self._apply(cmd, now_ms, "report_upstream_failure"))[0]

    async def iter_orphans(
        self, now_ms: int, page_size: int
    ) -> AsyncIterator[Sequence[Connection]]:
        """One query per page (each counted); a page shorter than `page_size` is the last."""
        if page_size < 1:
            raise ValueError(f"page_size must be positive, got {page_size}")
        after: tuple[int, str] = (-1, "")
        while True:
            rows = await self._read("iter_orphans", _page_reader(now_ms, after, page_size))
            if rows:
                yield [connection_from_row(r) for r in rows]
            if len(rows) < page_size:
                return
            after = (rows[-1]["available_at_ms"], rows[-1]["connection_id"])

    async def next_available_at(self, now_ms: int) -> int | None:
        row = await self._read(
            "next_available_at", lambda c: c.execute(_NEXT_AVAILABLE, (now_ms,)).fetchone()
        )
        return None if row[0] is None else int(row[0])

    async def desired_states(self, connection_ids: Sequence[str]) -> Mapping[str, DesiredState]:
        ids = list(dict.fromkeys(connection_ids))
        if not ids:
            return {}

        def query(c: sqlite3.Connection) -> dict[str, DesiredState]:
            found: dict[str, DesiredState] = {}
            for i in range(0, len(ids), MAX_IDS_PER_QUERY):
                chunk = ids[i : i + MAX_IDS_PER_QUERY]
                sql = (
                    f"SELECT connection_id, desired_state FROM {CONNECTIONS} "
                    f"WHERE connection_id IN ({', '.join('?' * len(chunk))})"
                )
                for cid, desired in c.execute(sql, chunk):
                    found[cid] = DesiredState(desired)
            return found

        return await self._read("desired_states", query)

    async def history(self, connection_id: str) -> Sequence[Event]:
        sql = f"SELECT body FROM {EVENTS} WHERE connection_id = ? ORDER BY version"
        rows = await self._read("history", lambda c: c.execute(sql, (connection_id,)).fetchall())
        return [event_from_row(r) for r in rows]

    async def list_connections(self, limit: int = 1000) -> Sequence[Connection]:
        sql = f"SELECT * FROM {CONNECTIONS} ORDER BY connection_id LIMIT ?"
        # max(): a negative LIMIT means "no limit" to SQLite.
        rows = await self._read(
            "list_connections", lambda c: c.execute(sql, (max(limit, 0),)).fetchall()
        )
        return [connection_from_row(r) for r in rows]

    async def _apply(self, command: Command, now_ms: int, op: str) -> tuple[Connection, bool]:
        self._count(op)
        return await self._db.write(
            lambda c: _decide_and_write(c, _select(c, command.connection_id), command, now_ms)
        )

    async def _read(self, op: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        self._count(op)
        return await self._db.read(fn)

    def _count(self, op: str) -> None:
        self.operations[op] = self.operations.get(op, 0) + 1


# These run on the database thread, inside the caller's transaction.


def _select(c: sqlite3.Connection, connection_id: str) -> Connection | None:
    row = c.execute(_SELECT, (connection_id,)).fetchone()
    return None if row is None else connection_from_row(row)


def _page_reader(
    now_ms: int, after: tuple[int, str], page_size: int
) -> Callable[[sqlite3.Connection], list[sqlite3.Row]]:
    params = (now_ms, *after, page_size)
    return lambda c: c.execute(_ORPHAN_PAGE, params).fetchall()


def _decide_and_write(
    c: sqlite3.Connection, state: Connection | None, command: Command, now_ms: int
) -> tuple[Connection, bool]:
    """Raises the domain's error (the transaction then rolls back, having written nothing)."""
    events = decide(state, command, now_ms)
    if not events:
        assert state is not None  # decide returns no events only for an existing connection
        return state, False
    new_state = fold(events, state)
    assert new_state is not None
    row: dict[str, Any] = connection_to_row(new_state)
    if state is None:
        c.execute(_INSERT, row)
    elif c.execute(_UPDATE, {**row, "expected_version": state.version}).rowcount != 1:
        raise RuntimeError(f"{state.connection_id!r} changed under the write lock")
    c.executemany(_APPEND, [event_to_row(e) for e in events if is_ownership_event(e)])
    return new_state, True
