"""The composition roots: which adapters serve which ports, in dependency-injector containers.

`CoreContainer` wires the application (event router, event API, worker) from abstract ports
(store, queue, sink, metrics, upstream). Each deployment is a sibling container that provides
those ports and embeds the core: `AwsContainer` here (DynamoDB, SQS, CloudWatch, WebSockets,
over long-lived aioboto3 clients opened as async Resources), the embedded SQLite one next to
it, and `InMemoryContainer` (the in-memory adapters on one clock, for tests that need a whole
application in one process and on virtual time). No business code reaches into a container:
entrypoints ask it for a Worker or an EventApi and hand those their ports.

The read-only commands do not come here: each backend's read side (entrypoints/read_side/)
opens its store and message reader without a container, with the same functions the
containers call for them.

Providers that depend on an async Resource return awaitables: `await container.core.api()`.
Only what is asked for is opened (the Lambda router never opens CloudWatch or the sink), and
`await container.shutdown_resources()` closes whatever was.
"""

import inspect
from collections.abc import AsyncIterator, Callable
from typing import Any

import aioboto3
from aiobotocore.config import AioConfig
from dependency_injector import containers, providers

from adapters.cloudwatch.metrics import CloudWatchMetrics
from adapters.dynamodb.connection_store import HEARTBEAT_ATTEMPTS
from adapters.dynamodb.message_sink import DynamoDbMessageSink
from adapters.kinesis import KinesisMessageSink
from adapters.memory.metrics import InMemoryMetrics
from adapters.memory.queue import InMemoryNotificationQueue
from adapters.memory.sink import InMemoryMessageSink
from adapters.memory.store import InMemoryConnectionStore
from adapters.memory.upstream import FakeUpstream
from adapters.sqs import SqsNotificationQueue
from adapters.system.clock import SystemClock
from adapters.system.resolver import SystemResolver
from adapters.websocket import WebSocketConnector, WebSocketOptions
from application.deaths import WorkerDeaths
from application.errors import ConfigurationError
from application.ports import (
    Clock,
    ConnectionStore,
    MessageSink,
    Metrics,
    NotificationQueue,
    UpstreamConnector,
)
from application.ports.metrics import SINK_RETRIES
from application.router import EventRouter
from application.url_policy import UrlPolicy
from application.worker.session_keeper import MAX_RENEWS_IN_FLIGHT
from application.worker.worker import Worker
from entrypoints.api import EventApi
from entrypoints.extensions import sink_choice, user_hook, user_sink
from entrypoints.metrics import TeeMetrics, prometheus_metrics
from entrypoints.read_side.aws import client_config, client_options, dynamodb_store
from entrypoints.settings import Settings


async def provide(provider: Any, **kwargs: Any) -> Any:
    """Call a provider from inside the running loop and await it if it is asynchronous (it is
    whenever an async Resource is among its dependencies)."""
    value = provider(**kwargs)
    return await value if inspect.isawaitable(value) else value


async def shutdown(container: containers.Container) -> None:
    """Close every Resource the container opened (clients, a user's sink)."""
    result = container.shutdown_resources()
    if inspect.isawaitable(result):
        await result


# WebSocket frames when WSFLEET_UPSTREAM_MAX_MESSAGE_BYTES is unset (websockets' default); the
# worker still refuses any message larger than the sink stores.
DEFAULT_FRAME_BYTES = 2**20

# Connections beyond the worker's own sessions: reconciliation, hints, the sink's batches.
_POOL_HEADROOM = 16


def new_worker(*, settings: Settings, sink: MessageSink, **ports: Any) -> Worker:
    """The worker, once the settings are known to fit the sink: an upstream message limit
    above what the sink stores would let through messages it must then refuse."""
    limit = settings.upstream_max_message_bytes
    if limit is not None and limit > sink.max_message_bytes:
        raise ConfigurationError(
            f"WSFLEET_UPSTREAM_MAX_MESSAGE_BYTES={limit}: the message sink stores at most "
            f"{sink.max_message_bytes} bytes per message; set it no higher, or leave it unset"
        )
    return Worker(sink=sink, **ports)


class CoreContainer(containers.DeclarativeContainer):
    """The application from abstract ports; a deployment container provides the ports."""

    settings = providers.Dependency(instance_of=Settings)
    store: providers.Dependency[ConnectionStore] = providers.Dependency()
    queue: providers.Dependency[NotificationQueue] = providers.Dependency()
    sink: providers.Dependency[MessageSink] = providers.Dependency()
    metrics: providers.Dependency[Metrics] = providers.Dependency()
    upstream: providers.Dependency[UpstreamConnector] = providers.Dependency()

    clock: providers.Provider[Clock] = providers.Singleton(SystemClock)
    resolver: providers.Provider[Any] = providers.Singleton(SystemResolver)
    url_policy = providers.Singleton(
        UrlPolicy,
        resolver=resolver,
        allowed_hosts=settings.provided.allowed_upstream_hosts,
        allow_private=settings.provided.allow_private_upstreams,
    )
    router = providers.Singleton(
        EventRouter, store=store, queue=queue, clock=clock, url_policy=url_policy
    )
    api = providers.Singleton(EventApi, router=router, clock=clock)
    deaths = providers.Singleton(WorkerDeaths, store=store, queue=queue, clock=clock)
    # A Factory: the worker id is given per process incarnation, `core.worker(worker_id=...)`.
    worker = providers.Factory(
        new_worker,
        settings=settings,
        config=settings.provided.worker,
        store=store,
        queue=queue,
        upstream=upstream,
        sink=sink,
        metrics=metrics,
        clock=clock,
        url_policy=url_policy,
    )


async def aws_client(
    session: aioboto3.Session, service: str, settings: Settings, config: AioConfig
) -> AsyncIterator[Any]:
    """One long-lived client per service per process: a Resource, opened once and closed at
    shutdown. Clients are bound to the event loop that opened them. Only low-level clients:
    the resource layer has no transactions and is frozen upstream."""
    async with session.client(service, **client_options(settings, service, config)) as client:
        yield client


def websocket_options(settings: Settings) -> WebSocketOptions:
    return WebSocketOptions(
        resume_param=settings.upstream_resume_param,
        seq_field=settings.upstream_seq_field,
        data_field=settings.upstream_data_field,
        open_timeout=settings.upstream_open_timeout_s,
        ping_interval=settings.upstream_ping_interval_s,
        ping_timeout=settings.upstream_ping_timeout_s,
        max_size=settings.upstream_max_message_bytes or DEFAULT_FRAME_BYTES,
        ca_file=settings.upstream_ca_file,
        tls_read_buffer=settings.upstream_tls_read_buffer_bytes,
    )


def websocket_upstream(
    settings: "providers.Provider[Settings]",
) -> "providers.Singleton[WebSocketConnector]":
    """The upstream connector every process wires: the settings' options, the user's hook."""
    return providers.Singleton(
        WebSocketConnector,
        options=providers.Callable(websocket_options, settings),
        hook=providers.Callable(user_hook, settings),
    )


def core_of(
    settings: "providers.Provider[Settings]", **ports: "providers.Provider[Any]"
) -> "providers.Container[CoreContainer]":
    """The application (worker, router, API) on a backend's ports: `store`, `queue`, `sink`,
    `metrics`, `upstream`, and optionally `clock` and `resolver`."""
    container: providers.Container[CoreContainer] = providers.Container(
        CoreContainer,
        settings=settings,
        **ports,  # type: ignore[arg-type]
    )
    return container


def sink_of(
    settings: "providers.Provider[Settings]", sinks: dict[str, "providers.Provider[Any]"]
) -> "providers.Selector[Any]":
    """A backend's `sink`, chosen by `sink_choice`: one of its built-in `sinks` by name, or the
    team's own (WSFLEET_MESSAGE_SINK). What reads it back is the backend's read side
    (entrypoints/read_side/), not a container."""
    return providers.Selector(
        providers.Callable(sink_choice, settings),
        **sinks,
        custom=providers.Resource(user_sink, settings),
    )


def _pool_size(settings: Settings) -> int:
    return max(10, settings.worker.max_connections + _POOL_HEADROOM)


def _retention_s(settings: Settings) -> int | None:
    days = settings.message_retention_days
    return None if days is None else days * 86_400


def heartbeat_config(settings: Settings) -> AioConfig:
    """The client a worker renews its session through: one attempt per call, the session
    keeper's retries instead of botocore's (adapters/dynamodb DynamoDbConnectionStore); a read
    timeout no longer than the trust a renewal can give, past which its answer is of no use."""
    return client_config(
        settings,
        pool=MAX_RENEWS_IN_FLIGHT,  # the renewals a keeper has in flight at most
        read_timeout_s=min(settings.aws_read_timeout_s, settings.worker.trusted_s),
        max_attempts=HEARTBEAT_ATTEMPTS,
    )


def _counter(metrics: Metrics, name: str) -> Callable[[int], None]:
    """A callback that counts into `metrics` (for adapters that take no metrics port)."""
    return lambda value: metrics.count(name, value)


class AwsContainer(containers.DeclarativeContainer):
    """The AWS deployment: DynamoDB store and messages table, SQS hints, CloudWatch metrics,
    WebSocket upstreams."""

    settings = providers.Dependency(instance_of=Settings)

    session = providers.Singleton(aioboto3.Session)
    dynamodb_config = providers.Singleton(
        lambda s: client_config(s, pool=_pool_size(s), read_timeout_s=s.aws_read_timeout_s),
        settings,
    )
    # Long polls hold a request open for poll_wait_s: the read timeout must outlast them.
    sqs_config = providers.Singleton(
        lambda s: client_config(
            s, pool=10, read_timeout_s=s.worker.poll_wait_s + s.aws_read_timeout_s
        ),
        settings,
    )
    cloudwatch_config = providers.Singleton(
        lambda s: client_config(s, pool=2, read_timeout_s=s.aws_read_timeout_s), settings
    )
    dynamodb = providers.Resource(aws_client, session, "dynamodb", settings, dynamodb_config)
    dynamodb_heartbeat = providers.Resource(
        aws_client,
        session,
        "dynamodb",
        settings,
        providers.Singleton(heartbeat_config, settings),
    )
    sqs = providers.Resource(aws_client, session, "sqs", settings, sqs_config)
    cloudwatch = providers.Resource(aws_client, session, "cloudwatch", settings, cloudwatch_config)

    store = providers.Singleton(dynamodb_store, dynamodb, settings, dynamodb_heartbeat)
    queue = providers.Singleton(
        SqsNotificationQueue,
        sqs,
        settings.provided.queue_url,
        visibility_timeout_s=settings.provided.hint_visibility_timeout_s,
    )
    cloudwatch_metrics = providers.Singleton(
        CloudWatchMetrics,
        cloudwatch,
        namespace=settings.provided.metrics_namespace,
        service_name=settings.provided.service_name,
    )
    # Scraped at the health port's /metrics (entrypoints/worker/health.py).
    prometheus = providers.Singleton(prometheus_metrics, "aws")
    metrics = providers.Singleton(TeeMetrics, cloudwatch_metrics, prometheus)
    # Opened only when the Kinesis sink is chosen (a Resource starts when first provided).
    kinesis_config = providers.Singleton(
        lambda s: client_config(s, pool=10, read_timeout_s=s.aws_read_timeout_s), settings
    )
    kinesis = providers.Resource(aws_client, session, "kinesis", settings, kinesis_config)
    sink = sink_of(
        settings,
        sinks={
            "dynamodb": providers.Singleton(
                DynamoDbMessageSink,
                dynamodb,
                settings.provided.messages_table,
                retention_s=providers.Callable(_retention_s, settings),
                on_retry=providers.Callable(_counter, metrics, SINK_RETRIES),
            ),
            "kinesis": providers.Singleton(
                KinesisMessageSink,
                kinesis,
                settings.provided.kinesis_stream,
                on_retry=providers.Callable(_counter, metrics, SINK_RETRIES),
            ),
        },
    )
    upstream = websocket_upstream(settings)

    core = core_of(
        settings, store=store, queue=queue, sink=sink, metrics=metrics, upstream=upstream
    )


class InMemoryContainer(containers.DeclarativeContainer):
    """The application on the in-memory adapters: one store, queue and sink in this process, a
    fake upstream, all on `clock` (a FakeClock makes time virtual). `resolver` answers the URL
    policy's lookups (tests give one that never touches real DNS). A worker per call of
    `core.worker(worker_id=...)`; a test may hand one worker its own ports (a fault-injecting
    wrapper, a skewed clock) as keyword arguments of that call."""

    settings = providers.Dependency(instance_of=Settings)
    clock: providers.Dependency[Clock] = providers.Dependency()
    resolver: providers.Dependency[Any] = providers.Dependency()
    upstream_rate_per_s = providers.Object(10.0)

    store = providers.Singleton(InMemoryConnectionStore)
    queue = providers.Singleton(
        InMemoryNotificationQueue,
        clock,
        visibility_timeout_s=settings.provided.hint_visibility_timeout_s,
    )
    sink = providers.Singleton(InMemoryMessageSink)
    metrics = providers.Factory(InMemoryMetrics)  # one per worker: tests read each one's
    upstream = providers.Singleton(FakeUpstream, clock, upstream_rate_per_s)

    core = core_of(
        settings,
        store=store,
        queue=queue,
        sink=sink,
        metrics=metrics,
        upstream=upstream,
        clock=clock,
        resolver=resolver,
    )
