"""The bounded, batched path from upstreams to the message sink.

Each session `put`s into its own `IngestBuffer`; when that buffer is full the receive loop
waits (back-pressure reaches the upstream socket) instead of dropping or growing. One
`IngestWriter` per worker writes everybody's messages in batches of `sink.max_batch` across
connections: with thousands of quiet connections a per-session flusher wrote one-message
batches and woke a timer per session (bench/RESULTS.md), while one writer fills its batches.

Per connection, messages are written in the order received, and each buffer's `checkpoint`
(the highest seq durably written) only ever covers messages stored without a gap: once one of
its messages is not stored (dropped, refused, lost), the checkpoint stays where it is, and the
next owner resumes from there. Nothing is written once its session's lease can no longer be
trusted, and a write that returns after trust ended does not count as stored.

The writer is shared, so it must not die of one connection's message, nor fail every
connection for an outage. A batch the sink fails on in a way it does not name is split until
each message is alone: a message that fails while its neighbours store fails its connection
(with the persisted upstream back-off), and nobody else's; if nothing stores, it is an outage,
retried with back-off while the sessions keep their leases (their buffers fill, and reading
their upstreams pauses).
"""

import asyncio
import collections
import logging
import sys
import zlib
from collections.abc import Callable

from application.errors import SinkRefused, SinkUnavailable
from application.ports.metrics import INGEST_LAG_MS, MESSAGES_INGESTED, SEQ_CONFLICTS, SINK_ERRORS
from application.ports.sink import StoredMessage
from application.worker.backoff import Backoff
from application.worker.context import WorkerContext
from application.worker.lease import Lease

log = logging.getLogger(__name__)


class Fenced(Exception):
    """The lease can no longer be trusted; stop reading and writing."""


class Rejected(Exception):
    """The connection's upstream sent something the sink will not store; stop reading."""


class IngestBuffer:
    """One session's share of the writer: its bounds, its checkpoint, what is still pending.

    Bounded in messages and in bytes (the memory the pending texts hold): 1,000 messages of
    up to 1 MiB each would be a gigabyte per connection. A message larger than the byte bound
    is still taken when nothing else is pending, so that it cannot stall the stream."""

    def __init__(
        self,
        writer: "IngestLane",
        lease: Lease,
        checkpoint_seq: int,
        capacity: int,
        capacity_bytes: int,
        on_failure: Callable[[str], None],
    ) -> None:
        self._writer = writer
        self.lease = lease
        self.checkpoint = checkpoint_seq  # highest seq durably stored, with no gap before it
        self.next_seq = checkpoint_seq + 1  # the next seq the receive loop expects
        self.pending = 0
        self.failure: str | None = None  # why the writer failed this connection's upstream
        self._on_failure = on_failure
        self.pending_bytes = 0
        self._capacity = capacity
        self._capacity_bytes = capacity_bytes
        self._sizes: collections.deque[int] = collections.deque()  # per pending message
        # Made only while put waits for room (most buffers never do): one object fewer each.
        self._room: asyncio.Future[None] | None = None
        self._submitted = 0  # tickets handed out, in receive order
        self._next_settled = 0  # the ticket that must settle next for the checkpoint to move
        self._gap = False  # a message was not stored: the checkpoint never moves again

    @property
    def stalled(self) -> bool:
        """A message was not stored (dropped, refused, lost): the checkpoint never moves again."""
        return self._gap

    async def put(self, seq: int, data: str) -> None:
        """Queue one message for writing; waits while this session's buffer is full.
        Raises Fenced once the lease is not trusted, Rejected once the connection failed."""
        self._check()
        size = sys.getsizeof(data)
        while self.pending and (
            self.pending >= self._capacity or self.pending_bytes + size > self._capacity_bytes
        ):
            self._room = asyncio.get_running_loop().create_future()
            await self._room
        self._check()
        prev_seq = self.next_seq - 1  # the last seq accepted (or resumed from): the prev link
        self.next_seq = seq + 1
        self.pending += 1
        self.pending_bytes += size
        self._sizes.append(size)
        self._submitted += 1
        self._writer.submit(self, self._submitted - 1, seq, prev_seq, data)

    def _check(self) -> None:
        if self.failure is not None:
            raise Rejected(self.failure)
        if not self.lease.valid():
            raise Fenced

    async def drain(self) -> None:
        """Write everything this session has pending. Raises Fenced if some of it could not
        be written because the lease stopped being trusted first."""
        await self._writer.flush()
        if self.pending:
            raise Fenced

    def fail(self, reason: str) -> None:
        """The upstream sent what cannot be stored: this connection's fault alone."""
        if self.failure is None:
            self.failure = reason
            self._on_failure(reason)

    def _settled(self, ticket: int, seq: int, stored: bool) -> None:
        """The writer is done with one message: stored, or not (dropped or refused)."""
        if ticket != self._next_settled or not stored:
            self._gap = True  # an earlier message never settled, or this one is not stored
        self._next_settled = ticket + 1
        if not self._gap:
            self.checkpoint = seq
        self.pending -= 1
        self.pending_bytes -= self._sizes.popleft()
        if self._room is not None and not self._room.done():
            self._room.set_result(None)


_Entry = tuple[IngestBuffer, int, StoredMessage]  # (buffer, ticket, message)


class IngestWriter:
    """The worker's sink writer (owned by the Worker, run as one of its loops): one lane per
    `ingest_writers`, each connection's messages always in the same lane, each lane with one
    batch in flight. Per-connection order holds in every lane; lanes side by side keep a
    sink whose requests take tens of milliseconds busy (one batch in flight capped a worker
    on DynamoDB Local at about 1,700 messages/s)."""

    def __init__(self, ctx: WorkerContext) -> None:
        self._ctx = ctx
        self.lanes = [IngestLane(ctx, self) for _ in range(ctx.config.ingest_writers)]
        # Since start, plain sums (no metrics call per message): the received count is read
        # where metrics are published, the stored count watched by the metrics loop.
        self.received = 0
        self.stored = 0

    def buffer(
        self, lease: Lease, checkpoint_seq: int, on_failure: Callable[[str], None]
    ) -> IngestBuffer:
        config = self._ctx.config
        lane = self.lanes[zlib.crc32(lease.connection_id.encode()) % len(self.lanes)]
        return IngestBuffer(
            lane,
            lease,
            checkpoint_seq,
            config.ingest_buffer_messages,
            config.ingest_buffer_bytes,
            on_failure,
        )

    def close(self) -> None:
        """Write nothing more (the worker is failing): whatever is queued or submitted from
        now on is dropped, so every checkpoint stays behind it."""
        for lane in self.lanes:
            lane.close()

    async def run(self) -> None:
        async with asyncio.TaskGroup() as lanes:
            for n, lane in enumerate(self.lanes):
                lanes.create_task(lane.run(), name=f"ingest-lane:{n}")

    async def flush(self) -> None:
        """Write everything queued when called, in every lane."""
        await asyncio.gather(*(lane.flush() for lane in self.lanes))

    def keeping_up(self) -> bool:
        """Every lane keeps up (IngestLane.keeping_up)."""
        return all(lane.keeping_up() for lane in self.lanes)


class IngestLane:
    """One lane of the writer: its queue, its one batch in flight, its outage back-off."""

    def __init__(self, ctx: WorkerContext, counts: IngestWriter) -> None:
        self._ctx = ctx
        self._counts = counts
        self._queue: collections.deque[_Entry] = collections.deque()
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()  # one batch in flight at a time keeps per-connection order
        self._backoff = Backoff(0.05, 2.0, ctx.rng)
        self._closed = False
        self._failing = False  # the last write failed (SinkUnavailable) and none succeeded since
        self._attempts = 0  # writes failed in a row (an outage), for the back-off

    @property
    def queued(self) -> int:
        return len(self._queue)

    def submit(self, buffer: IngestBuffer, ticket: int, seq: int, prev_seq: int, data: str) -> None:
        lease = buffer.lease
        message = StoredMessage(
            connection_id=lease.connection_id,
            seq=seq,
            data=data,
            received_at_ms=self._ctx.clock.now_ms(),
            worker_id=lease.session_id,  # the worker session that received it
            token=lease.token,
            prev_seq=prev_seq,
        )
        self._queue.append((buffer, ticket, message))
        self._wake.set()

    def close(self) -> None:
        """Write nothing more (the worker is failing): whatever is queued or submitted from
        now on is dropped, so every checkpoint stays behind it."""
        self._closed = True

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
        """Write everything queued when called, in order, one batch at a time — not what
        arrives meanwhile: under a steady inflow the queue is never empty, and a session's
        drain that waited for that would never end. A batch the sink could not take (an
        outage) goes back to the front of the queue, after a back-off: the next batch is it
        and whatever followed, so an outage is retried for as long as it lasts, and a message
        that fails alone is found beside neighbours that store."""
        async with self._lock:
            left = len(self._queue)
            while left > 0 and self._queue:
                batch, taken = self._next_batch(left)
                left -= taken
                if not batch:
                    continue
                again = await self._write(batch)
                if not again:
                    self._attempts = 0
                    continue
                self._attempts += 1
                self._failing = True
                self._queue.extendleft(reversed(again))
                left += len(again)
                await self._ctx.clock.sleep(self._backoff.delay(self._attempts))

    def _next_batch(self, limit: int) -> tuple[list[_Entry], int]:
        """Up to a sink batch of writable entries from the first `limit` queued; returns
        them and how many entries were taken off the queue (unwritable ones are dropped)."""
        batch: list[_Entry] = []
        taken = 0
        while self._queue and taken < limit and len(batch) < self._ctx.sink.max_batch:
            entry = self._queue.popleft()
            taken += 1
            if self._writable(entry[0]):
                batch.append(entry)
            else:
                _drop(entry)  # fenced or failed: never written under a stale token
        return batch, taken

    def _writable(self, buffer: IngestBuffer) -> bool:
        return not self._closed and buffer.failure is None and buffer.lease.valid()

    async def _write(self, batch: list[_Entry]) -> list[_Entry]:
        """Write one batch; returns what to write again after a back-off (in order)."""
        try:
            await self._ctx.sink.write([message for _, _, message in batch])
        except SinkUnavailable as exc:
            self._unavailable(batch, exc)
            return batch
        except SinkRefused as refused:
            self._settle(batch, refused)
            return []
        except Exception:
            return await self._isolate(batch)
        self._failing = False
        self._settle(batch, None)
        return []

    def _unavailable(self, batch: list[_Entry], exc: Exception) -> None:
        self._ctx.metrics.count(SINK_ERRORS)
        log.warning("sink write of %d failed (attempt %d): %s", len(batch), self._attempts + 1, exc)

    def keeping_up(self) -> bool:
        """The sink takes writes as they come: the last write did not fail, and nothing queued
        has waited longer than a few flush intervals. A balancing handoff drains before it
        releases, so one started while the sink is down or behind would leave its stream
        without a subscriber for as long."""
        if self._failing:
            return False
        if not self._queue:
            return True
        waited_ms = self._ctx.clock.now_ms() - self._queue[0][2].received_at_ms
        return waited_ms <= 4 * self._ctx.config.ingest_flush_interval_s * 1000

    async def _isolate(self, batch: list[_Entry]) -> list[_Entry]:
        """The sink failed on this batch in a way it did not name: a bad message, or an outage
        of a sink that names none (a user's sink raising OSError). Written again in halves,
        in order, down to single messages: if some of it stores, each message that failed
        alone is at fault and only its connection fails; if none of it stores, the sink is
        down, and the whole batch is written again after a back-off. Returns what to write
        again."""
        probe = _Probe()
        stored, again = await self._probe(batch, probe)
        if not stored and probe.followers and not again:
            # Only one connection's messages failed alone and nothing else was written: an
            # outage, or a bad message with nobody beside it. A later message of that
            # connection, written alone, tells (stored out of order: the connection fails).
            stored = await self._witness(probe)
        if not stored:
            self._ctx.metrics.count(SINK_ERRORS)
            log.warning(
                "sink write of %d failed (attempt %d), each message alone too: an outage",
                len(batch),
                self._attempts + 1,
                exc_info=True,
            )
            return self._still_writable(probe.failed + again)
        for entry in probe.failed:
            buffer, _, message = entry
            if id(entry) in probe.culprits:
                log.error(
                    "the sink cannot store message seq %d (its neighbours stored): failing "
                    "its connection",
                    message.seq,
                    extra=self._ctx.log_extra(message.connection_id, message.token),
                )
                buffer.fail(f"the sink could not store seq {message.seq}")
            _drop(entry)
        return self._still_writable(again)

    async def _witness(self, probe: "_Probe") -> bool:
        """Write one message held behind a culprit alone: whether the sink took it."""
        witness = probe.followers[0]
        try:
            await self._ctx.sink.write([witness[2]])
        except SinkRefused as refused:
            self._settle([witness], refused)
        except Exception:
            return False
        else:
            self._settle([witness], None)
        probe.failed.remove(witness)
        return True

    async def _probe(self, batch: list[_Entry], probe: "_Probe") -> tuple[bool, list[_Entry]]:
        """Write `batch` in halves down to single messages, in order; the singles that fail
        in a way the sink does not name, and the later messages of their connections (never
        written past a message not stored), go to `probe`. Returns whether anything stored
        (or was refused by name: the sink answered), and what is left once the sink said it
        is unavailable (that and everything after it, in order)."""
        batch = self._still_writable(batch)
        if probe.connections:
            batch = [e for e in batch if not probe.behind_a_culprit(e)]
        if not batch:
            return False, []
        try:
            await self._ctx.sink.write([message for _, _, message in batch])
        except SinkUnavailable as exc:
            self._unavailable(batch, exc)
            return False, batch
        except SinkRefused as refused:
            self._settle(batch, refused)
            return True, []
        except Exception:
            if len(batch) == 1:
                probe.culprit(batch[0])
                return False, []
            half = len(batch) // 2
            stored, again = await self._probe(batch[:half], probe)
            if again:
                return stored, again + batch[half:]
            later, again = await self._probe(batch[half:], probe)
            return stored or later, again
        self._failing = False
        self._settle(batch, None)
        return True, []

    def _still_writable(self, batch: list[_Entry]) -> list[_Entry]:
        kept = []
        for entry in batch:
            if self._writable(entry[0]):
                kept.append(entry)
            else:
                _drop(entry)
        return kept

    def _settle(self, batch: list[_Entry], refused: SinkRefused | None) -> None:
        stored = 0
        for entry in batch:
            buffer, ticket, message = entry
            if refused is not None and self._refused(entry, refused):
                continue
            if not buffer.lease.valid():
                # Stored, but the write returned after trust ended: it cannot be counted, so
                # the checkpoint stays behind it (the next owner writes it again).
                _drop(entry)
            else:
                buffer._settled(ticket, message.seq, stored=True)
                stored += 1
        if stored:
            # One sample per batch, its oldest message's (the queue is in receipt order): the
            # worst lag of the batch, at a metrics call per batch instead of per message.
            oldest_ms = batch[0][2].received_at_ms
            self._ctx.metrics.timing(INGEST_LAG_MS, self._ctx.clock.now_ms() - oldest_ms)
            self._ctx.metrics.count(MESSAGES_INGESTED, stored)
            self._counts.stored += stored

    def _refused(self, entry: _Entry, refused: SinkRefused) -> bool:
        """Settle a message the sink refused (and act on why); False if it was not refused."""
        buffer, _, message = entry
        key = (message.connection_id, message.seq)
        if key not in refused.stale and key not in refused.invalid and key not in refused.conflicts:
            return False
        extra = self._ctx.log_extra(message.connection_id, message.token)
        _drop(entry)
        if key in refused.stale:
            # A newer token wrote this seq: another owner holds the connection now.
            log.warning("sink refused seq %d: a newer owner wrote it", message.seq, extra=extra)
            buffer.lease.lost("the sink holds a newer token")
        elif key in refused.invalid:
            log.error("sink cannot store seq %d: failing the connection", message.seq, extra=extra)
            buffer.fail(f"the sink cannot store seq {message.seq}")
        else:
            self._ctx.metrics.count(SEQ_CONFLICTS)
            log.error(
                "seq %d is stored already with different data: kept the stored copy, "
                "failing the connection",
                message.seq,
                extra=extra,
            )
            buffer.fail(f"the upstream sent different data for stored seq {message.seq}")
        return True


class _Probe:
    """What a probe of a failing batch found: the messages that failed alone (culprits) and,
    in order among them, the later messages of their connections, held back unwritten."""

    def __init__(self) -> None:
        self.failed: list[_Entry] = []
        self.followers: list[_Entry] = []
        self.culprits: set[int] = set()  # id() of the entries that failed alone
        self.connections: set[tuple[str, int]] = set()  # (connection, token) of the culprits

    def culprit(self, entry: _Entry) -> None:
        self.failed.append(entry)
        self.culprits.add(id(entry))
        self.connections.add((entry[2].connection_id, entry[2].token))

    def behind_a_culprit(self, entry: _Entry) -> bool:
        if (entry[2].connection_id, entry[2].token) not in self.connections:
            return False
        self.failed.append(entry)
        self.followers.append(entry)
        return True


def _drop(entry: _Entry) -> None:
    buffer, ticket, message = entry
    buffer._settled(ticket, message.seq, stored=False)
