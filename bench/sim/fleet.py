"""SimFleet: tests/support/fleet.py's Fleet of real Workers on one virtual clock, built on the
simulation's adapters (adapters.py, store.py) with every caller's store calls going through the
DynamoDB model (dynamodb.py), and a watch on the upstream that times every connection's gaps."""

import asyncio
import math
import random
import resource
import time

import attrs

from application.config import WorkerConfig
from application.errors import StoreUnavailable
from application.ports import ConnectionStore
from bench.sim.adapters import LeanSink, SimQueue, SimUpstream
from bench.sim.clock import SimClock
from bench.sim.dynamodb import DynamoDbModel, ModelledStore
from bench.sim.store import IndexedMemoryStore
from entrypoints.settings import load_settings
from tests.support.fleet import Fleet, Member


@attrs.frozen
class SimSize:
    workers: int
    connections: int
    rate_per_s: float = 0.05  # messages per connection per second
    connect_s: float = 0.05  # the upstream's connect latency
    seed: int = 1

    @property
    def capacity(self) -> int:
        """Each worker's max_connections: twice its share, so that the survivors of a third
        of the fleet have room for every orphan (1.5 shares) with some to spare."""
        return max(10, 2 * math.ceil(self.connections / self.workers))


class SimFleet:
    def __init__(self, size: SimSize, config: WorkerConfig | None = None) -> None:
        self.size = size
        self.config = config or WorkerConfig(max_connections=size.capacity)
        self.clock = SimClock()
        self.rng = random.Random(size.seed)
        self.store = IndexedMemoryStore()
        self.model = DynamoDbModel(self.store, self.clock, random.Random(size.seed + 1))
        visibility = load_settings({}).hint_visibility_timeout_s
        self.queue = SimQueue(self.clock, visibility)
        self.sink = LeanSink()
        self.upstream = SimUpstream(self.clock, size.rate_per_s, size.connect_s)
        self.fleet = Fleet(
            self.config,
            size.rate_per_s,
            clock=self.clock,
            store=self.store,
            queue=self.queue,
            sink=self.sink,
            upstream=self.upstream,
            store_layer=self._layer,
        )
        self._names = 0
        self.started_wall = time.perf_counter()

    def _layer(self, caller: str, store: ConnectionStore) -> ConnectionStore:
        return ModelledStore(self.model, caller)

    @property
    def live(self) -> list[str]:
        return [name for name, m in self.fleet.members.items() if not m.task.done()]

    def add_workers(self, n: int) -> list[Member]:
        added = []
        for _ in range(n):
            self._names += 1
            added.append(self.fleet.add_worker(f"w{self._names:05d}"))
        return added

    async def start_all(self, at_once: int = 500) -> None:
        """START every connection through the router (each hinted, as the API does), `at_once`
        side by side, while virtual time runs (the store's answers take some)."""

        async def starts() -> None:
            for i in range(0, self.size.connections, at_once):
                batch = range(i, min(i + at_once, self.size.connections))
                await asyncio.gather(*(self._start(f"c{j:06d}") for j in batch))

        task = asyncio.create_task(starts(), name="sim-starts")
        try:
            await self.clock.run_until(task.done, 3600, step_s=0.05)
        finally:
            task.cancel()
        await task

    async def start_placed(self, at_once: int = 500) -> None:
        """START every connection in the store as the router does, without its hint, and have
        each live worker take its share at once (worker k of n the connections k, k + n, ...),
        by capacity as a scan takes a dead worker's connections past the placement grace: the
        fleet streams everything, each worker its share, without the start-up's churn.

        Through the router at 1,000 workers the STARTs' hints land on whoever polls first,
        the fleet then balances for a minute (16,664 moves in the first 20 virtual s), and
        every declining worker looks at the whole fleet four times a second: 20 s of CPU per
        virtual second, most of the run (bench/RESULTS.md section 31). The faults are measured
        from a settled fleet either way (`at_fault`)."""
        store = ModelledStore(self.model, "router")
        names = self.live

        async def starts() -> None:
            for i in range(0, self.size.connections, at_once):
                batch = range(i, min(i + at_once, self.size.connections))
                await asyncio.gather(*(self._start_quietly(store, f"c{j:06d}") for j in batch))
            await asyncio.gather(
                *(self._take_share(k, name, names) for k, name in enumerate(names))
            )

        task = asyncio.create_task(starts(), name="sim-starts")
        try:
            await self.clock.run_until(task.done, 3600, step_s=0.05)
        finally:
            task.cancel()
        await task

    async def _start_quietly(self, store: ConnectionStore, connection_id: str) -> None:
        url = f"ws://upstream.test/stream/{connection_id}"
        self.upstream.stream(url)  # the live stream exists (and advances) from now on
        for attempt in range(1, 30):
            try:
                await store.start(connection_id, url, self.clock.now_ms())
                return
            except StoreUnavailable:
                await self.clock.sleep(min(2.0, 0.05 * 2**attempt))
        await store.start(connection_id, url, self.clock.now_ms())

    async def _take_share(self, k: int, name: str, names: list[str]) -> None:
        sessions = self.fleet.members[name].worker.sessions
        share = [(f"c{j:06d}", True) for j in range(k, self.size.connections, len(names))]
        while share:
            try:
                left = await sessions.take_each(share)
            except StoreUnavailable:
                left = [cid for cid, _ in share if cid not in sessions]
            share = [(cid, True) for cid in left if cid not in sessions]
            if share:
                await self.clock.sleep(0.1)  # no trusted session yet, or throttled

    async def _start(self, connection_id: str) -> None:
        """One START, retried as an API client retries a throttled call (the model throttles
        a burst of STARTs as DynamoDB would)."""
        for attempt in range(1, 30):
            try:
                await self.fleet.start(connection_id)
                return
            except StoreUnavailable:
                await self.clock.sleep(min(2.0, 0.05 * 2**attempt))
        await self.fleet.start(connection_id)

    def all_streaming(self) -> bool:
        return self.upstream.streaming >= self.size.connections

    async def run_until_streaming(self, timeout_s: float) -> float:
        return await self.clock.run_until(self.all_streaming, timeout_s, step_s=0.05)

    def unowned(self) -> int:
        return self.size.connections - self.upstream.streaming

    async def close(self) -> None:
        """Cancel every worker (no graceful shutdown: nothing is measured after the run)."""
        for member in self.fleet.members.values():
            member.store.severed = True
            member.task.cancel()
        for member in self.fleet.members.values():
            # Cancelled or failed: the run is over, and the figures were taken before.
            await asyncio.gather(member.task, return_exceptions=True)


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
