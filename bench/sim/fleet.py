"""SimFleet: tests/support/fleet.py's Fleet of real Workers on one virtual clock, built on the
simulation's adapters (adapters.py, store.py) with every caller's store calls going through the
DynamoDB model (dynamodb.py), and a watch on the upstream that times every connection's gaps."""

import asyncio
import math
import random
import resource
import time
from collections.abc import Coroutine, Sequence
from typing import Any

import attrs

from adapters.dynamodb.schema import DEFAULT_ORPHAN_SHARDS
from application.config import WorkerConfig
from application.errors import StoreUnavailable
from application.ports import ConnectionStore
from bench.sim.adapters import LeanSink, SimQueue, SimUpstream
from bench.sim.clock import SimClock
from bench.sim.dynamodb import DynamoDbModel, ModelledStore
from bench.sim.store import IndexedMemoryStore
from entrypoints.settings import load_settings
from tests.support.fleet import Fleet, Member, url_of


@attrs.frozen
class SimSize:
    workers: int
    connections: int
    rate_per_s: float = 0.05  # messages per connection per second
    connect_s: float = 0.05  # the upstream's connect latency
    seed: int = 1
    shards: int = DEFAULT_ORPHAN_SHARDS  # WSFLEET_ORPHAN_SHARDS: the orphan index's partitions

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
        self.model = DynamoDbModel(
            self.store, self.clock, random.Random(size.seed + 1), shards=size.shards
        )
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

        await self._starting(starts())

    async def start_placed(self, at_once: int = 500) -> None:
        """START every connection in the store as the router does, without its hint, and have
        a live worker drawn at random (the size's seed) take it at once, by capacity as a scan
        takes a dead worker's connections past the placement grace. Each take follows its
        START within the heartbeat in which the workers' scans leave a new connection to its
        hint (loops.py `_left_to_its_hint`). Drawn at random, the workers hold their shares
        give or take its square root, as a fleet started through the router holds them once
        balancing has brought each within its band; the settle's balancing moves the few
        outside it (a few hundred of 10,000 at 100 workers), not the whole start-up's churn.

        Through the router at 1,000 workers the STARTs' hints land on whoever polls first,
        the fleet then balances for a minute (16,664 moves in the first 20 virtual s), and
        every declining worker looks at the whole fleet four times a second: 282 s of CPU
        for those 20 virtual s (bench/RESULTS.md section 31). The faults are measured from a
        settled fleet either way (`at_fault`)."""
        store = ModelledStore(self.model, "router")
        names = self.live
        owners = [self.rng.randrange(len(names)) for _ in range(self.size.connections)]

        async def starts() -> None:
            for i in range(0, self.size.connections, at_once):
                batch = range(i, min(i + at_once, self.size.connections))
                await asyncio.gather(
                    *(self._start_placed(store, j, names[owners[j]]) for j in batch)
                )

        await self._starting(starts())

    async def _starting(self, starts: Coroutine[Any, Any, None]) -> None:
        """Run the STARTs to their end while virtual time moves (their store calls take some)."""
        task = asyncio.create_task(starts, name="sim-starts")
        try:
            await self.clock.run_until(task.done, 3600, step_s=0.05)
        finally:
            task.cancel()
        await task

    async def _start_placed(self, store: ConnectionStore, j: int, owner: str) -> None:
        connection_id = f"c{j:06d}"
        url = url_of(connection_id)
        self.upstream.stream(url)  # the live stream exists (and advances) from now on
        for attempt in range(1, 30):
            try:
                await store.start(connection_id, url, self.clock.now_ms())
                break
            except StoreUnavailable:
                await self.clock.sleep(min(2.0, 0.05 * 2**attempt))
        else:
            await store.start(connection_id, url, self.clock.now_ms())
        sessions = self.fleet.members[owner].worker.sessions
        for _ in range(100):
            try:
                if not await sessions.take_each([(connection_id, True)]):
                    return  # taken, or lost to another worker (its hint is on no one's way)
            except StoreUnavailable:
                if connection_id in sessions:
                    return
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

    def held(self) -> list[int]:
        """How many connections each live worker streams."""
        return [len(self.fleet.streamed_by(name)) for name in self.live]

    def streams_of(self, names: Sequence[str]) -> frozenset[str]:
        """The upstream URLs these workers stream."""
        return frozenset(url_of(cid) for name in names for cid in self.fleet.streamed_by(name))

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
