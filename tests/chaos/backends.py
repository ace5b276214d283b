"""The two deployments a chaos run exercises, behind one small interface: where state lives,
how a worker process is started, and the harness's own view (the same EventRouter the API and
CLI use for START/STOP, the store's history, the stored messages, the hint queue).

- aws: DynamoDB on DynamoDB Local and SQS on a moto server (the session's local AWS, each a
  process of its own); workers are `python -m entrypoints.worker` (the ECS task's command).
- embedded: SQLite files in a data directory; workers are `python -m entrypoints.cli worker`.
"""

import contextlib
import os
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import attrs
from aiobotocore.session import get_session

from adapters.dynamodb.message_sink import MAX_BATCH as DYNAMODB_MAX_BATCH
from adapters.dynamodb.schema import TableNames
from adapters.dynamodb.tables import create_tables
from adapters.sqlite.message_sink import DEFAULT_MAX_BATCH as SQLITE_MAX_BATCH
from adapters.sqlite.message_sink import SqliteMessageSink
from adapters.sqs import create_queue
from application.config import WorkerConfig
from application.ports import NotificationQueue
from application.ports.sink import StoredMessage
from application.router import EventRouter
from entrypoints.containers import AwsContainer, provide, shutdown
from entrypoints.devstack.aws import LocalAws, set_fake_credentials
from entrypoints.devstack.service import CREDENTIALS
from entrypoints.embedded import MESSAGES_FILE, STATE_FILE, EmbeddedContainer
from entrypoints.settings import load_settings
from tests.support.dynamodb import read_messages

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
_CREDENTIALS = {
    "aws_access_key_id": CREDENTIALS["AWS_ACCESS_KEY_ID"],
    "aws_secret_access_key": CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
}
_WAL_WRITE_LOCK = 120  # SQLite: the byte of the -shm file a writer locks (WALINDEX_LOCK_OFFSET)


def timing_env(config: WorkerConfig = CONFIG) -> dict[str, str]:
    env = {
        f"WSFLEET_{field.name.upper()}": str(getattr(config, field.name))
        for field in attrs.fields(WorkerConfig)
    }
    env["WSFLEET_INGEST_FLUSH_INTERVAL_S"] = str(FLUSH_INTERVAL_S)
    return env


class Backend(Protocol):
    name: str
    sink_max_batch: int  # the most messages one sink write carries
    router: EventRouter
    queue: NotificationQueue

    async def open(self, run_dir: Path) -> None: ...

    def worker_command(self, name: str) -> list[str]: ...

    def environment(self) -> dict[str, str]:
        """WSFLEET_* variables shared by the harness and every worker."""
        ...

    async def messages(self, connection_id: str) -> list[StoredMessage]: ...

    async def rewrites(self) -> dict[str, int] | None:
        """Rewritten seqs per connection, where the sink counts them (else None)."""
        ...

    def write_locks_held(self, pid: int) -> list[str]:
        """Which of the backend's databases `pid` holds the write lock of ("store", "sink")."""
        ...

    async def close(self) -> None: ...


class _Common:
    name = ""
    sink_max_batch = 0
    router: EventRouter
    queue: NotificationQueue

    def __init__(self) -> None:
        self._env: dict[str, str] = {}
        self._container: Any = None

    def environment(self) -> dict[str, str]:
        return {
            **self._env,
            "WSFLEET_ALLOW_PRIVATE_UPSTREAMS": "true",
            "WSFLEET_HINT_VISIBILITY_TIMEOUT_S": str(HINT_VISIBILITY_S),
        }

    def write_locks_held(self, pid: int) -> list[str]:
        return []  # DynamoDB: nothing a client process can hold

    async def _open_container(self, container: Any) -> None:
        self._container = container
        self.router = await provide(container.core.router)
        self.queue = await provide(container.queue)

    async def close(self) -> None:
        if self._container is not None:
            await shutdown(self._container)


class AwsBackend(_Common):
    """On the session's local AWS (tests/support/aws.py): tables and a queue of the run's own,
    so consecutive soak runs share the one DynamoDB Local and moto server."""

    name = "aws"
    sink_max_batch = DYNAMODB_MAX_BATCH

    def __init__(self, aws: LocalAws) -> None:
        super().__init__()
        self._aws = aws
        self._dynamodb: Any = None
        run = f"chaos{secrets.token_hex(3)}"
        self._tables = TableNames(
            connections=f"{run}-connections",
            events=f"{run}-events",
            messages=f"{run}-messages",
            sessions=f"{run}-sessions",
        )
        self._queue_name = f"{run}-hints"

    async def open(self, run_dir: Path) -> None:
        set_fake_credentials()
        session = get_session()
        where: dict[str, Any] = {"region_name": self._aws.region, **_CREDENTIALS}
        async with session.create_client(
            "dynamodb", endpoint_url=self._aws.dynamodb_url, **where
        ) as dynamodb:
            await create_tables(dynamodb, self._tables, shards=ORPHAN_SHARDS)
        async with session.create_client("sqs", endpoint_url=self._aws.moto_url, **where) as sqs:
            queue_url = await create_queue(sqs, self._queue_name, HINT_VISIBILITY_S)
        self._env = {
            **self._aws.env(),
            "WSFLEET_QUEUE_URL": queue_url,
            "WSFLEET_ORPHAN_SHARDS": str(ORPHAN_SHARDS),
            "WSFLEET_CONNECTIONS_TABLE": self._tables.connections,
            "WSFLEET_EVENTS_TABLE": self._tables.events,
            "WSFLEET_MESSAGES_TABLE": self._tables.messages,
        }
        container = AwsContainer(settings=load_settings(self.environment()))
        await self._open_container(container)
        self._dynamodb = await provide(container.dynamodb)

    def worker_command(self, name: str) -> list[str]:
        return ["-m", "entrypoints.worker"]

    async def messages(self, connection_id: str) -> list[StoredMessage]:
        return await read_messages(self._dynamodb, self._tables.messages, connection_id)

    async def rewrites(self) -> dict[str, int] | None:
        return None  # DynamoDB keeps no count: an overwrite shows only as a changed token

    async def close(self) -> None:
        if self._dynamodb is not None:  # the run's tables go; the engine serves the next run
            for table in attrs.astuple(self._tables):
                with contextlib.suppress(Exception):
                    await self._dynamodb.delete_table(TableName=table)
        await super().close()


class EmbeddedBackend(_Common):
    name = "embedded"
    sink_max_batch = SQLITE_MAX_BATCH

    def __init__(self) -> None:
        super().__init__()
        self._sink: SqliteMessageSink | None = None
        self._data_dir: Path | None = None

    async def open(self, run_dir: Path) -> None:
        data_dir = self._data_dir = run_dir / "data"
        data_dir.mkdir()
        self._env = {"WSFLEET_BACKEND": "embedded", "WSFLEET_DATA_DIR": str(data_dir)}
        container = EmbeddedContainer(settings=load_settings(self.environment()))
        await self._open_container(container)
        self._sink = await provide(container.sink)

    def worker_command(self, name: str) -> list[str]:
        return ["-m", "entrypoints.cli", "worker", "--name", name]

    async def messages(self, connection_id: str) -> list[StoredMessage]:
        assert self._sink is not None
        return await self._sink.read(connection_id)

    def write_locks_held(self, pid: int) -> list[str]:
        """SQLite in WAL mode takes its write lock as a POSIX lock on byte 120 of the -shm
        file, which /proc/locks lists with the holder's pid."""
        assert self._data_dir is not None
        files = {"store": STATE_FILE, "sink": MESSAGES_FILE}
        inodes = {}
        for name, file in files.items():
            with contextlib.suppress(FileNotFoundError):
                inodes[str(os.stat(self._data_dir / f"{file}-shm").st_ino)] = name
        held = []
        for line in Path("/proc/locks").read_text().splitlines():
            fields = line.split()
            # "1: POSIX ADVISORY WRITE <pid> <maj>:<min>:<inode> <start> <end>"
            if len(fields) >= 8 and fields[3] == "WRITE" and fields[4] == str(pid):
                inode = fields[5].rsplit(":", 1)[1]
                if inode in inodes and int(fields[6]) <= _WAL_WRITE_LOCK <= int(fields[7]):
                    held.append(inodes[inode])
        return sorted(held)

    async def rewrites(self) -> dict[str, int] | None:
        assert self._sink is not None
        return await self._sink.rewrites()


def new_backend(name: str, aws: LocalAws | None) -> Backend:
    """`aws` is the session's local AWS; only the aws backend needs it."""
    if name == "embedded":
        return EmbeddedBackend()
    if name == "aws" and aws is not None:
        return AwsBackend(aws)
    raise ValueError(f"backend {name!r} (with aws={aws!r})")


async def send_hints(queue: NotificationQueue, connection_ids: Sequence[str]) -> None:
    """Hints straight onto the queue, as a redelivery or a duplicate router call would."""
    for start in range(0, len(connection_ids), 10):
        await queue.send(connection_ids[start : start + 10])
