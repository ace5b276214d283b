"""Where a benchmarked fleet keeps its state: the embedded default (SQLite files under a data
directory, `wsfleet worker` processes) or the AWS adapters (DynamoDB on DynamoDB Local and SQS
on a moto server, the dev stack's processes; `python -m entrypoints.worker` processes).

Each backend gives the runner what a client of the deployment has: an EventRouter for START and
STOP over the same store and queue the workers use, and readers of the store and the sink for
judging afterwards. Both open inside an AsyncExitStack the runner closes."""

import asyncio
import logging
import shutil
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

from aiobotocore.config import AioConfig
from aiobotocore.session import get_session

from adapters.dynamodb import schema
from adapters.dynamodb.connection_store import DynamoDbConnectionStore
from adapters.dynamodb.items import message_from_item
from adapters.dynamodb.tables import create_tables
from adapters.sqlite.message_sink import SqliteMessageSink
from adapters.sqlite.queue import SqliteNotificationQueue
from adapters.sqlite.store import SqliteConnectionStore
from adapters.sqs.queue import SqsNotificationQueue
from adapters.sqs.queues import create_queue
from adapters.system.clock import SystemClock
from adapters.system.resolver import SystemResolver
from application.ports import ConnectionStore
from application.router import EventRouter
from application.url_policy import UrlPolicy
from entrypoints.devstack.aws import LocalAws, open_local_aws

REGION = "us-east-1"
HINT_VISIBILITY_S = 3
log = logging.getLogger("bench")


class Backend(Protocol):
    name: str
    router: EventRouter

    @property
    def engine(self) -> str:
        """What serves the store (DynamoDB Local, moto, SQLite), for the results."""
        ...

    @property
    def store(self) -> ConnectionStore: ...

    def worker_argv(self) -> list[str]: ...

    def worker_env(self) -> dict[str, str]: ...

    async def stored_seqs(self, connection_id: str) -> list[int]:
        """Every stored row's seq, in order (a duplicate row would appear twice)."""
        ...

    async def rewrites(self) -> Mapping[str, int] | None:
        """Per connection, writes that hit an already-stored seq, if the sink counts them."""
        ...


def _router(store: Any, queue: Any) -> EventRouter:
    policy = UrlPolicy(resolver=SystemResolver(), allow_private=True)  # the upstream is local
    return EventRouter(store, queue, SystemClock(), policy)


class EmbeddedBackend:
    name = "embedded"
    engine = "SQLite"

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.router: EventRouter
        self.store: SqliteConnectionStore
        self._sink: SqliteMessageSink

    @classmethod
    @asynccontextmanager
    async def open(cls, data_dir: Path) -> AsyncIterator["EmbeddedBackend"]:
        await asyncio.to_thread(_fresh_directory, data_dir)
        backend = cls(data_dir)
        async with AsyncExitStack() as stack:
            state = data_dir / "wsfleet.sqlite"
            backend.store = await stack.enter_async_context(SqliteConnectionStore.open(state))
            queue = await stack.enter_async_context(
                SqliteNotificationQueue.open(state, SystemClock())
            )
            backend._sink = await stack.enter_async_context(
                SqliteMessageSink.open(data_dir / "messages.sqlite")
            )
            backend.router = _router(backend.store, queue)
            yield backend

    def worker_argv(self) -> list[str]:
        script = Path(sys.executable).with_name("wsfleet")
        return [str(script), "worker"]

    def worker_env(self) -> dict[str, str]:
        return {"WSFLEET_BACKEND": "embedded", "WSFLEET_DATA_DIR": str(self.data_dir)}

    async def stored_seqs(self, connection_id: str) -> list[int]:
        return await self._sink.seqs(connection_id)

    async def rewrites(self) -> Mapping[str, int] | None:
        return await self._sink.rewrites()


class AwsBackend:
    name = "aws"

    def __init__(self, aws: LocalAws, queue_url: str, dynamodb: Any) -> None:
        self.aws = aws
        self.queue_url = queue_url
        self.dynamodb = dynamodb
        self.tables = schema.TableNames()
        self.store = DynamoDbConnectionStore(dynamodb, tables=self.tables)
        self.router: EventRouter

    @classmethod
    @asynccontextmanager
    async def open(cls, log_dir: Path, name: str = "local-aws") -> AsyncIterator["AwsBackend"]:
        """A fresh local AWS (the dev stack: DynamoDB Local, moto for SQS) with the tables and
        the hint queue. Which engine served DynamoDB goes into the results (`engine`)."""
        async with AsyncExitStack() as stack:
            aws = await stack.enter_async_context(open_local_aws(log_dir / name))
            if aws.fallback:
                log.warning("the AWS benchmarks run on %s", aws.describe())
            dynamodb = await stack.enter_async_context(aws_client("dynamodb", aws.dynamodb_url))
            sqs = await stack.enter_async_context(aws_client("sqs", aws.moto_url))
            await create_tables(dynamodb)
            queue_url = await create_queue(sqs, "wsfleet-hints", HINT_VISIBILITY_S, with_dlq=False)
            backend = cls(aws, queue_url, dynamodb)
            queue = SqsNotificationQueue(sqs, queue_url, visibility_timeout_s=HINT_VISIBILITY_S)
            backend.router = _router(backend.store, queue)
            yield backend

    @property
    def engine(self) -> str:
        return self.aws.engine

    def worker_argv(self) -> list[str]:
        return [sys.executable, "-m", "entrypoints.worker"]

    def worker_env(self) -> dict[str, str]:
        return {
            **self.aws.env(),
            "WSFLEET_QUEUE_URL": self.queue_url,
            "WSFLEET_HINT_VISIBILITY_TIMEOUT_S": str(HINT_VISIBILITY_S),
        }

    async def stored_seqs(self, connection_id: str) -> list[int]:
        seqs: list[int] = []
        start: Any = None
        while True:
            extra = {"ExclusiveStartKey": start} if start else {}
            response = await self.dynamodb.query(
                TableName=self.tables.messages,
                KeyConditionExpression="#pk = :pk",
                ExpressionAttributeNames={"#pk": schema.PK},
                ExpressionAttributeValues={":pk": {"S": schema.connection_key(connection_id)}},
                ConsistentRead=True,
                **extra,
            )
            seqs.extend(message_from_item(item).seq for item in response["Items"])
            start = response.get("LastEvaluatedKey")
            if not start:
                return seqs

    async def rewrites(self) -> Mapping[str, int] | None:
        return None  # a DynamoDB put overwrites silently: the simulator's records tell instead


@asynccontextmanager
async def aws_client(service: str, endpoint: str, pool: int = 50) -> AsyncIterator[Any]:
    config = AioConfig(retries={"mode": "standard", "max_attempts": 3}, max_pool_connections=pool)
    async with get_session().create_client(
        service,
        region_name=REGION,
        endpoint_url=endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=config,
    ) as client:
        yield client


def _fresh_directory(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
