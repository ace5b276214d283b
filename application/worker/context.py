"""What every part of a worker shares: its identity, configuration and ports."""

import random

import attrs

from application.config import WorkerConfig
from application.ports import (
    Clock,
    ConnectionStore,
    MessageSink,
    Metrics,
    NotificationQueue,
    UpstreamConnector,
)
from application.url_policy import UrlPolicy


@attrs.frozen
class WorkerContext:
    worker_id: str
    config: WorkerConfig
    store: ConnectionStore
    queue: NotificationQueue
    upstream: UpstreamConnector
    sink: MessageSink
    metrics: Metrics
    clock: Clock
    url_policy: UrlPolicy
    rng: random.Random = attrs.field(factory=random.Random, eq=False)

    def log_extra(self, connection_id: str, token: int | None = None) -> dict[str, object]:
        extra: dict[str, object] = {"worker_id": self.worker_id, "connection_id": connection_id}
        if token is not None:
            extra["token"] = token
        return extra
