"""One local deployment of wsfleet, for the demo, the benchmarks and the chaos suite: where its
state lives, the WSFLEET_* variables that point a process (a worker, the API, the CLI) at it,
and the caller's own view of it, built through the production containers (the EventRouter
the API and the CLI use for START and STOP, the store, the hint queue) plus the readers a
judge needs (the stored messages, the sink's rewrite counts).

- embedded: SQLite files in a data directory; its worker is `wsfleet worker`.
- aws: DynamoDB and SQS where `where` says (the dev stack's local AWS, or an emulator), with
  tables and a hint queue created by the adapters' own helpers, named for the run when
  `run` is given (so that runs can share one DynamoDB Local); its worker is
  `python -m entrypoints.worker` (the ECS task's command). Its sink is the messages table,
  or with `sink="kinesis"` a Kinesis stream on the same endpoint as SQS (moto), created
  for the run and read back by the Kinesis reader (every copy, and the reader's rule).
- postgres: a fresh database on a PostgreSQL server (the dev stack's throwaway one,
  devstack/postgres.py), migrated as `wsfleet migrate` does; its worker is
  `python -m entrypoints.worker` too.

Each backend's entry in entrypoints/backends.py names its `start_*` here: the backing
services started in a run directory, then the deployment on them, all stopped afterwards."""

import asyncio
import contextlib
import functools
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import attrs

from adapters.dynamodb import schema
from adapters.dynamodb.message_reader import DynamoDbMessageReader
from adapters.dynamodb.message_sink import MAX_BATCH as DYNAMODB_MAX_BATCH
from adapters.dynamodb.tables import create_tables
from adapters.kinesis import KinesisMessageReader, create_stream
from adapters.kinesis.message_sink import MAX_RECORDS as KINESIS_MAX_BATCH
from adapters.postgres.db import migrate_database
from adapters.postgres.message_sink import DEFAULT_MAX_BATCH as POSTGRES_MAX_BATCH
from adapters.sqlite.message_sink import DEFAULT_MAX_BATCH as SQLITE_MAX_BATCH
from adapters.sqs import create_queue
from application.ports import ConnectionStore, NotificationQueue
from application.ports.sink import StoredMessage
from application.router import EventRouter
from entrypoints.backends import backend_of, load
from entrypoints.containers import AwsContainer, provide, shutdown
from entrypoints.devstack.aws import LocalAws, open_local_aws
from entrypoints.devstack.postgres import LocalPostgres, fresh_database, open_local_postgres
from entrypoints.devstack.service import CREDENTIALS
from entrypoints.devstack.workers import AWS_WORKER, embedded_worker
from entrypoints.embedded import EmbeddedContainer
from entrypoints.postgres import PostgresContainer
from entrypoints.settings import PREFIX, load_settings

Rewrites = Callable[[], Awaitable[dict[str, int]]]


@attrs.define(eq=False)
class LocalDeployment:
    name: str  # the backend: "embedded", "aws", "postgres"
    engine: str  # what serves the store: "SQLite", "DynamoDB Local 3.3.0", moto, "PostgreSQL 16.4"
    where: str  # where the state lives, for a summary
    env: dict[str, str] = attrs.field(repr=False)  # WSFLEET_* that point a process here (secrets)
    container: Any
    router: EventRouter
    store: ConnectionStore
    queue: NotificationQueue
    sink_max_batch: int  # the most messages one sink write carries
    _read: Callable[[str], Awaitable[list[StoredMessage]]]
    _seqs: Callable[[str], Awaitable[list[int]]]
    _rewrites: Rewrites | None
    aws: LocalAws | None = None
    dynamodb: Any = None  # the container's client (aws)
    tables: schema.TableNames | None = None  # (aws)
    queue_url: str = ""  # (aws)
    data_dir: Path | None = None  # (embedded)
    postgres: LocalPostgres | None = None  # the server, when the dev stack started it (postgres)
    postgres_url: str = attrs.field(default="", repr=False)  # the database's URI (postgres)
    # "sqlite", "dynamodb" or "kinesis". A stream keeps every copy it is given (a replay after
    # a crash, a retried batch), so a judge reads duplicates there as bounded, not as a fault.
    sink: str = "sqlite"

    @property
    def sink_keeps_copies(self) -> bool:
        return self.sink == "kinesis"

    def worker_argv(self, name: str | None = None) -> list[str]:
        """The image's worker where it runs this backend, else `wsfleet worker`."""
        return list(AWS_WORKER) if backend_of(self.name).image_worker else embedded_worker(name)

    async def messages(self, connection_id: str) -> list[StoredMessage]:
        """Every stored message of a connection, in seq order."""
        return await self._read(connection_id)

    async def seqs(self, connection_id: str) -> list[int]:
        """Every stored row's seq, in order (a duplicate row would appear twice)."""
        return await self._seqs(connection_id)

    async def rewrites(self) -> dict[str, int] | None:
        """Per connection, writes that hit an already-stored seq, where the sink counts them
        (SQLite); None where it cannot (a DynamoDB put overwrites silently)."""
        return None if self._rewrites is None else await self._rewrites()


async def _deployment(container: Any, judged: Any, **fields: Any) -> LocalDeployment:
    """The caller's view through `container`: the router, the store and the queue it provides,
    and, when `judged` (a sink provider) is given, that sink's `read`, `seqs` and `rewrites`
    for a judge (else `fields` name them); `fields` are the rest of the deployment."""
    if judged is not None:
        sink = await provide(judged)
        fields |= {"read": sink.read, "seqs": sink.seqs, "rewrites": sink.rewrites}
    return LocalDeployment(
        container=container,
        router=await provide(container.core.router),
        store=await provide(container.store),
        queue=await provide(container.queue),
        **fields,
    )


def _private_files(data_dir: Path) -> None:
    """The SQLite files made so far, readable by their owner alone. SQLite makes a database's
    -wal and -shm files with the database file's mode; one gone meanwhile needs nothing."""
    for path in data_dir.glob("*.sqlite*"):
        with contextlib.suppress(FileNotFoundError):
            path.chmod(0o600)


@asynccontextmanager
async def open_embedded(
    data_dir: Path, settings: Mapping[str, str] | None = None
) -> AsyncIterator[LocalDeployment]:
    """`settings`: more WSFLEET_* variables for the caller's own view (its URL policy). The
    data directory and its SQLite files are private to their owner, as `wsfleet start` makes
    them (entrypoints/cli/backend.py; not by the umask here: it is the whole process's, and
    the dev stack's PostgreSQL runs as another user): made with the shell's umask, every
    worker started on it warned that they were readable by others."""
    await asyncio.to_thread(data_dir.mkdir, mode=0o700, parents=True, exist_ok=True)
    env = {PREFIX + "BACKEND": "embedded", PREFIX + "DATA_DIR": str(data_dir)}
    container = EmbeddedContainer(settings=load_settings({**(settings or {}), **env}))
    try:
        deployment = await _deployment(
            container,
            container.sink,
            name="embedded",
            engine="SQLite",
            where=f"SQLite in {data_dir}",
            env=env,
            sink_max_batch=SQLITE_MAX_BATCH,
            data_dir=data_dir,
        )
        await asyncio.to_thread(_private_files, data_dir)
        yield deployment
    finally:
        await shutdown(container)


@asynccontextmanager
async def open_aws(
    where: Mapping[str, str],
    *,
    aws: LocalAws | None = None,
    run: str | None = None,
    shards: int = schema.DEFAULT_ORPHAN_SHARDS,
    hint_visibility_s: int = 30,
    with_dlq: bool = True,
    settings: Mapping[str, str] | None = None,
    drop_tables: bool = False,
    sink: str = "dynamodb",
) -> AsyncIterator[LocalDeployment]:
    """`where`: the WSFLEET_* variables that reach the services (`LocalAws.env()`, or an
    emulator's endpoint); `run`: names the tables `<run>-connections` ... and the queue
    `<run>-hints` (the defaults without it); `drop_tables`: delete them at the end (runs that
    share one engine); `sink`: "dynamodb" or "kinesis" (the stream `<run>-messages`, two
    shards). Fake credentials for this process unless some are configured."""
    if sink not in ("dynamodb", "kinesis"):
        raise ValueError(f"sink must be dynamodb or kinesis, got {sink!r}")
    for variable, value in CREDENTIALS.items():
        os.environ.setdefault(variable, value)  # this process's clients read them
    tables = (
        schema.TableNames(
            connections=f"{run}-connections",
            events=f"{run}-events",
            messages=f"{run}-messages",
            sessions=f"{run}-sessions",
        )
        if run
        else schema.TableNames()
    )
    env = {
        **where,
        PREFIX + "BACKEND": "aws",
        PREFIX + "CONNECTIONS_TABLE": tables.connections,
        PREFIX + "EVENTS_TABLE": tables.events,
        PREFIX + "MESSAGES_TABLE": tables.messages,
        PREFIX + "SESSIONS_TABLE": tables.sessions,
        PREFIX + "ORPHAN_SHARDS": str(shards),
        PREFIX + "HINT_VISIBILITY_TIMEOUT_S": str(hint_visibility_s),
    }
    if sink == "kinesis":
        env[PREFIX + "MESSAGE_SINK"] = "kinesis"
        env[PREFIX + "KINESIS_STREAM"] = f"{run or 'wsfleet'}-messages"
    # The tables and the queue first (the queue's URL is a setting of the container below).
    setup = AwsContainer(settings=load_settings({**(settings or {}), **env}, aws=False))
    try:
        await create_tables(await provide(setup.dynamodb), tables, shards)
        env[PREFIX + "QUEUE_URL"] = await create_queue(
            await provide(setup.sqs),
            f"{run or 'wsfleet'}-hints",
            hint_visibility_s,
            with_dlq=with_dlq,
        )
        if sink == "kinesis":
            await create_stream(await provide(setup.kinesis), env[PREFIX + "KINESIS_STREAM"])
    finally:
        await shutdown(setup)
    container = AwsContainer(settings=load_settings({**(settings or {}), **env}, aws=False))
    endpoint = where.get(PREFIX + "AWS_ENDPOINT_URL", "AWS")
    try:
        dynamodb = await provide(container.dynamodb)
        read: Callable[[str], Awaitable[list[StoredMessage]]]
        seqs: Callable[[str], Awaitable[list[int]]]
        if sink == "kinesis":
            # The service's largest GetRecords page: a judge reads every connection's records
            # from the whole stream, once per connection.
            stream = KinesisMessageReader(
                await provide(container.kinesis), env[PREFIX + "KINESIS_STREAM"], page=10_000
            )
            read = stream.messages

            async def seqs(connection_id: str) -> list[int]:
                return [m.seq for m in await stream.copies(connection_id)]

        else:
            read = functools.partial(read_messages, dynamodb, tables.messages)
            seqs = DynamoDbMessageReader(dynamodb, tables.messages).seqs

        yield await _deployment(
            container,
            None,
            name="aws",
            engine=aws.engine if aws else "an AWS emulator",
            where=aws.describe() if aws else f"DynamoDB and SQS at {endpoint}",
            env=env,
            sink_max_batch=KINESIS_MAX_BATCH if sink == "kinesis" else DYNAMODB_MAX_BATCH,
            read=read,
            seqs=seqs,
            rewrites=None,
            aws=aws,
            dynamodb=dynamodb,
            tables=tables,
            queue_url=env[PREFIX + "QUEUE_URL"],
            sink=sink,
        )
    finally:
        if drop_tables:
            await _drop(await provide(container.dynamodb), tables)
            if sink == "kinesis":
                with contextlib.suppress(Exception):
                    kinesis = await provide(container.kinesis)
                    await kinesis.delete_stream(StreamName=env[PREFIX + "KINESIS_STREAM"])
        await shutdown(container)


@asynccontextmanager
async def open_postgres(
    server: LocalPostgres, settings: Mapping[str, str] | None = None, *, prefix: str = "wsfleet"
) -> AsyncIterator[LocalDeployment]:
    """A fresh database on `server`, migrated, dropped afterwards; `settings` as for
    open_embedded."""
    async with AsyncExitStack() as stack:
        url = await stack.enter_async_context(fresh_database(server, prefix))
        deployment = await stack.enter_async_context(open_postgres_at(url, settings))
        deployment.engine = f"PostgreSQL {server.version}"
        deployment.where = f"database {url.rsplit('/', 1)[1]} on {server.describe()}"
        deployment.postgres = server
        yield deployment


@asynccontextmanager
async def open_postgres_at(
    url: str, settings: Mapping[str, str] | None = None
) -> AsyncIterator[LocalDeployment]:
    """The deployment on the database at `url` (a server of the caller's own), migrated first."""
    await migrate_database(url)
    env = {PREFIX + "BACKEND": "postgres", PREFIX + "POSTGRES_URL": url}
    container = PostgresContainer(settings=load_settings({**(settings or {}), **env}))
    try:
        yield await _deployment(
            container,
            container.postgres_messages,
            name="postgres",
            engine="PostgreSQL",
            where="a PostgreSQL database",
            env=env,
            sink_max_batch=POSTGRES_MAX_BATCH,
            postgres_url=url,
            sink="postgres",
        )
    finally:
        await shutdown(container)


# The registry's `devstack` of each backend (entrypoints/backends.py): its services started for
# a run in `run_dir` (their logs under run_dir/logs), and the deployment on them.


@asynccontextmanager
async def start_embedded(
    run_dir: Path, settings: Mapping[str, str] | None = None
) -> AsyncIterator[LocalDeployment]:
    async with open_embedded(run_dir / "data", settings) as deployment:
        yield deployment


@asynccontextmanager
async def start_aws(
    run_dir: Path, settings: Mapping[str, str] | None = None
) -> AsyncIterator[LocalDeployment]:
    async with (
        open_local_aws(run_dir / "logs") as aws,
        open_aws(
            aws.env(),
            aws=aws,
            hint_visibility_s=int((settings or {}).get(PREFIX + "HINT_VISIBILITY_TIMEOUT_S", 30)),
            with_dlq=False,
            settings=settings,
        ) as deployment,
    ):
        yield deployment


@asynccontextmanager
async def start_postgres(
    run_dir: Path, settings: Mapping[str, str] | None = None
) -> AsyncIterator[LocalDeployment]:
    async with (
        open_local_postgres(run_dir / "logs") as server,
        open_postgres(server, settings) as deployment,
    ):
        yield deployment


def start_backend(
    name: str, run_dir: Path, settings: Mapping[str, str] | None = None
) -> contextlib.AbstractAsyncContextManager[LocalDeployment]:
    """The `start_*` of backend `name`, by the registry."""
    start = load(backend_of(name).devstack)
    opened: contextlib.AbstractAsyncContextManager[LocalDeployment] = start(run_dir, settings)
    return opened


async def read_messages(client: Any, table: str, connection_id: str) -> list[StoredMessage]:
    """Every stored message of a connection in seq order (the reader's rule: one per seq)."""
    return await DynamoDbMessageReader(client, table).messages(connection_id)


async def _drop(dynamodb: Any, tables: schema.TableNames) -> None:
    for table in attrs.astuple(tables):
        with contextlib.suppress(Exception):
            await dynamodb.delete_table(TableName=table)
