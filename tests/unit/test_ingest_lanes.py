"""The writer's lanes, on virtual time: with `ingest_writers` lanes, that many batches are in
flight at once, each connection's messages always in one lane and in the order received."""

import asyncio
from collections.abc import Sequence

from adapters.memory.clock import FakeClock
from adapters.memory.metrics import InMemoryMetrics
from adapters.memory.sink import InMemoryMessageSink
from application.config import WorkerConfig
from application.ports import StoredMessage
from application.worker.ingest import IngestWriter
from tests.support.leases import worker_context
from tests.unit.test_ingest_writer_fencing import Lease


class SlowSink(InMemoryMessageSink):
    """Each write takes 50 ms of virtual time; records how many are in flight at once and
    the order each connection's seqs arrive in."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__()
        self.clock = clock
        self.in_flight = 0
        self.most_in_flight = 0
        self.arrived: dict[str, list[int]] = {}
        self.connections_in_flight: list[str] = []

    async def write(self, messages: Sequence[StoredMessage]) -> None:
        cids = {m.connection_id for m in messages}
        assert not cids & set(self.connections_in_flight), "one connection in two writes"
        self.connections_in_flight.extend(cids)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        for m in messages:
            self.arrived.setdefault(m.connection_id, []).append(m.seq)
        await self.clock.sleep(0.05)
        await super().write(messages)
        self.in_flight -= 1
        for cid in cids:
            self.connections_in_flight.remove(cid)


async def _written_by(lanes: int) -> tuple[SlowSink, IngestWriter, dict[str, int]]:
    clock = FakeClock()
    sink = SlowSink(clock)
    sink.max_batch = 10
    config = WorkerConfig(ingest_writers=lanes)
    writer = IngestWriter(worker_context(clock, InMemoryMetrics(), config=config, sink=sink))
    buffers = {
        f"c{i}": writer.buffer(Lease(f"c{i}", 1), 0, lambda _: None)  # type: ignore[arg-type]
        for i in range(16)
    }
    for seq in range(1, 21):
        for buffer in buffers.values():
            await buffer.put(seq, f"m{seq}")
    flush = asyncio.create_task(writer.flush())
    await clock.run_until(flush.done, 30, step_s=0.01)
    await flush
    return sink, writer, {cid: b.checkpoint for cid, b in buffers.items()}


async def test_each_lane_keeps_one_batch_in_flight_and_a_connection_in_one_lane_in_order() -> None:
    sink, writer, checkpoints = await _written_by(lanes=4)

    assert 2 <= sink.most_in_flight <= 4
    assert all(seqs == list(range(1, 21)) for seqs in sink.arrived.values()), sink.arrived
    assert checkpoints == {f"c{i}": 20 for i in range(16)}
    assert writer.stored == 16 * 20


async def test_one_lane_keeps_one_batch_in_flight() -> None:
    sink, _, checkpoints = await _written_by(lanes=1)

    assert sink.most_in_flight == 1
    assert checkpoints == {f"c{i}": 20 for i in range(16)}
