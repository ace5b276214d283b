"""The postgres deployment: a fleet on any number of hosts with one PostgreSQL database.

`PostgresContainer` is the sibling of `EmbeddedContainer` (entrypoints/embedded.py) and
`AwsContainer` (entrypoints/containers.py): the same five ports, the same `CoreContainer`.

- one pool per process (WSFLEET_POSTGRES_URL, WSFLEET_POSTGRES_POOL_SIZE), an async Resource
  opened on first use and closed by `await shutdown(container)`. Opening it checks the
  schema's version: a database `wsfleet migrate` has not brought to this wsfleet's version is a
  ConfigurationError naming it (the worker exits 2);
- store, hint queue and sink each over that pool, each with its own "unavailable" error; the
  queue LISTENs on a connection of its own to the same URL (adapters/postgres/queue.py);
- sink: the database's `messages` table (also the reader of `wsfleet messages`), or the
  team's own (WSFLEET_MESSAGE_SINK);
- metrics: a JSON log line per flush, and Prometheus at the health port's `/metrics`, as on
  one host (no CloudWatch outside AWS);
- upstream: the WebSocket connector.
"""

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

from dependency_injector import containers, providers

from adapters.jsonlog.metrics import JsonLogMetrics
from adapters.postgres.db import Pool, PostgresDatabase, migrate_database, open_pool
from adapters.postgres.message_sink import PostgresMessageSink
from adapters.postgres.queue import PostgresNotificationQueue
from adapters.postgres.store import PostgresConnectionStore
from adapters.system.clock import SystemClock
from application.errors import (
    ConfigurationError,
    QueueUnavailable,
    SinkUnavailable,
    StoreUnavailable,
)
from application.ports import Clock
from entrypoints.containers import core_of, sink_and_reader, websocket_upstream
from entrypoints.metrics import TeeMetrics, prometheus_metrics
from entrypoints.settings import Settings

# asyncpg's default: statements prepared once per database connection and kept.
STATEMENT_CACHE_SIZE = 100
URL_VARIABLE = "WSFLEET_POSTGRES_URL"


def postgres_url(settings: Settings) -> str:
    assert settings.postgres_url is not None  # required with this backend (settings/load.py)
    return settings.postgres_url


def statement_cache_size(settings: Settings) -> int:
    return STATEMENT_CACHE_SIZE if settings.postgres_prepared_statements else 0


@contextmanager
def _naming_the_url() -> Iterator[None]:
    """The adapters' configuration errors (a URL the driver cannot parse, a refused login, a
    schema to migrate) say what is wrong but not where it was set: name the variable."""
    try:
        yield
    except ConfigurationError as exc:
        raise ConfigurationError(f"{URL_VARIABLE}=(hidden): {exc}") from exc


async def migrate(settings: Settings) -> tuple[int, int]:
    """`wsfleet migrate` on this backend: (schema version found, version now)."""
    with _naming_the_url():
        return await migrate_database(
            postgres_url(settings), statement_cache_size=statement_cache_size(settings)
        )


async def postgres_pool(settings: Settings) -> AsyncIterator[Pool]:
    with _naming_the_url():
        pool = await open_pool(
            postgres_url(settings),
            size=settings.postgres_pool_size,
            statement_cache_size=statement_cache_size(settings),
            unavailable=StoreUnavailable,
        )
    try:
        yield pool
    finally:
        await pool.close()


async def session_pool(settings: Settings) -> AsyncIterator[Pool]:
    """One connection for the worker session's own commands (PostgresConnectionStore says
    why): a renewal never queues behind the process's takes and sink writes."""
    with _naming_the_url():
        pool = await open_pool(
            postgres_url(settings),
            size=1,
            statement_cache_size=statement_cache_size(settings),
            unavailable=StoreUnavailable,
        )
    try:
        yield pool
    finally:
        await pool.close()


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


def postgres_store(pool: Pool, sessions: "Pool | None" = None) -> PostgresConnectionStore:
    """`sessions`: the session's own pool (`session_pool`); without it, `pool` serves all."""
    lane = None if sessions is None else PostgresDatabase(sessions, StoreUnavailable)
    return PostgresConnectionStore(PostgresDatabase(pool, StoreUnavailable), lane)


def postgres_sink(pool: Pool) -> PostgresMessageSink:
    return PostgresMessageSink(PostgresDatabase(pool, SinkUnavailable))


class PostgresContainer(containers.DeclarativeContainer):
    """Any number of hosts: PostgreSQL store, queue and sink over one pool per process,
    JSON-log and Prometheus metrics, WebSocket upstreams."""

    settings = providers.Dependency(instance_of=Settings)

    clock = providers.Singleton(SystemClock)
    pool = providers.Resource(postgres_pool, settings)
    sessions_pool = providers.Resource(session_pool, settings)
    store = providers.Singleton(postgres_store, pool, sessions_pool)
    queue = providers.Resource(postgres_queue, pool, settings, clock)
    postgres_messages = providers.Singleton(postgres_sink, pool)
    sink, reader = sink_and_reader(settings, sinks={"postgres": postgres_messages})
    # Scraped at the health port's /metrics (entrypoints/worker/health.py).
    prometheus = providers.Singleton(prometheus_metrics, "postgres")
    metrics = providers.Singleton(TeeMetrics, providers.Singleton(JsonLogMetrics), prometheus)
    upstream = websocket_upstream(settings)

    core = core_of(
        settings, store=store, queue=queue, sink=sink, metrics=metrics, upstream=upstream
    )
