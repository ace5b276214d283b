"""IngestBuffer: a bounded, batched path from the upstream to the message sink.

The receive loop `put`s messages; when the buffer is full it waits (back-pressure reaches the
upstream socket) instead of dropping or growing. A flusher writes batches of `sink.max_batch`
in order, so `checkpoint` (the highest seq durably written) is always exact and never ahead of
the sink. Nothing is written once the lease can no longer be trusted (self-fencing): a stale
owner never writes under its old fencing token.
"""

import asyncio
import collections
import logging

from application.aio import wait_or_timeout
from application.errors import SinkUnavailable
from application.ports.metrics import MESSAGES_INGESTED
from application.ports.sink import StoredMessage
from application.worker.backoff import Backoff
from application.worker.context import WorkerContext
from application.worker.lease_keeper import LeaseKeeper

log = logging.getLogger(__name__)


class Fenced(Exception):
    """The lease can no longer be trusted; stop reading and writing."""


class IngestBuffer:
    def __init__(self, ctx: WorkerContext, lease: LeaseKeeper, checkpoint_seq: int) -> None:
        self._ctx = ctx
        self._lease = lease
        self.checkpoint = checkpoint_seq  # highest seq durably stored
        self.next_seq = checkpoint_seq + 1  # the next seq the receive loop expects
        self._pending: collections.deque[StoredMessage] = collections.deque()
        self._space = asyncio.Semaphore(ctx.config.ingest_buffer_messages)
        self._batch_ready = asyncio.Event()
        self._has_pending = asyncio.Event()  # set by put: the flusher sleeps until then
        self._backoff = Backoff(0.05, 2.0, ctx.rng)

    async def put(self, seq: int, data: str) -> None:
        if not self._lease.valid():
            raise Fenced
        await self._space.acquire()
        self._pending.append(
            StoredMessage(
                connection_id=self._lease.connection_id,
                seq=seq,
                data=data,
                received_at_ms=self._ctx.clock.now_ms(),
                worker_id=self._ctx.worker_id,
                token=self._lease.token,
            )
        )
        self.next_seq = seq + 1
        self._has_pending.set()
        if len(self._pending) >= self._ctx.sink.max_batch:
            self._batch_ready.set()

    async def run_flusher(self) -> None:
        """Flush a full batch at once, a partial one a flush interval after its first message.
        An idle buffer costs no wake-ups: with thousands of sessions, a timer per session every
        interval was most of a worker's CPU (bench/RESULTS.md). Raises Fenced."""
        interval = self._ctx.config.ingest_flush_interval_s
        while True:
            await self._has_pending.wait()
            await wait_or_timeout(self._batch_ready, self._ctx.clock, interval)
            self._batch_ready.clear()
            await self._flush_available()
            if not self._pending:
                self._has_pending.clear()

    async def drain(self) -> None:
        """Write everything pending, while the lease is trusted. Raises Fenced."""
        await self._flush_available()

    async def _flush_available(self) -> None:
        while self._pending:
            batch = list(self._pending)[: self._ctx.sink.max_batch]
            await self._write(batch)
            for _ in batch:
                self._pending.popleft()
                self._space.release()
            self.checkpoint = batch[-1].seq
            self._ctx.metrics.count(MESSAGES_INGESTED, len(batch))

    async def _write(self, batch: list[StoredMessage]) -> None:
        attempt = 0
        while True:
            if not self._lease.valid():
                raise Fenced
            try:
                await self._ctx.sink.write(batch)
                return
            except SinkUnavailable as exc:
                attempt += 1
                log.warning(
                    "sink write failed (attempt %d): %s",
                    attempt,
                    exc,
                    extra=self._ctx.log_extra(self._lease.connection_id, self._lease.token),
                )
                await self._ctx.clock.sleep(
                    min(self._backoff.delay(attempt), max(0.0, self._lease.remaining_s()))
                )

    @property
    def pending(self) -> int:
        return len(self._pending)
