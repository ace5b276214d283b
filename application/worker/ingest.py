"""The bounded, batched path from upstreams to the message sink.

Each session `put`s into its own `IngestBuffer`; when that buffer is full the receive loop
waits (back-pressure reaches the upstream socket) instead of dropping or growing. One
`IngestWriter` per worker writes everybody's messages in batches of `sink.max_batch` across
connections: with thousands of quiet connections a per-session flusher wrote one-message
batches and woke a timer per session (bench/RESULTS.md), while one writer fills its batches.

Per connection, messages are written in the order received, so each buffer's `checkpoint`
(the highest seq durably written) is exact and never ahead of the sink. Nothing is written
once its session's lease can no longer be trusted: such messages are dropped from the batch,
so a stale owner never writes under an old fencing token.
"""

import asyncio
import collections
import logging
import sys

from application.errors import SinkUnavailable
from application.ports.metrics import INGEST_LAG_MS, MESSAGES_INGESTED, SINK_ERRORS
from application.ports.sink import StoredMessage
from application.worker.backoff import Backoff
from application.worker.context import WorkerContext
from application.worker.lease_keeper import LeaseKeeper

log = logging.getLogger(__name__)


class Fenced(Exception):
    """The lease can no longer be trusted; stop reading and writing."""


class IngestBuffer:
    """One session's share of the writer: its bounds, its checkpoint, what is still pending.

    Bounded in messages and in bytes (the memory the pending texts hold): 1,000 messages of
    up to 1 MiB each would be a gigabyte per connection. A message larger than the byte bound
    is still taken when nothing else is pending, so that it cannot stall the stream."""

    def __init__(
        self,
        writer: "IngestWriter",
        lease: LeaseKeeper,
        checkpoint_seq: int,
        capacity: int,
        capacity_bytes: int,
    ) -> None:
        self._writer = writer
        self.lease = lease
        self.checkpoint = checkpoint_seq  # highest seq durably stored
        self.next_seq = checkpoint_seq + 1  # the next seq the receive loop expects
        self.pending = 0
        self.pending_bytes = 0
        self._capacity = capacity
        self._capacity_bytes = capacity_bytes
        self._sizes: collections.deque[int] = collections.deque()  # per pending message
        # Made only while put waits for room (most buffers never do): one object fewer each.
        self._room: asyncio.Future[None] | None = None

    async def put(self, seq: int, data: str) -> None:
        """Queue one message for writing; waits while this session's buffer is full.
        Raises Fenced once the lease is not trusted."""
        if not self.lease.valid():
            raise Fenced
        size = sys.getsizeof(data)
        while self.pending and (
            self.pending >= self._capacity or self.pending_bytes + size > self._capacity_bytes
        ):
            self._room = asyncio.get_running_loop().create_future()
            await self._room
        if not self.lease.valid():
            raise Fenced
        self.next_seq = seq + 1
        self.pending += 1
        self.pending_bytes += size
        self._sizes.append(size)
        self._writer.submit(self, seq, data)

    async def drain(self) -> None:
        """Write everything this session has pending. Raises Fenced if some of it could not
        be written because the lease stopped being trusted first."""
        await self._writer.flush()
        if self.pending:
            raise Fenced

    def _settled(self, seq: int | None) -> None:
        """The writer is done with one message: stored (its seq) or dropped (None). Messages
        of one buffer settle in the order they were put."""
        if seq is not None:
            self.checkpoint = seq
        self.pending -= 1
        self.pending_bytes -= self._sizes.popleft()
        if self._room is not None and not self._room.done():
            self._room.set_result(None)


class IngestWriter:
    """The worker's single sink writer (owned by the Worker, run as one of its loops)."""

    def __init__(self, ctx: WorkerContext) -> None:
        self._ctx = ctx
        self._queue: collections.deque[tuple[IngestBuffer, StoredMessage]] = collections.deque()
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()  # one batch in flight at a time keeps per-connection order
        self._backoff = Backoff(0.05, 2.0, ctx.rng)
        # Since start, for the metrics loop: it publishes the received count's growth and
        # watches the stored count move (plain sums: no metrics call per message).
        self.received = 0
        self.stored = 0

    def buffer(self, lease: LeaseKeeper, checkpoint_seq: int) -> IngestBuffer:
        config = self._ctx.config
        return IngestBuffer(
            self, lease, checkpoint_seq, config.ingest_buffer_messages, config.ingest_buffer_bytes
        )

    def submit(self, buffer: IngestBuffer, seq: int, data: str) -> None:
        lease = buffer.lease
        message = StoredMessage(
            connection_id=lease.connection_id,
            seq=seq,
            data=data,
            received_at_ms=self._ctx.clock.now_ms(),
            worker_id=self._ctx.worker_id,
            token=lease.token,
        )
        self._queue.append((buffer, message))
        self._wake.set()

    async def run(self) -> None:
        """Flush a full batch at once, a partial one a flush interval after its first message;
        sleep while there is nothing to write."""
        interval = self._ctx.config.ingest_flush_interval_s
        while True:
            await self._wake.wait()
            if len(self._queue) < self._ctx.sink.max_batch:
                await self._ctx.clock.sleep(interval)
            self._wake.clear()
            await self.flush()

    async def flush(self) -> None:
        """Write everything queued so far, in order, one batch at a time."""
        async with self._lock:
            while self._queue:
                batch = self._next_batch()
                if batch:
                    await self._write(batch)

    def _next_batch(self) -> list[tuple[IngestBuffer, StoredMessage]]:
        batch: list[tuple[IngestBuffer, StoredMessage]] = []
        while self._queue and len(batch) < self._ctx.sink.max_batch:
            buffer, message = self._queue.popleft()
            if buffer.lease.valid():
                batch.append((buffer, message))
            else:
                buffer._settled(None)  # fenced: never written under a stale token
        return batch

    async def _write(self, batch: list[tuple[IngestBuffer, StoredMessage]]) -> None:
        attempt = 0
        while batch:
            try:
                await self._ctx.sink.write([message for _, message in batch])
            except SinkUnavailable as exc:
                attempt += 1
                self._ctx.metrics.count(SINK_ERRORS)
                log.warning("sink write of %d failed (attempt %d): %s", len(batch), attempt, exc)
                await self._ctx.clock.sleep(self._backoff.delay(attempt))
                kept = [(b, m) for b, m in batch if b.lease.valid()]
                for buffer, _ in batch:
                    if not buffer.lease.valid():
                        buffer._settled(None)
                batch = kept
                continue
            for buffer, message in batch:
                buffer._settled(message.seq)
            # One sample per batch, its oldest message's (the queue is in receipt order): the
            # worst lag of the batch, at a metrics call per batch instead of per message.
            oldest_ms = batch[0][1].received_at_ms
            self._ctx.metrics.timing(INGEST_LAG_MS, self._ctx.clock.now_ms() - oldest_ms)
            self._ctx.metrics.count(MESSAGES_INGESTED, len(batch))
            self.stored += len(batch)
            return
