"""The postgres deployment: a fleet on any number of hosts with one PostgreSQL database.

`PostgresContainer` is the sibling of `EmbeddedContainer` (entrypoints/embedded.py) and
`AwsContainer` (entrypoints/containers.py): the same five ports, the same `CoreContainer`.

- one pool per process (WSFLEET_POSTGRES_URL, WSFLEET_POSTGRES_POOL_SIZE), an async Resource
  opened on first use and closed by `await shutdown(container)`. Opening it checks the
  schema's version: a database `wsfleet migrate` has not brought to this wsfleet's version is a
  ConfigurationError naming it (the worker exits 2);
- store, hint queue and sink each over that pool, each with its own "unavailable" error; the
  queue LISTENs on a connection of its own to the same URL (adapters/postgres/queue.py);
- sink: the database's `messages` table (`wsfleet messages` reads it through the read side,
  entrypoints/read_side/postgres.py), or the team's own (WSFLEET_MESSAGE_SINK);
- metrics: a JSON log line per flush, and Prometheus at the health port's `/metrics`, as on
  one host (no CloudWatch outside AWS);
- upstream: the WebSocket connector.
"""

from collections.abc import AsyncIterator

from dependency_injector import containers, providers

from adapters.jsonlog.metrics import JsonLogMetrics
from adapters.postgres.db import Pool, PostgresDatabase, migrate_database
from adapters.postgres.queue import PostgresNotificationQueue
from adapters.system.clock import SystemClock
from application.errors import QueueUnavailable
from application.ports import Clock
from entrypoints.containers import core_of, sink_of, websocket_upstream
from entrypoints.metrics import TeeMetrics, prometheus_metrics
from entrypoints.read_side.postgres import (
    naming_the_url,
    postgres_pool,
    postgres_sink,
    postgres_store,
    postgres_url,
    statement_cache_size,
)
from entrypoints.settings import Settings


async def migrate(settings: Settings) -> tuple[int, int]:
    """`wsfleet migrate` on this backend: (schema version found, version now)."""
    with naming_the_url():
        return await migrate_database(
            postgres_url(settings), statement_cache_size=statement_cache_size(settings)
        )


async def postgres_queue(
    pool: Pool, settings: Settings, clock: Clock
) -> AsyncIterator[PostgresNotificationQueue]:
    queue = PostgresNotificationQueue(
        PostgresDatabase(pool, QueueUnavailable),
        clock,
        listen_url=settings.postgres_listen_url or postgres_url(settings),
        # The visibility timeout has the same meaning as on SQS; 0 is allowed there only.
        visibility_timeout_s=max(1, settings.hint_visibility_timeout_s),
    )
    try:
        yield queue
    finally:
        await queue.close()


class PostgresContainer(containers.DeclarativeContainer):
    """Any number of hosts: PostgreSQL store, queue and sink over one pool per process,
    JSON-log and Prometheus metrics, WebSocket upstreams."""

    settings = providers.Dependency(instance_of=Settings)

    clock = providers.Singleton(SystemClock)
    pool = providers.Resource(postgres_pool, settings)
    # One connection for the session's own commands (PostgresConnectionStore says why).
    sessions_pool = providers.Resource(postgres_pool, settings, 1)
    store = providers.Singleton(postgres_store, pool, sessions_pool)
    queue = providers.Resource(postgres_queue, pool, settings, clock)
    postgres_messages = providers.Singleton(postgres_sink, pool)
    sink = sink_of(settings, sinks={"postgres": postgres_messages})
    # Scraped at the health port's /metrics (entrypoints/worker/health.py).
    prometheus = providers.Singleton(prometheus_metrics, "postgres")
    metrics = providers.Singleton(TeeMetrics, providers.Singleton(JsonLogMetrics), prometheus)
    upstream = websocket_upstream(settings)

    core = core_of(
        settings, store=store, queue=queue, sink=sink, metrics=metrics, upstream=upstream
    )
