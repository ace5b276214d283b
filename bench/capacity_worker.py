"""`python -m bench.capacity_worker`: ONE worker process for capacity and ingest runs.

It is the real `Worker` (sessions, lease keeper, ingest buffer, the loops) with the real
WebSocket connector, composed here with a store, queue and sink local to the process — the
in-memory store and queue, SQLite, DynamoDB on a local endpoint or PostgreSQL at a URL (store
and sink on one pool, as a postgres worker has); a sink that discards or one of those — each
wrapped in `TimingSink`. The same process issues the STARTs through the event
router, ramps to each step, and prints one JSON line per measured step on stdout: RSS, CPU,
open files, event-loop lag, messages stored and their store latency.
"""

import argparse
import asyncio
import gc
import json
import logging
import os
import sys
import time
import tracemalloc
from collections import Counter
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from adapters.dynamodb.connection_store import DynamoDbConnectionStore
from adapters.dynamodb.message_sink import DynamoDbMessageSink
from adapters.dynamodb.schema import TableNames
from adapters.dynamodb.tables import create_tables
from adapters.memory.metrics import InMemoryMetrics
from adapters.memory.queue import InMemoryNotificationQueue
from adapters.memory.store import InMemoryConnectionStore
from adapters.postgres.db import open_pool
from adapters.postgres.defaults import DEFAULT_POOL_SIZE
from adapters.postgres.store import PostgresConnectionStore
from adapters.sqlite.message_sink import SqliteMessageSink
from adapters.sqlite.store import SqliteConnectionStore
from adapters.system.clock import SystemClock
from adapters.websocket import WebSocketConnector, WebSocketOptions
from application.ports import ConnectionStore, MessageSink
from application.router import EventRouter
from application.worker.worker import Worker
from bench.limits import LoopLag, open_files, raise_open_files, self_rss_kib
from bench.procs import cpu_seconds
from bench.sinks import TARGET_MS, DiscardSink, TimingSink
from entrypoints.containers import CoreContainer
from entrypoints.devstack.aws import client as aws_client
from entrypoints.read_side.postgres import postgres_sink, postgres_store
from entrypoints.settings import load_settings
from entrypoints.settings.load import DYNAMODB_SINK_WRITERS
from entrypoints.worker.gc_tuning import tune_gc


class WarningCounter(logging.Handler):
    """Counts WARNING+ log records by their message template: why a step broke."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: Counter[str] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        self.seen[f"{record.name}: {str(record.msg)[:80]}"] += 1


START_CONCURRENCY = 32
# The database's URI (a password in it) comes in the environment, not on the command line.
POSTGRES_URL_VARIABLE = "BENCH_POSTGRES_URL"


def store_requests(store: ConnectionStore) -> int:
    """Requests the store has made: DynamoDB's, PostgreSQL's round trips (its operations, each
    one transaction or read); 0 for the local stores, which count none."""
    if isinstance(store, DynamoDbConnectionStore):
        return sum(store.requests.values())
    if isinstance(store, PostgresConnectionStore):
        return sum(store.operations.values())
    return 0


def emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


async def open_ports(
    args: argparse.Namespace, stack: AsyncExitStack
) -> tuple[ConnectionStore, TimingSink, Any]:
    """The store, the sink, and the PostgreSQL pool they share (None on other backends)."""
    data = Path(args.data_dir)
    client: Any = None
    if "dynamodb" in (args.store, args.sink):
        client = await stack.enter_async_context(aws_client("dynamodb", args.endpoint, pool=64))
        await create_tables(client, TableNames())
    pool: Any = None
    if "postgres" in (args.store, args.sink):  # the pools as PostgresContainer opens them
        pool = await open_pool(args.postgres_url, size=args.postgres_pool_size)
        stack.push_async_callback(pool.close)
    store: ConnectionStore
    if args.store == "postgres":
        sessions = await open_pool(args.postgres_url, size=1)
        stack.push_async_callback(sessions.close)
        store = postgres_store(pool, sessions)
    elif args.store == "sqlite":
        store = await stack.enter_async_context(SqliteConnectionStore.open(data / "wsfleet.sqlite"))
    elif args.store == "dynamodb":
        store = DynamoDbConnectionStore(client)
    else:
        store = InMemoryConnectionStore()
    inner: MessageSink
    if args.sink == "postgres":
        inner = postgres_sink(pool)
    elif args.sink == "sqlite":
        inner = await stack.enter_async_context(SqliteMessageSink.open(data / "messages.sqlite"))
    elif args.sink == "dynamodb":
        inner = DynamoDbMessageSink(client)
    else:
        inner = DiscardSink()
    return store, TimingSink(inner), pool


class PoolWait:
    """How long taking a connection from the worker's PostgreSQL pool waits, sampled every half
    second (what a heartbeat waits before its renewal can start)."""

    def __init__(self, pool: Any) -> None:
        self._pool = pool
        self.samples_ms: list[float] = []

    async def run(self) -> None:
        while True:
            began = time.monotonic()
            async with self._pool.acquire():
                self.samples_ms.append((time.monotonic() - began) * 1000)
            await asyncio.sleep(0.5)

    def take(self) -> dict[str, float | None]:
        samples, self.samples_ms = sorted(self.samples_ms), []
        if not samples:
            return {"p50_ms": None, "p99_ms": None, "max_ms": None}
        return {
            "p50_ms": round(samples[len(samples) // 2], 1),
            "p99_ms": round(samples[min(len(samples) - 1, int(len(samples) * 0.99))], 1),
            "max_ms": round(samples[-1], 1),
        }


async def wait_open(worker: Worker, target: int, timeout_s: float) -> tuple[int, float]:
    began = time.monotonic()
    while True:
        streaming = sum(1 for s in worker.sessions if s.upstream_open)
        if streaming >= target or time.monotonic() - began > timeout_s:
            return streaming, time.monotonic() - began
        await asyncio.sleep(0.5)


async def main(args: argparse.Namespace) -> None:
    files = raise_open_files()
    tune_gc(args.gc_thresholds)  # as the worker commands do (WSFLEET_GC_THRESHOLDS)
    if args.tracemalloc:
        tracemalloc.start()
    warnings = WarningCounter()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    logging.getLogger().addHandler(warnings)
    env = {
        "WSFLEET_MAX_CONNECTIONS": str(max(args.steps) + 100),
        "WSFLEET_ALLOW_PRIVATE_UPSTREAMS": "true",  # the simulator is on 127.0.0.1
    }
    if args.flush_interval:
        env["WSFLEET_INGEST_FLUSH_INTERVAL_S"] = str(args.flush_interval)
    if args.sink == "dynamodb":  # the lanes a worker's settings give the DynamoDB sink
        env["WSFLEET_INGEST_WRITERS"] = str(DYNAMODB_SINK_WRITERS)
    settings = load_settings(env)
    options = WebSocketOptions(
        ca_file=args.ca_file, tls_read_buffer=args.tls_read_buffer, open_timeout=args.open_timeout
    )
    lag = LoopLag()
    async with AsyncExitStack() as stack:
        store, sink, pool = await open_ports(args, stack)
        pool_wait = PoolWait(pool) if pool is not None else None
        # The production wiring (entrypoints/containers.py) on the ports under measure.
        clock = SystemClock()
        core = CoreContainer(
            settings=settings,
            store=store,
            queue=InMemoryNotificationQueue(clock),
            sink=sink,
            metrics=InMemoryMetrics(),
            upstream=WebSocketConnector(options),
            clock=clock,
        )
        worker: Worker = core.worker(worker_id="capacity")
        router: EventRouter = core.router()
        if args.store == "postgres":
            # The STARTs over a pool of their own, as the API's process has: on the worker's
            # pool, 500 STARTs/s queued its sink and store writes past the 10 s acquire timeout.
            api_pool = await open_pool(args.postgres_url, size=DEFAULT_POOL_SIZE)
            stack.push_async_callback(api_pool.close)
            router = EventRouter(
                store=postgres_store(api_pool),
                queue=core.queue(),
                clock=clock,
                url_policy=core.url_policy(),
            )
        tasks = [asyncio.create_task(worker.run()), asyncio.create_task(lag.run())]
        if pool_wait is not None:
            tasks.append(asyncio.create_task(pool_wait.run()))
        await asyncio.sleep(1.0)
        emit(
            "baseline",
            rss_kib=self_rss_kib(),
            open_files=open_files(),
            files=files,
            tls_read_buffer=options.tls_read_buffer if args.ca_file else None,
        )
        started = 0
        for target in args.steps:
            if pool_wait is not None:
                pool_wait.take()
            paced = time.monotonic()
            # STARTs overlap as many users' would: one at a time, a store a few ms away caps
            # the ramp at a few hundred per second (DynamoDB Local under load: tens).
            in_flight: set[asyncio.Task[Any]] = set()
            while started < target:
                cid = f"{args.prefix}{started:06d}"
                url = f"{args.sim_url}/stream/{cid}{args.query}"
                in_flight.add(asyncio.create_task(router.start(cid, url)))
                if len(in_flight) >= START_CONCURRENCY:
                    done, in_flight = await asyncio.wait(
                        in_flight, return_when=asyncio.FIRST_COMPLETED
                    )
                    for task in done:
                        task.result()  # a failed START fails the run, loudly
                started += 1
                paced += 1 / args.start_rate  # STARTs arrive at a bounded rate, as from users
                await asyncio.sleep(max(0.0, paced - time.monotonic()))
            await asyncio.gather(*in_flight)
            streaming, ramp_s = await wait_open(worker, target, args.ramp_timeout)
            ramp_pool_wait = pool_wait.take() if pool_wait is not None else None
            await asyncio.sleep(args.settle)
            sink.reset()
            lag.take()
            if pool_wait is not None:
                pool_wait.take()
            cpu0, t0 = cpu_seconds(os.getpid()), time.monotonic()
            requests0 = store_requests(store)
            await asyncio.sleep(args.window)
            elapsed = time.monotonic() - t0
            requests = store_requests(store) - requests0
            emit(
                "step",
                target=target,
                gc_thresholds=list(gc.get_threshold()),
                streaming=sum(1 for s in worker.sessions if s.upstream_open),
                streaming_at_ramp_end=streaming,
                ramp_s=round(ramp_s, 2),
                window_s=round(elapsed, 2),
                rss_kib=self_rss_kib(),
                open_files=open_files(),
                cpu_share=round((cpu_seconds(os.getpid()) - cpu0) / elapsed, 3),
                stored=sink.stored,
                stored_per_s=round(sink.stored / elapsed, 1),
                sink_writes=sink.writes,
                within_target=sink.within_target,
                target_ms=TARGET_MS,
                latency_ms={q: sink.quantile_ms(q / 1000) for q in (500, 990, 999)},
                max_latency_ms=sink.max_ms,
                loop_lag=lag.take(),
                pool_wait=pool_wait.take() if pool_wait is not None else None,
                pool_wait_during_ramp=ramp_pool_wait,
                store_requests=requests,
                store_requests_per_s=round(requests / elapsed, 2),
                warnings=dict(warnings.seen.most_common(8)),
                top_allocations=top_allocations(target) if args.tracemalloc else None,
            )
            broke = streaming < target * 0.99 or sink.within_target < 0.999 * sink.stored
            if broke and not args.keep_going:
                break  # it broke here: no point in piling on more connections
        worker.request_shutdown()
        await asyncio.wait_for(tasks[0], 120)
        for task in tasks[1:]:
            task.cancel()
        await asyncio.gather(*tasks[1:], return_exceptions=True)
    emit("done")


def top_allocations(connections: int, limit: int = 15) -> list[str]:
    """Where Python memory is, per connection, grouped by source file (what costs what)."""
    stats = tracemalloc.take_snapshot().statistics(os.environ.get("BENCH_TRACE_KEY", "filename"))[
        :limit
    ]
    return [
        f"{s.size / connections / 1024:.2f} KiB/conn {s.count / connections:.1f} blocks/conn "
        f"{str(s.traceback[0]).split('site-packages/')[-1].removeprefix(str(Path.cwd()))}"
        for s in stats
    ]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.capacity_worker")
    p.add_argument("--sim-url", required=True, help="ws://HOST:PORT of the simulator")
    p.add_argument("--steps", type=lambda s: [int(x) for x in s.split(",")], required=True)
    p.add_argument("--window", type=float, default=20.0, help="seconds measured per step")
    p.add_argument("--settle", type=float, default=5.0)
    p.add_argument("--ramp-timeout", type=float, default=180.0)
    backends = ["sqlite", "dynamodb", "postgres"]
    p.add_argument("--store", choices=["memory", *backends], default="memory")
    p.add_argument("--sink", choices=["discard", *backends], default="discard")
    p.add_argument(
        "--postgres-url",
        default=os.environ.get(POSTGRES_URL_VARIABLE),
        help=f"a migrated database's URI, for postgres (default ${POSTGRES_URL_VARIABLE})",
    )
    p.add_argument(
        "--postgres-pool-size",
        type=int,
        default=DEFAULT_POOL_SIZE,
        help="the worker's pool (WSFLEET_POSTGRES_POOL_SIZE)",
    )
    p.add_argument("--data-dir", default=".")
    p.add_argument("--endpoint", help="DynamoDB endpoint (DynamoDB Local) for dynamodb")
    p.add_argument("--ca-file", help="CA bundle trusting a wss:// simulator")
    p.add_argument(
        "--tls-read-buffer",
        type=int,
        default=WebSocketOptions().tls_read_buffer,
        help="bytes per wss:// socket read (262144 = asyncio's own buffer)",
    )
    p.add_argument("--query", default="", help="appended to each stream URL, e.g. ?rate=500")
    p.add_argument("--prefix", default="cap")
    p.add_argument("--start-rate", type=float, default=500.0, help="STARTs per second")
    p.add_argument("--flush-interval", type=float, default=None)
    p.add_argument("--tracemalloc", action="store_true", help="report allocation sites")
    p.add_argument("--open-timeout", type=float, default=WebSocketOptions().open_timeout)
    p.add_argument(
        "--keep-going",
        action="store_true",
        help="ramp on after a failed step (memory per connection on a busy machine)",
    )
    p.add_argument(
        "--gc-thresholds",
        default=load_settings({}).gc_thresholds,
        help="as WSFLEET_GC_THRESHOLDS: gen0,gen1,gen2 or python (default: the worker's)",
    )
    return p.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
