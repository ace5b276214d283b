"""Store operations and DynamoDB units per connection-hour, counted at the adapter boundary.

Three Workers run in this process on the AWS adapters (DynamoDB and SQS on a moto server
process), each with its own store whose client is wrapped by `MeteringClient`; the simulator
sends 1 message/s per connection. After every connection streams, the counters are zeroed and
the fleet runs steadily for a window at 1/10 of the default timings: every periodic activity
(heartbeat, desired-state check, reconciliation, long poll) then happens 10x as often as at the
defaults, so one second here is ten at the defaults. Messages are not scaled (real 1/s): the
sink's cost is reported per message.

The timings are scaled by 0.25 (lease 5 s, heartbeat 1.25 s), not 0.1: at 0.1 moto (one
DynamoDB request at a time, several ms each) fell behind ~110 requests/s from 30 connections,
renewals missed the 1.4 s trust window and leases churned, which is moto's limit, not a cost.
The run reports self-fences and acquisitions in the window so that a churning run shows."""

import asyncio
from collections import Counter
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from adapters.dynamodb.connection_store import DynamoDbConnectionStore
from adapters.dynamodb.message_sink import DynamoDbMessageSink
from adapters.memory.metrics import InMemoryMetrics
from adapters.sqs.queue import SqsNotificationQueue
from adapters.websocket import WebSocketConnector
from application.config import WorkerConfig
from application.worker.worker import Worker
from bench.backends import HINT_VISIBILITY_S, Backend, open_aws_backend
from bench.units import Meter, MeteringClient
from bench.upstream import SimulatorProcess, simulator
from entrypoints.containers import CoreContainer
from entrypoints.devstack import records
from entrypoints.devstack.aws import client as aws_client
from entrypoints.devstack.workers import worker_timings
from entrypoints.settings import load_settings

SCALE = 0.25
SETTINGS = load_settings(
    {
        **worker_timings(WorkerConfig().scaled(SCALE)),
        "WSFLEET_ALLOW_PRIVATE_UPSTREAMS": "true",  # the simulator is on 127.0.0.1
    }
)
DOCS_WRU, DOCS_RRU = 0, 0  # docs/deploy.md, per connection-hour in steady state (sessions)


class CountingClient:
    """Counts the API calls of a wrapped aiobotocore client (the SQS bill)."""

    def __init__(self, inner: Any, calls: Counter[str]) -> None:
        self._inner, self._calls = inner, calls

    def __getattr__(self, api: str) -> Any:
        real = getattr(self._inner, api)

        async def call(**kwargs: Any) -> Any:
            self._calls[api] += 1
            return await real(**kwargs)

        return call if callable(real) else real


def _per(values: dict[str, float], hours: float) -> dict[str, float]:
    return {k: round(v / hours, 1) for k, v in sorted(values.items())}


class MeteredFleet:
    """Workers on metered adapters; the counters are zeroed with `reset` and read with `take`."""

    def __init__(self, backend: Backend, sqs: Any, workers: int) -> None:
        self.store_meter, self.sink_meter = Meter(backend.tables), Meter(backend.tables)
        self.sqs_calls = Counter[str]()
        self.stores: list[DynamoDbConnectionStore] = []
        self.sinks: list[DynamoDbMessageSink] = []
        self.members: list[tuple[Worker, asyncio.Task[None]]] = []
        self.metrics: list[InMemoryMetrics] = []
        tables = backend.tables
        assert tables is not None  # an AWS deployment
        for n in range(workers):
            store_client: Any = MeteringClient(backend.dynamodb, self.store_meter)
            sink_client: Any = MeteringClient(backend.dynamodb, self.sink_meter)
            store = DynamoDbConnectionStore(store_client, tables=tables)
            sink = DynamoDbMessageSink(sink_client, tables.messages)
            metrics = InMemoryMetrics()
            self.metrics.append(metrics)
            counted: Any = CountingClient(sqs, self.sqs_calls)  # duck-typed SQSClient
            queue = SqsNotificationQueue(
                counted,
                backend.queue_url,
                visibility_timeout_s=HINT_VISIBILITY_S,
            )
            # The production wiring (entrypoints/containers.py) on metered ports.
            core = CoreContainer(
                settings=SETTINGS,
                store=store,
                queue=queue,
                sink=sink,
                metrics=metrics,
                upstream=WebSocketConnector(),
            )
            worker: Worker = core.worker(worker_id=f"cost-w{n}")
            self.stores.append(store)
            self.sinks.append(sink)
            self.members.append((worker, asyncio.create_task(worker.run())))

    def reset(self) -> None:
        for meter in (self.store_meter, self.sink_meter):
            meter.requests.clear()
            meter.rcu.clear()
            meter.wcu.clear()
        self.sqs_calls.clear()
        for store in self.stores:
            store.operations.clear()
        for sink in self.sinks:
            sink.operations.clear()
        for metrics in self.metrics:
            metrics.counters.clear()

    def take(self) -> dict[str, dict[str, Any]]:
        operations: Counter[str] = Counter()
        sink_operations: Counter[str] = Counter()
        for store in self.stores:
            operations.update(store.operations)
        for sink in self.sinks:
            sink_operations.update(sink.operations)
        events: Counter[str] = Counter()
        for metrics in self.metrics:
            events.update({k: int(v) for k, v in metrics.counters.items()})
        return {
            "worker_metrics": dict(events),
            "operations": dict(operations),
            "requests": dict(self.store_meter.requests),
            "rcu": dict(self.store_meter.rcu),
            "wcu": dict(self.store_meter.wcu),
            "sqs": dict(self.sqs_calls),
            "sink_operations": dict(sink_operations),
            "sink_wcu": dict(self.sink_meter.wcu),
        }

    async def close(self) -> None:
        for worker, _ in self.members:
            worker.request_shutdown()
        await asyncio.gather(*(task for _, task in self.members), return_exceptions=True)


async def _all_streaming(sim: SimulatorProcess, ids: list[str], timeout_s: float = 30.0) -> None:
    async with asyncio.timeout(timeout_s):
        while True:
            streams = await sim.records()
            if all(records.live_count(streams.get(c)) == 1 for c in ids):
                return
            await asyncio.sleep(0.1)


async def run_cost(
    log_dir: Path, *, connections: int = 30, workers: int = 3, window_s: float = 120.0
) -> dict[str, Any]:
    async with AsyncExitStack() as stack:
        sim = await simulator(log_dir, rate=1.0, name="cost-simulator").start()
        stack.push_async_callback(sim.stop)
        backend = await stack.enter_async_context(open_aws_backend(log_dir, name="cost-aws"))
        assert backend.aws is not None
        sqs = await stack.enter_async_context(aws_client("sqs", backend.aws.moto_url))
        fleet = MeteredFleet(backend, sqs, workers)
        stack.push_async_callback(fleet.close)
        ids = [f"cost-c{i:03d}" for i in range(connections)]
        for cid in ids:
            await backend.router.start(cid, sim.url(cid))
        await _all_streaming(sim, ids)
        await asyncio.sleep(3.0)
        fleet.reset()
        await asyncio.sleep(window_s)
        taken = fleet.take()
        largest = fleet.store_meter.largest_item
    hours = connections * window_s / 3600 / SCALE  # connection-hours at the default timings
    worker_hours = workers * window_s / 3600 / SCALE
    messages = taken["sink_operations"].get("messages", 0)
    rcu, wcu = taken["rcu"], taken["wcu"]
    return {
        "connections": connections,
        "workers": workers,
        "window_s": window_s,
        "timing_scale": SCALE,
        "connection_hours_at_defaults": round(hours, 3),
        "worker_metrics_in_window": taken["worker_metrics"],
        "operations_per_connection_hour": _per(taken["operations"], hours),
        "requests_per_connection_hour": _per(taken["requests"], hours),
        "rcu_per_connection_hour": _per(rcu, hours),
        "wcu_per_connection_hour": _per(wcu, hours),
        "total_rcu_per_connection_hour": round(sum(rcu.values()) / hours, 1),
        "total_wcu_per_connection_hour": round(sum(wcu.values()) / hours, 1),
        "index_query_rcu_per_worker_hour": round(
            sum(v for k, v in rcu.items() if k.startswith("query") and "index" in k) / worker_hours,
            1,
        ),
        "sqs_requests_per_worker_hour": _per(taken["sqs"], worker_hours),
        "sink_operations": taken["sink_operations"],
        "sink_wcu_per_message": round(sum(taken["sink_wcu"].values()) / max(1, messages), 3),
        "largest_connection_item_bytes": largest,
        "docs_deploy_md": {"wru": DOCS_WRU, "rru": DOCS_RRU},
    }
