"""The demo's backend: the environment its processes get, and a probe to watch and judge.

Embedded: a fresh data directory (a temporary one unless --data-dir). AWS: the dev stack's
local AWS (entrypoints/devstack: DynamoDB Local for DynamoDB, moto for SQS; moto alone, and
saying so, where java or DynamoDB Local is missing) or the emulator at --endpoint-url, with
tables and a hint queue named for this run, created by the adapters' own helpers
(adapters/dynamodb/tables.py, adapters/sqs/queues.py). The probe reads through the same adapters
the workers use: the store for owners and checkpoints, the messages for the judge.
"""

import os
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import attrs

from adapters.dynamodb.message_reader import DynamoDbMessageReader
from adapters.dynamodb.schema import TableNames
from adapters.dynamodb.tables import create_tables
from adapters.sqlite.message_sink import SqliteMessageSink
from adapters.sqs import create_queue
from application.ports import ConnectionStore
from entrypoints.cli.backend import ensure_data_dir, open_backend
from entrypoints.containers import provide
from entrypoints.demo.options import DemoOptions
from entrypoints.demo.processes import Children
from entrypoints.devstack.aws import open_local_aws
from entrypoints.devstack.service import CREDENTIALS
from entrypoints.embedded import messages_path
from entrypoints.settings import PREFIX, load_settings

DEMO_REGION = "us-east-1"
ORPHAN_SHARDS = 2  # a handful of connections: fewer index partitions, fewer queries


@attrs.frozen
class Probe:
    backend: str
    store: ConnectionStore
    seqs: Callable[[str], Awaitable[list[int]]]  # stored seqs of a connection
    rewrites: Callable[[], Awaitable[dict[str, int]]] | None  # where the sink counts them
    where: str  # where the state lives, for the summary


@asynccontextmanager
async def prepare(
    options: DemoOptions, children: Children, run_dir: Path, env: dict[str, str]
) -> AsyncIterator[Probe]:
    """Adds the backend's variables to `env` (the processes' environment) and yields a probe."""
    if options.backend == "aws":
        async with _aws(options, children, run_dir, env) as probe:
            yield probe
    else:
        async with _embedded(options, run_dir, env) as probe:
            yield probe


@asynccontextmanager
async def _embedded(
    options: DemoOptions, run_dir: Path, env: dict[str, str]
) -> AsyncIterator[Probe]:
    data_dir = Path(options.data_dir) if options.data_dir else run_dir / "data"
    ensure_data_dir(data_dir, create=True)
    env[PREFIX + "BACKEND"] = "embedded"
    env[PREFIX + "DATA_DIR"] = str(data_dir)
    settings = load_settings(env)
    async with open_backend(settings) as container:
        store = await provide(container.store)
        async with SqliteMessageSink.open(messages_path(settings)) as sink:
            yield Probe("embedded", store, sink.seqs, sink.rewrites, f"SQLite in {data_dir}")


@asynccontextmanager
async def _aws(
    options: DemoOptions, children: Children, run_dir: Path, env: dict[str, str]
) -> AsyncIterator[Probe]:
    async with AsyncExitStack() as stack:
        if options.endpoint_url is None:
            aws = await stack.enter_async_context(open_local_aws(run_dir / "logs"))
            # Children first (they release their leases), then DynamoDB Local and moto.
            stack.push_async_callback(children.close)
            where = aws.describe()
            env.update(aws.env())
        else:
            where = f"DynamoDB and SQS at {options.endpoint_url}"
            env[PREFIX + "AWS_ENDPOINT_URL"] = options.endpoint_url
        for name, value in CREDENTIALS.items():
            env.setdefault(name, value)
            os.environ.setdefault(name, value)  # this process's clients read them too
        run = f"wsfleet-demo-{secrets.token_hex(3)}"
        names = TableNames(
            connections=f"{run}-connections",
            events=f"{run}-events",
            messages=f"{run}-messages",
            sessions=f"{run}-sessions",
        )
        env.update(
            {
                PREFIX + "BACKEND": "aws",
                PREFIX + "REGION": env.get(PREFIX + "REGION") or DEMO_REGION,
                PREFIX + "CONNECTIONS_TABLE": names.connections,
                PREFIX + "EVENTS_TABLE": names.events,
                PREFIX + "MESSAGES_TABLE": names.messages,
                PREFIX + "SESSIONS_TABLE": names.sessions,
                PREFIX + "ORPHAN_SHARDS": str(ORPHAN_SHARDS),
            }
        )
        settings = load_settings(env, aws=False)
        async with open_backend(settings) as container:
            dynamodb = await provide(container.dynamodb)
            await create_tables(dynamodb, names, ORPHAN_SHARDS)
            sqs = await provide(container.sqs)
            queue_url = await create_queue(
                sqs, f"{run}-hints", settings.hint_visibility_timeout_s, with_dlq=False
            )
            env[PREFIX + "QUEUE_URL"] = queue_url
            store = await provide(container.store)
            reader = DynamoDbMessageReader(dynamodb, names.messages)
            yield Probe("aws", store, reader.seqs, None, f"{where} (tables {run}-*)")
