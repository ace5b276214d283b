"""How the aws backend's clients and store are made (AwsContainer makes them the same way),
and its read side: one DynamoDB client (and a Kinesis one for that sink) on aiobotocore, no
container and no boto3."""

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from aiobotocore.config import AioConfig
from aiobotocore.session import AioSession

from adapters.dynamodb.connection_store import DynamoDbConnectionStore
from adapters.dynamodb.message_reader import DynamoDbMessageReader
from adapters.dynamodb.schema import TableNames
from adapters.kinesis.message_reader import KinesisMessageReader
from application.ports import ConnectionStore, MessageReader
from entrypoints.extensions import no_reader, sink_choice
from entrypoints.settings import Settings

# A read side's pool: a command makes one request at a time.
READ_POOL = 10


def client_config(
    settings: Settings, *, pool: int, read_timeout_s: float, max_attempts: int | None = None
) -> AioConfig:
    """botocore still defaults to the legacy retry mode and to a 10-connection pool (which
    becomes aiohttp's limit, so calls would queue behind each other): both set explicitly.
    `max_attempts`: WSFLEET_AWS_MAX_ATTEMPTS unless given (the heartbeat's client: one). In
    all, the first included, as AWS_MAX_ATTEMPTS means: botocore's `max_attempts` key counts
    only the retries (3 made 4 attempts)."""
    attempts = max_attempts or settings.aws_max_attempts
    return AioConfig(
        retries={"mode": "standard", "total_max_attempts": attempts},
        max_pool_connections=pool,
        connect_timeout=settings.aws_connect_timeout_s,
        read_timeout=read_timeout_s,
        tcp_keepalive=True,
    )


def endpoint_url(settings: Settings, service: str) -> str | None:
    """Where `service` answers: DynamoDB may have an endpoint of its own (DynamoDB Local beside
    a moto server); None is AWS itself."""
    if service == "dynamodb" and settings.dynamodb_endpoint_url:
        return settings.dynamodb_endpoint_url
    return settings.aws_endpoint_url


def client_options(settings: Settings, service: str, config: AioConfig) -> dict[str, Any]:
    """The keyword arguments of a `service` client: region, endpoint, config."""
    return {
        "region_name": settings.region,
        "endpoint_url": endpoint_url(settings, service),
        "config": config,
    }


def table_names(settings: Settings) -> TableNames:
    return TableNames(
        connections=settings.connections_table,
        events=settings.events_table,
        messages=settings.messages_table,
        sessions=settings.sessions_table,
    )


def dynamodb_store(
    client: Any, settings: Settings, heartbeat_client: Any = None
) -> DynamoDbConnectionStore:
    """`heartbeat_client`: a worker's, for its session renewals (entrypoints/containers.py
    `heartbeat_config`)."""
    return DynamoDbConnectionStore(
        client,
        tables=table_names(settings),
        shards=settings.orphan_shards,
        heartbeat_client=heartbeat_client,
    )


class AwsReadSide:
    def __init__(self, settings: Settings, opened: AsyncExitStack) -> None:
        self._settings = settings
        self._opened = opened
        self._session = AioSession()
        self._clients: dict[str, Any] = {}
        self._store: ConnectionStore | None = None

    async def _client(self, service: str) -> Any:
        if service not in self._clients:
            config = client_config(
                self._settings, pool=READ_POOL, read_timeout_s=self._settings.aws_read_timeout_s
            )
            creating = self._session.create_client(
                service, **client_options(self._settings, service, config)
            )
            self._clients[service] = await self._opened.enter_async_context(creating)
        return self._clients[service]

    async def store(self) -> ConnectionStore:
        if self._store is None:
            self._store = dynamodb_store(await self._client("dynamodb"), self._settings)
        return self._store

    async def reader(self) -> MessageReader:
        settings = self._settings
        match sink_choice(settings):
            case "dynamodb":
                return DynamoDbMessageReader(
                    await self._client("dynamodb"), settings.messages_table
                )
            case "kinesis":
                assert settings.kinesis_stream is not None  # required with it (settings/load.py)
                return KinesisMessageReader(await self._client("kinesis"), settings.kinesis_stream)
            case _:
                return no_reader(settings)


@asynccontextmanager
async def read_side(settings: Settings) -> AsyncIterator[AwsReadSide]:
    async with AsyncExitStack() as opened:
        yield AwsReadSide(settings, opened)
