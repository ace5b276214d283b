"""A real, trusted Lease for tests of the parts that read one (the ingest writer): a
SessionKeeper whose session is opened on the context's store; and a worker context on the
in-memory adapters and virtual time for such tests."""

import random

from adapters.memory.clock import FakeClock
from adapters.memory.metrics import InMemoryMetrics
from adapters.memory.queue import InMemoryNotificationQueue
from adapters.memory.sink import InMemoryMessageSink
from adapters.memory.store import InMemoryConnectionStore
from adapters.memory.upstream import FakeUpstream
from application.config import WorkerConfig
from application.ports import MessageSink
from application.url_policy import UrlPolicy
from application.worker.context import WorkerContext
from application.worker.lease import Lease
from application.worker.session_keeper import SessionKeeper
from tests.support.fleet import NoDns


def worker_context(
    clock: FakeClock,
    metrics: InMemoryMetrics,
    *,
    config: WorkerConfig | None = None,
    sink: MessageSink | None = None,
) -> WorkerContext:
    return WorkerContext(
        worker_id="w1",
        config=WorkerConfig() if config is None else config,
        store=InMemoryConnectionStore(),
        queue=InMemoryNotificationQueue(clock),
        upstream=FakeUpstream(clock),
        sink=InMemoryMessageSink() if sink is None else sink,
        metrics=metrics,
        clock=clock,
        url_policy=UrlPolicy(resolver=NoDns(), allow_private=True),
        rng=random.Random(1),
    )


async def trusted_lease(ctx: WorkerContext, connection_id: str, token: int = 1) -> Lease:
    keeper = SessionKeeper(ctx, lambda: 1)
    await keeper.open()
    return Lease(ctx, keeper, connection_id, token, keeper.session_id, keeper.fenced())
