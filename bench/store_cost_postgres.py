"""The lease store's load on PostgreSQL (suite `store-cost-postgres`): what `store-cost` counts
in DynamoDB requests at the adapter boundary, counted here in the statements the server
executes, on a throwaway server (the dev stack's) with nothing but the store (no worker, no
queue, no sink: message writes are not in it):

- every store operation once, with its statements, in store-cost's order;
- one simulated worker-hour of the worker's periodic store calls (store-cost's
  `periodic_calls`, both cadences) while the worker's session owns each count of connections:
  statements per worker-second at each, which must not grow with connections;
- the hint queue beside it, idle (no hint sent), for QUEUE_WINDOW_S of real time: a worker's
  long polls (`receive` with the worker's `poll_wait_s`), which LISTEN and also look every
  second. The same on every worker whatever it holds.

How statements are counted: the server logs every statement it executes (`log_statement=all`,
each line prefixed with its database's name) and the suite counts the lines of its database
between two marks. That is what the server ran — every BEGIN and COMMIT, asyncpg's type
introspection, the pool's reset query on every release — not what the adapter meant to send.
`pg_stat_statements` would do the same but is not in the wheel the dev stack runs (pgserver);
`pg_stat_database.xact_commit` counts transactions, not statements, and a backend reports it up
to ten seconds late; a wrapper around the client counts calls, not what the server ran.
"""

import asyncio
import re
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg

from adapters.postgres.db import Pool, PostgresDatabase, migrate_database, open_pool
from adapters.postgres.queue import PostgresNotificationQueue
from adapters.postgres.rows import CONNECTION_COLUMNS, connection_to_row
from adapters.postgres.schema import CONNECTIONS
from adapters.postgres.store import PostgresConnectionStore
from adapters.system.clock import SystemClock
from application.config import WorkerConfig
from application.errors import QueueUnavailable
from bench.store_cost import T0, held_by, per_operation, periodic_calls
from entrypoints.devstack.postgres import LocalPostgres, fresh_database, open_local_postgres
from entrypoints.read_side.postgres import postgres_store

STEADY_COUNTS = (10, 100, 1_000, 10_000)
QUEUE_WINDOW_S = 30.0
DATABASE = "storecost"
LOGGING = {"log_statement": "all", "log_line_prefix": "db=%d "}
# "LOG:  statement: BEGIN" (simple query), "LOG:  execute __asyncpg_stmt_3__: SELECT ..."
# (extended: one line per Execute; a Parse is not logged). A statement's later lines carry no
# prefix and are not counted; a statement whose text starts on a new line is named by it.
_LINE = re.compile(r"^db=(\S+) LOG:  (?:statement|execute [^:]*): ?(.*)$")


def kind(sql: str) -> str:
    """The statement's first word, or what it is for when that says more."""
    text = sql.strip()
    if text.startswith("SELECT pg_advisory_unlock_all()"):
        return "pool reset"  # asyncpg's reset on every release to the pool
    if "pg_catalog" in text:
        return "introspection"
    return text.split(None, 1)[0].upper() if text else "empty"


class StatementLog:
    """The statements the server executed in one database, from its log."""

    def __init__(self, path: Path, database: str) -> None:
        self._path = path
        self._database = database
        self._offset = 0

    def mark(self) -> None:
        """Count from here."""
        self._offset = self._path.stat().st_size

    def counted(self) -> Counter[str]:
        """By kind, since the mark."""
        with self._path.open("rb") as log:
            log.seek(self._offset)
            text = log.read().decode(errors="replace")
        kinds: Counter[str] = Counter()
        lines = text.splitlines()
        for at, line in enumerate(lines):
            found = _LINE.match(line)
            if found and found.group(1) == self._database:
                sql = found.group(2) or (lines[at + 1] if at + 1 < len(lines) else "")
                kinds[kind(sql)] += 1
        return kinds

    async def measure(self, call: Awaitable[Any]) -> dict[str, Any]:
        self.mark()
        await call
        kinds = self.counted()
        return {"statements": sum(kinds.values()), "by_kind": dict(sorted(kinds.items()))}


@asynccontextmanager
async def logging_postgres(log_dir: Path) -> AsyncIterator[tuple[LocalPostgres, str, Path]]:
    """A throwaway server that logs every statement, a migrated database on it (its URI), and
    the server's log."""
    async with (
        open_local_postgres(log_dir / "store-cost-postgres", settings=LOGGING) as server,
        fresh_database(server, DATABASE) as url,
    ):
        await migrate_database(url)
        assert server.process is not None
        assert server.process.service is not None
        yield server, url, server.process.service.log_path


async def _own(url: str, session: str, count: int) -> None:
    """`count` STARTED connections owned by `session`, written directly (setup, not counted)."""
    rows = [connection_to_row(conn) for conn in held_by(session, count)]
    conn = await asyncpg.connect(url)
    try:
        await conn.copy_records_to_table(CONNECTIONS, records=rows, columns=CONNECTION_COLUMNS)
    finally:
        await conn.close()


async def steady_worker_hour(
    url: str, store: PostgresConnectionStore, log: StatementLog, connections: int, cadence: str
) -> dict[str, Any]:
    config = WorkerConfig()
    session = f"steady-{cadence}-{connections}"
    await store.open_session(session, config.lease_ms, connections, T0)
    await _own(url, session, connections)
    log.mark()
    calls = await periodic_calls(store, session, connections, cadence)
    kinds = log.counted()
    statements = sum(kinds.values())
    return {
        "connections": connections,
        "reconcile_cadence": cadence,
        "calls_per_worker_hour": dict(calls),
        "statements_per_worker_hour": statements,
        "statements_per_worker_second": round(statements / 3600, 3),
        "statements_by_kind": dict(sorted(kinds.items())),
    }


async def idle_queue(pool: Pool, url: str, log: StatementLog, window_s: float) -> dict[str, Any]:
    """A worker's hint polls on an empty queue for `window_s` (real time): statements/s."""
    config = WorkerConfig()
    queue = PostgresNotificationQueue(
        PostgresDatabase(pool, QueueUnavailable), SystemClock(), listen_url=url
    )
    try:
        await queue.receive(10, 0.1)  # LISTEN set up before counting
        log.mark()
        loop = asyncio.get_running_loop()
        end = loop.time() + window_s
        receives = 0
        while (left := end - loop.time()) > 0:
            await queue.receive(10, min(config.poll_wait_s, left))
            receives += 1
        kinds = log.counted()
    finally:
        await queue.close()
    return {
        "window_s": window_s,
        "receives": receives,
        "statements": sum(kinds.values()),
        "statements_per_second": round(sum(kinds.values()) / window_s, 3),
        "statements_by_kind": dict(sorted(kinds.items())),
    }


async def run_store_cost_postgres(
    log_dir: Path, counts: Sequence[int] = STEADY_COUNTS
) -> dict[str, Any]:
    config = WorkerConfig()
    async with logging_postgres(log_dir) as (server, url, path):
        log = StatementLog(path, url.rsplit("/", 1)[1])
        pool = await open_pool(url)  # shared by store and queue, as a worker's is
        try:
            store = postgres_store(pool)
            operations = await per_operation(store, log.measure)
            steady = [
                await steady_worker_hour(url, store, log, n, cadence)
                for cadence in ("interval", "worker")
                for n in counts
            ]
            queue = await idle_queue(pool, url, log, QUEUE_WINDOW_S)
        finally:
            await pool.close()
    worker = {s["connections"]: s for s in steady if s["reconcile_cadence"] == "worker"}
    low, high = min(worker), max(worker)
    return {
        "engine": f"PostgreSQL {server.version}",
        "counted": "server log (log_statement=all), this database's lines",
        "defaults": {
            "lease_ms": config.lease_ms,
            "heartbeat_interval_s": config.heartbeat_interval_s,
            "stop_check_interval_s": config.desired_state_interval_s,
            "reconcile_interval_s": config.reconcile_interval_s,
            "reconcile_jitter_s": config.reconcile_jitter_s,
        },
        "per_operation": operations,
        "steady_state": steady,
        "idle_queue": queue,
        # The target: statements per worker-second at the most connections within 1.2x those
        # at the fewest (the worker's cadence).
        "growth": {
            "from": low,
            "to": high,
            "ratio": round(
                worker[high]["statements_per_worker_hour"]
                / worker[low]["statements_per_worker_hour"],
                3,
            ),
        },
    }
