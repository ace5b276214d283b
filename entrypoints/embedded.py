"""The embedded deployment: everything on one host, nothing to install or pay for.

`EmbeddedContainer` is the sibling of `AwsContainer` (entrypoints/containers.py): it provides
the same five ports and embeds the same `CoreContainer`, so the router, the event API and the
worker are exactly the ones that run on AWS. Here the ports are:

- store and queue: SQLite, `<WSFLEET_DATA_DIR>/wsfleet.sqlite` (connections, the ownership
  log and the hint queue; WAL mode, shared by every process of the host);
- sink: SQLite, `<WSFLEET_DATA_DIR>/messages.sqlite` (a file of its own, so the bulk of the
  writes never delays a lease renewal), or the team's own sink (WSFLEET_MESSAGE_SINK); the
  files, how they are opened and the read side of `wsfleet messages` and `status` are in
  entrypoints/read_side/embedded.py;
- metrics: one JSON log line per flush (adapters/jsonlog), and Prometheus at the health
  port's `/metrics` (adapters/prometheus);
- upstream: the WebSocket connector.

The data directory must exist when the adapters open (the CLI creates it for commands that
write: see entrypoints/cli/backend.py). Each SQLite adapter is an async Resource: opened on
first use, closed by `await shutdown(container)`.
"""

from collections.abc import AsyncIterator

from dependency_injector import containers, providers

from adapters.jsonlog.metrics import JsonLogMetrics
from adapters.sqlite.queue import SqliteNotificationQueue
from adapters.system.clock import SystemClock
from application.ports import Clock
from entrypoints.containers import core_of, sink_of, websocket_upstream
from entrypoints.metrics import TeeMetrics, prometheus_metrics
from entrypoints.read_side.embedded import sqlite_sink, sqlite_store, state_path
from entrypoints.settings import Settings


async def sqlite_queue(settings: Settings, clock: Clock) -> AsyncIterator[SqliteNotificationQueue]:
    async with SqliteNotificationQueue.open(
        state_path(settings),
        clock,
        # The visibility timeout has the same meaning as on SQS; 0 is allowed there only.
        visibility_timeout_s=max(1, settings.hint_visibility_timeout_s),
    ) as queue:
        yield queue


class EmbeddedContainer(containers.DeclarativeContainer):
    """One host: SQLite store, queue and sink under the data directory, JSON-log metrics,
    WebSocket upstreams."""

    settings = providers.Dependency(instance_of=Settings)

    clock = providers.Singleton(SystemClock)
    store = providers.Resource(sqlite_store, settings)
    queue = providers.Resource(sqlite_queue, settings, clock)
    sqlite_messages = providers.Resource(sqlite_sink, settings)
    sink = sink_of(settings, sinks={"sqlite": sqlite_messages})
    # Scraped at the health port's /metrics (entrypoints/worker/health.py).
    prometheus = providers.Singleton(prometheus_metrics, "embedded")
    metrics = providers.Singleton(TeeMetrics, providers.Singleton(JsonLogMetrics), prometheus)
    upstream = websocket_upstream(settings)

    core = core_of(
        settings, store=store, queue=queue, sink=sink, metrics=metrics, upstream=upstream
    )
