"""A fleet of real Workers on the in-memory adapters and one virtual clock, for tests that
live through crashes, handoffs and outages in milliseconds of real time. Built through the
production wiring (entrypoints/containers.py, InMemoryContainer): each worker gets its own
fault-injecting wrappers of the fleet's one store and sink, and its own metrics."""

import asyncio
import random
from collections.abc import Callable, Sequence

import attrs
from dependency_injector import providers

from adapters.faults.clock import SkewedClock
from adapters.faults.sink import FaultInjectingSink
from adapters.faults.store import FaultInjectingStore
from adapters.memory.clock import FakeClock
from adapters.memory.metrics import InMemoryMetrics
from adapters.memory.queue import InMemoryNotificationQueue
from adapters.memory.sink import InMemoryMessageSink
from adapters.memory.store import InMemoryConnectionStore
from adapters.memory.upstream import FakeUpstream
from application.config import WorkerConfig
from application.ports import ConnectionStore, NotificationQueue
from application.router import EventRouter
from application.url_policy import UrlPolicy
from application.worker.worker import Worker
from domain import WorkerSession
from entrypoints.containers import InMemoryContainer
from entrypoints.settings import load_settings

# The article's defaults, on virtual time: tests are as slow as production, yet finish fast.
DEFAULT_CONFIG = WorkerConfig()


class NoDns:
    """Every name answers one documentation address (192.0.2.0/24): the fake upstream is
    reached by URL, and nothing here may touch real DNS."""

    async def resolve(self, host: str) -> Sequence[str]:
        return ["192.0.2.10"]


@attrs.define
class Member:
    worker: Worker
    store: FaultInjectingStore
    sink: FaultInjectingSink  # this worker's way to the fleet's one sink
    metrics: InMemoryMetrics
    task: "asyncio.Task[None]"


StoreLayer = Callable[[str, ConnectionStore], ConnectionStore]


def no_layer(caller: str, store: ConnectionStore) -> ConnectionStore:
    return store


class Fleet:
    def __init__(
        self,
        config: WorkerConfig = DEFAULT_CONFIG,
        rate_per_s: float = 10.0,
        *,
        clock: FakeClock | None = None,
        store: InMemoryConnectionStore | None = None,
        queue: InMemoryNotificationQueue | None = None,
        sink: InMemoryMessageSink | None = None,
        upstream: FakeUpstream | None = None,
        store_layer: StoreLayer = no_layer,
    ) -> None:
        self.config = config
        self.clock = clock or FakeClock()
        self.container = InMemoryContainer(
            settings=load_settings({"WSFLEET_ALLOW_PRIVATE_UPSTREAMS": "true"}),
            clock=self.clock,
            resolver=NoDns(),
            upstream_rate_per_s=rate_per_s,
        )
        self.store: InMemoryConnectionStore = store or self.container.store()
        self.store_layer = store_layer
        # What the router reaches the store through (its writes meet the layer too).
        self.container.store.override(providers.Object(store_layer("router", self.store)))
        for provider, given in (
            (self.container.queue, queue),
            (self.container.sink, sink),
            (self.container.upstream, upstream),
        ):
            if given is not None:
                provider.override(providers.Object(given))
        self.queue: InMemoryNotificationQueue = self.container.queue()
        self.sink: InMemoryMessageSink = self.container.sink()
        self.upstream: FakeUpstream = self.container.upstream()
        self.url_policy: UrlPolicy = self.container.core.url_policy()
        self.router: EventRouter = self.container.core.router()
        self.members: dict[str, Member] = {}
        self._seed = 0

    def add_worker(
        self,
        name: str,
        config: WorkerConfig | None = None,
        skew_ms: int = 0,
        queue: NotificationQueue | None = None,
    ) -> Member:
        self._seed += 1
        clock = SkewedClock(self.clock, skew_ms) if skew_ms else self.clock
        store = FaultInjectingStore(self.store_layer(name, self.store), clock)
        sink = FaultInjectingSink(self.sink, clock)
        metrics: InMemoryMetrics = self.container.metrics()
        worker: Worker = self.container.core.worker(
            worker_id=name,
            config=config or self.config,
            store=store,
            queue=queue or self.queue,
            sink=sink,
            metrics=metrics,
            clock=clock,
            url_policy=self.url_policy,  # a test may swap the workers' policy
            rng=random.Random(self._seed),
        )
        task = asyncio.create_task(worker.run(), name=f"worker:{name}")
        member = Member(worker, store, sink, metrics, task)
        self.members[name] = member
        return member

    async def start(self, connection_id: str, url: str | None = None) -> str:
        url = url or url_of(connection_id)
        self.upstream.stream(url)  # the live stream exists (and advances) from now on
        await self.router.start(connection_id, url)
        return url

    async def start_streamed_by(self, owner: str, connection_id: str) -> str:
        """START `connection_id` and wait (up to 5 virtual seconds) until `owner` streams it."""
        url = await self.start(connection_id)
        await self.clock.run_until(lambda: self.owner_of(connection_id) == owner, 5)
        return url

    def owner_of(self, connection_id: str) -> str | None:
        """The worker streaming `connection_id` right now, if exactly one is."""
        owners = [
            name
            for name, m in self.members.items()
            if not m.task.done()
            and any(s.connection_id == connection_id and s.upstream_open for s in m.worker.sessions)
        ]
        assert len(owners) <= 1, f"{connection_id} streamed by {owners}"
        return owners[0] if owners else None

    def streamed_by(self, name: str) -> list[str]:
        return [s.connection_id for s in self.members[name].worker.sessions if s.upstream_open]

    async def crash(self, name: str) -> None:
        """The process dies: its store calls hang forever and its tasks are cancelled, so no
        release, no final flush — only what it had already written survives."""
        member = self.members[name]
        member.store.severed = True
        member.task.cancel()
        await asyncio.gather(member.task, return_exceptions=True)

    async def shutdown(self, name: str, timeout_s: float = 60.0) -> float:
        """SIGTERM: graceful shutdown; returns the virtual seconds it took."""
        member = self.members[name]
        member.worker.request_shutdown()
        return await self.clock.run_until(member.task.done, timeout_s)

    async def close(self) -> None:
        for member in self.members.values():
            member.worker.request_shutdown()
        for member in self.members.values():
            if not member.task.done():
                try:
                    await self.clock.run_until(member.task.done, 120)
                except TimeoutError:
                    member.task.cancel()
            await asyncio.gather(member.task, return_exceptions=True)

    def peak_subscribers(self) -> dict[str, int]:
        return {url: s.peak_subscribers for url, s in self.upstream.streams.items()}

    def assert_sink_complete(self, connection_id: str, url: str, upto: int) -> None:
        """Every seq 1..upto stored exactly once, with the upstream's data."""
        seqs = self.sink.seqs(connection_id)
        missing = sorted(set(range(1, upto + 1)) - set(seqs))
        assert not missing, f"{connection_id}: missing seqs {missing[:20]}"
        for seq in range(1, upto + 1):
            assert self.sink.messages[(connection_id, seq)].data == f"{url}#{seq}"

    async def assert_checkpoint_stored(self, connection_id: str) -> int:
        """The invariant every sink fault must keep: everything up to the checkpoint is in
        the sink — the one recorded in the store, and the one each running owner holds (what
        it records hourly and hands back on release): a new owner resumes after it, so a hole
        below it is lost for good. Returns the highest of them."""
        state = await self.store.get(connection_id)
        assert state is not None
        checkpoints = [state.checkpoint_seq] + [
            s.ingest.checkpoint
            for m in self.members.values()
            if not m.task.done()
            for s in m.worker.sessions
            if s.connection_id == connection_id
        ]
        stored = set(self.sink.seqs(connection_id))
        for checkpoint in checkpoints:
            missing = sorted(set(range(1, checkpoint + 1)) - stored)
            assert not missing, (
                f"{connection_id}: checkpoint {checkpoint} but seqs {missing[:20]} not stored"
            )
        return max(checkpoints)

    async def owner_session(self, connection_id: str) -> WorkerSession:
        """The session that owns `connection_id` (its expiry is the lease's)."""
        state = await self.store.get(connection_id)
        assert state is not None
        assert state.owner
        session = await self.store.get_session(state.owner)
        assert session is not None
        return session


def url_of(connection_id: str) -> str:
    """The upstream URL a connection is STARTed with unless a test names one."""
    return f"ws://upstream.test/stream/{connection_id}"
