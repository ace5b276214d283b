"""The ingest writer's side of sink fencing (issue 13), on virtual time: what the sink refuses,
and a write that returns after the lease stopped being trusted, never advance a checkpoint."""

import asyncio
from collections.abc import Sequence

import attrs

from adapters.memory.clock import FakeClock
from adapters.memory.metrics import InMemoryMetrics
from adapters.memory.sink import InMemoryMessageSink
from application.ports import StoredMessage
from application.worker.ingest import IngestBuffer, IngestWriter
from tests.support.leases import worker_context


@attrs.define
class Lease:
    """The part of a Lease the writer reads, trusted until told otherwise."""

    connection_id: str
    token: int
    session_id: str = "w1#1"
    trusted: bool = True
    taken_over: bool = False

    def valid(self) -> bool:
        return self.trusted and not self.taken_over

    def lost(self, why: str) -> None:
        self.taken_over = True


class Harness:
    def __init__(self) -> None:
        self.clock = FakeClock()
        self.metrics = InMemoryMetrics()
        self.sink = InMemoryMessageSink()
        self.writer = IngestWriter(worker_context(self.clock, self.metrics, sink=self.sink))
        self.failures: dict[str, str] = {}

    def buffer(self, cid: str, token: int = 1, checkpoint: int = 0) -> tuple[IngestBuffer, Lease]:
        lease = Lease(cid, token)

        def failed(reason: str) -> None:
            self.failures[cid] = reason

        buffer = self.writer.buffer(lease, checkpoint, failed)  # type: ignore[arg-type]
        return buffer, lease


async def test_a_write_that_returns_after_trust_ended_does_not_advance_the_checkpoint() -> None:
    h = Harness()
    buffer, lease = h.buffer("c1")
    for seq in (1, 2, 3):
        await buffer.put(seq, f"m{seq}")

    real_write = h.sink.write

    async def slow_write(messages: Sequence[StoredMessage]) -> None:
        await real_write(messages)  # it lands...
        lease.trusted = False  # ...but returns after the self-fence deadline

    h.sink.write = slow_write  # type: ignore[method-assign]
    await h.writer.flush()

    assert buffer.checkpoint == 0
    assert buffer.pending == 0


async def test_a_stale_token_refused_by_the_sink_ends_the_lease_not_the_checkpoint() -> None:
    h = Harness()
    await h.sink.write([StoredMessage("c1", 2, "m2", 1, "w2", 2, 1)])  # a newer owner wrote seq 2
    buffer, lease = h.buffer("c1", token=1)
    for seq in (1, 2, 3):
        await buffer.put(seq, f"m{seq}")

    await h.writer.flush()

    assert lease.taken_over
    assert buffer.checkpoint == 1
    assert "c1" not in h.failures


async def test_other_data_for_a_stored_seq_is_counted_and_fails_only_that_connection() -> None:
    h = Harness()
    await h.sink.write([StoredMessage("c1", 2, "first", 1, "w0", 1, 1)])
    c1, _ = h.buffer("c1", token=2)
    c2, _ = h.buffer("c2", token=2)
    for seq in (1, 2, 3):
        await c1.put(seq, f"m{seq}")
        await c2.put(seq, f"m{seq}")

    await h.writer.flush()

    assert h.metrics.counters["SeqConflicts"] == 1
    assert "different data" in h.failures["c1"]
    assert "c2" not in h.failures
    assert h.sink.messages[("c1", 2)].data == "first", "the stored copy is kept"
    assert (c1.checkpoint, c2.checkpoint) == (1, 3)


async def test_a_message_lost_by_the_writer_freezes_the_checkpoint_behind_it() -> None:
    h = Harness()
    buffer, _ = h.buffer("c1")
    for seq in (1, 2, 3, 4):
        await buffer.put(seq, f"m{seq}")
    h.writer.lanes[0]._queue.popleft()  # seq 1 vanished (a writer that died holding it, before #13)

    await h.writer.flush()

    assert h.sink.seqs("c1") == [2, 3, 4]
    assert buffer.checkpoint == 0, "never past a message that did not land"


async def test_a_closed_writer_stores_nothing_more() -> None:
    h = Harness()
    buffer, _ = h.buffer("c1")
    await buffer.put(1, "m1")
    h.writer.close()

    await asyncio.wait_for(buffer.drain(), 1)

    assert h.sink.seqs("c1") == []
    assert buffer.checkpoint == 0


async def test_a_drain_ends_while_other_connections_keep_the_queue_full() -> None:
    """GIVEN a neighbour whose messages arrive faster than the sink writes them WHEN one
    session drains (a STOP, a shutdown) THEN its drain ends once its own messages are written,
    not when the shared queue is empty, which under a steady inflow it never is (found by
    bench/fleet on DynamoDB Local: no hand-back ever completed)."""
    h = Harness()
    quiet, _ = h.buffer("quiet")
    busy, _ = h.buffer("busy")
    for seq in (1, 2, 3):
        await quiet.put(seq, f"q{seq}")
    real_write = h.sink.write
    produced = 1

    async def write_while_the_neighbour_streams(messages: Sequence[StoredMessage]) -> None:
        nonlocal produced
        await real_write(messages)
        for _ in range(h.sink.max_batch + 1):  # more arrives than one batch takes away
            produced += 1
            await busy.put(produced, f"b{produced}")

    h.sink.write = write_while_the_neighbour_streams  # type: ignore[method-assign]
    await busy.put(1, "b1")

    await asyncio.wait_for(quiet.drain(), 2)

    assert quiet.checkpoint == 3
    assert quiet.pending == 0
