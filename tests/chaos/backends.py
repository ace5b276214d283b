"""The deployments a chaos run exercises (the dev stack's, entrypoints/devstack/
backends.py), behind one small interface: where state lives, how a worker process is started,
and the harness's own view (the same EventRouter the API and CLI use for START/STOP, the
store's history, the stored messages, the hint queue).

- aws: DynamoDB on DynamoDB Local and SQS on a moto server (the session's local AWS, each a
  process of its own); workers are `python -m entrypoints.worker` (the ECS task's command).
- embedded: SQLite files in a data directory; workers are `python -m entrypoints.cli worker`.
- postgres: store, hints and sink in a fresh database of the session's throwaway PostgreSQL
  server (devstack/postgres.py), dropped after the run; workers are `python -m
  entrypoints.worker` (the image's command).
- aws-kinesis: aws, with the messages on a Kinesis stream (moto) instead of the table: a sink
  that keeps every copy and cannot say where to resume (the checkpoint decides).
"""

import asyncio
import contextlib
import os
import secrets
from collections.abc import Sequence
from contextlib import AsyncExitStack
from pathlib import Path

import asyncpg
import attrs

from adapters.postgres import schema as postgres_schema
from application.config import WorkerConfig
from application.ports import NotificationQueue
from application.ports.sink import StoredMessage
from application.router import EventRouter
from entrypoints.devstack.aws import LocalAws
from entrypoints.devstack.backends import LocalDeployment, open_aws, open_embedded, open_postgres
from entrypoints.devstack.postgres import LocalPostgres
from entrypoints.devstack.workers import worker_timings
from entrypoints.read_side.embedded import MESSAGES_FILE, STATE_FILE
from tests.chaos import sockets

# The article's timings at 1/10: lease 2 s, heartbeat 0.5 s, desired-state check 1 s,
# self-fence margin 0.6 s, shutdown budget 2 s.
CONFIG = WorkerConfig().scaled(0.5)  # lease 2 s, heartbeat 0.5 s, STOP check 1 s
HINT_VISIBILITY_S = 3  # a hint a dead worker received comes back after 3 s, not 30
# Two departures from the plain 1/10 scale, made when moto (DynamoDB requests served one at a
# time) was the AWS backend and kept because this machine's two cores are shared: messages are
# flushed every 0.25 s (1/10 would be every 20 ms, one BatchWriteItem per message) and the
# orphan index has 2 shards instead of 16 (each reconciliation queries every shard).
FLUSH_INTERVAL_S = 0.25
ORPHAN_SHARDS = 2
# The harness's own view and every worker: the simulator's 127.0.0.1 URLs are allowed.
HARNESS = {
    "WSFLEET_ALLOW_PRIVATE_UPSTREAMS": "true",
    "WSFLEET_HINT_VISIBILITY_TIMEOUT_S": str(HINT_VISIBILITY_S),
}
# Balancing (issue 14): on in every run, as in production by default. It was off on the AWS
# dev stack until two hint defects it exposed there were fixed (docs/decisions.md: "A hint of
# a connection handed back..." and "Every hint goes out twice").
BALANCE_ON = frozenset({"embedded", "aws", "aws-kinesis", "postgres"})
KINESIS_CHECKPOINT_S = 2.0
_WAL_WRITE_LOCK = 120  # SQLite: the byte of the -shm file a writer locks (WALINDEX_LOCK_OFFSET)


def timing_env(config: WorkerConfig = CONFIG) -> dict[str, str]:
    return {**worker_timings(config), "WSFLEET_INGEST_FLUSH_INTERVAL_S": str(FLUSH_INTERVAL_S)}


class Backend:
    """A chaos run's deployment (the dev stack's, entrypoints/devstack/backends.py), opened by
    `open` and closed by `close`: on aws, tables and a queue of the run's own, so consecutive
    soak runs share the session's one DynamoDB Local and moto server (the tables go at the end);
    on postgres, a database of the run's own on the session's server (dropped at the end); on
    embedded, a data directory in the run's."""

    def __init__(
        self,
        name: str,
        aws: LocalAws | None,
        sink: str = "dynamodb",
        config: WorkerConfig = CONFIG,
        *,
        postgres: LocalPostgres | None = None,
    ) -> None:
        self.name = name
        self._aws = aws
        self._postgres = postgres
        self._sink = sink
        self.config = config  # every worker's timings
        self._stack = AsyncExitStack()
        self._deployment: LocalDeployment | None = None

    @property
    def deployment(self) -> LocalDeployment:
        assert self._deployment is not None, "the backend is not open"
        return self._deployment

    @property
    def router(self) -> EventRouter:
        return self.deployment.router

    @property
    def queue(self) -> NotificationQueue:
        return self.deployment.queue

    @property
    def sink_max_batch(self) -> int:
        """The most messages one sink write carries."""
        return self.deployment.sink_max_batch

    async def open(self, run_dir: Path) -> None:
        opening: contextlib.AbstractAsyncContextManager[LocalDeployment]
        if self._postgres is not None:
            opening = open_postgres(self._postgres, HARNESS, prefix="chaos")
        elif self._aws is None:
            opening = open_embedded(run_dir / "data", HARNESS)
        else:
            opening = open_aws(
                self._aws.env(),
                aws=self._aws,
                run=f"chaos{secrets.token_hex(3)}",
                shards=ORPHAN_SHARDS,
                hint_visibility_s=HINT_VISIBILITY_S,
                settings=HARNESS,
                drop_tables=True,  # the engine serves the next run
                sink=self._sink,
            )
        self._deployment = await self._stack.enter_async_context(opening)

    def worker_argv(self, name: str) -> list[str]:
        return self.deployment.worker_argv(name)

    def environment(self) -> dict[str, str]:
        """WSFLEET_* variables shared by the harness and every worker."""
        return {**self.deployment.env, **HARNESS}

    async def messages(self, connection_id: str) -> list[StoredMessage]:
        """One per seq (a stream's copies dropped by the reader's rule)."""
        return await self.deployment.messages(connection_id)

    async def stored_seqs(self, connection_id: str) -> list[int]:
        """Every stored copy's seq: a stream's duplicates appear here."""
        return await self.deployment.seqs(connection_id)

    @property
    def sink_keeps_copies(self) -> bool:
        return self.deployment.sink_keeps_copies

    async def rewrites(self) -> dict[str, int] | None:
        """Rewritten seqs per connection, where the sink counts them (else None: DynamoDB
        keeps no count, an overwrite shows only as a changed token)."""
        return await self.deployment.rewrites()

    async def write_locks_held(self, pid: int) -> list[str]:
        """Which of the backend's databases `pid` holds the write lock of ("store", "sink").
        SQLite in WAL mode takes its write lock as a POSIX lock on byte 120 of the -shm
        file, which /proc/locks lists with the holder's pid; on PostgreSQL, "store" when one
        of `pid`'s server sessions is inside a transaction holding a lock on a store table
        (its row locks block whoever locks those rows next: a renew's lock on its session row
        holds up every takeover of that session's connections); DynamoDB has nothing a
        client process can hold."""
        if self._postgres is not None:
            return await postgres_locks_held(self.deployment.postgres_url, self._postgres, pid)
        data_dir = self.deployment.data_dir
        if data_dir is None:
            return []
        return await asyncio.to_thread(sqlite_locks_held, data_dir, pid)

    async def close(self) -> None:
        await self._stack.aclose()


def new_backend(name: str, aws: LocalAws | None, postgres: LocalPostgres | None = None) -> Backend:
    """`aws` is the session's local AWS, `postgres` its PostgreSQL server; only the backends
    of their name need them."""
    if name == "embedded":
        return Backend(name, None)
    if name == "postgres" and postgres is not None:
        return Backend(name, None, sink="postgres", postgres=postgres)
    if name == "aws" and aws is not None:
        return Backend(name, aws)
    if name == "aws-kinesis" and aws is not None:
        # A sink without a resume point: a takeover replays from the checkpoint recorded with
        # the connection, here every 2 s (rate x 2 s copies at most per connection and crash).
        config = attrs.evolve(CONFIG, checkpoint_interval_s=KINESIS_CHECKPOINT_S)
        return Backend(name, aws, sink="kinesis", config=config)
    raise ValueError(f"backend {name!r} (with aws={aws!r}, postgres={postgres!r})")


def sqlite_locks_held(data_dir: Path, pid: int) -> list[str]:
    """Which of the SQLite files in `data_dir` `pid` holds the WAL write lock of."""
    files = {"store": STATE_FILE, "sink": MESSAGES_FILE}
    inodes = {}
    for name, file in files.items():
        with contextlib.suppress(FileNotFoundError):
            inodes[str(os.stat(data_dir / f"{file}-shm").st_ino)] = name
    held = []
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        # "1: POSIX ADVISORY WRITE <pid> <maj>:<min>:<inode> <start> <end>"
        if len(fields) >= 8 and fields[3] == "WRITE" and fields[4] == str(pid):
            inode = fields[5].rsplit(":", 1)[1]
            if inode in inodes and int(fields[6]) <= _WAL_WRITE_LOCK <= int(fields[7]):
                held.append(inodes[inode])
    return sorted(held)


# The store's tables; the sink's and the queue's locks are not the ones a takeover waits on.
_POSTGRES_STORE_TABLES = (
    postgres_schema.CONNECTIONS,
    postgres_schema.SESSIONS,
    postgres_schema.EVENTS,
    postgres_schema.SESSION_EVENTS,
)


async def postgres_locks_held(url: str, server: LocalPostgres, pid: int) -> list[str]:
    """["store"] if a server session of process `pid` (matched by its client port, read from
    /proc) is inside a transaction that holds a lock on a store table."""
    ports = sockets.local_ports(pid, server.port)
    if not ports:
        return []
    conn = await asyncpg.connect(url)
    try:
        tables = await conn.fetch(
            """SELECT DISTINCT c.relname FROM pg_locks l
               JOIN pg_stat_activity a ON a.pid = l.pid
               JOIN pg_class c ON c.oid = l.relation
               WHERE a.client_port = ANY($1::int[]) AND a.xact_start IS NOT NULL
                 AND l.granted AND c.relname = ANY($2::text[])""",
            sorted(ports),
            list(_POSTGRES_STORE_TABLES),
        )
    finally:
        await conn.close()
    return ["store"] if tables else []


async def send_hints(queue: NotificationQueue, connection_ids: Sequence[str]) -> None:
    """Hints straight onto the queue, as a redelivery or a duplicate router call would."""
    for start in range(0, len(connection_ids), 10):
        await queue.send(connection_ids[start : start + 10])
