"""The ingest buffer of one connection is bounded in bytes as well as in messages: a stream
of large messages waits (back-pressure reaches its socket) instead of holding
ingest_buffer_messages x max message size in memory."""

import asyncio
import sys
from typing import Any

import pytest

from adapters.memory.clock import FakeClock
from adapters.memory.metrics import InMemoryMetrics
from adapters.memory.sink import InMemoryMessageSink
from application.config import WorkerConfig
from application.worker.ingest import IngestBuffer, IngestWriter
from tests.support.leases import trusted_lease, worker_context

KIB_100 = "x" * 100_000
SIZE = sys.getsizeof(KIB_100)


async def writer_and_buffer(
    **config: Any,
) -> tuple[IngestWriter, IngestBuffer, InMemoryMessageSink]:
    clock = FakeClock()
    sink = InMemoryMessageSink()
    ctx = worker_context(clock, InMemoryMetrics(), config=WorkerConfig(**config), sink=sink)
    writer = IngestWriter(ctx)  # its run loop is not started: only flush() writes
    failures: list[str] = []  # a buffer's own failures; none expected here
    lease = await trusted_lease(ctx, "c1")
    return writer, writer.buffer(lease, 0, failures.append), sink


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_puts_wait_once_the_pending_bytes_would_pass_the_bound() -> None:
    writer, buffer, sink = await writer_and_buffer(ingest_buffer_bytes=3 * SIZE - 1)
    await buffer.put(1, KIB_100)
    await buffer.put(2, KIB_100)

    third = asyncio.create_task(buffer.put(3, KIB_100))
    await settle()
    assert not third.done()  # 3 x 100 kB would pass the bound, though 3 < 1,000 messages
    assert (buffer.pending, buffer.pending_bytes) == (2, 2 * SIZE)

    await writer.flush()  # the two are stored: room again
    await asyncio.wait_for(third, 1)
    assert (buffer.pending, buffer.pending_bytes, buffer.checkpoint) == (1, SIZE, 2)
    await writer.flush()
    assert (buffer.pending_bytes, len(sink.messages)) == (0, 3)


async def test_a_message_larger_than_the_bound_is_taken_alone() -> None:
    writer, buffer, _ = await writer_and_buffer(ingest_buffer_bytes=1_000)
    await asyncio.wait_for(buffer.put(1, KIB_100), 1)  # empty buffer: never stalls the stream

    second = asyncio.create_task(buffer.put(2, "small"))
    await settle()
    assert not second.done()

    await writer.flush()
    await asyncio.wait_for(second, 1)


@pytest.mark.parametrize("messages", [1, 3])
async def test_the_message_bound_still_holds_for_small_messages(messages: int) -> None:
    writer, buffer, _ = await writer_and_buffer(ingest_buffer_messages=messages)
    for seq in range(1, messages + 1):
        await buffer.put(seq, "small")

    blocked = asyncio.create_task(buffer.put(messages + 1, "small"))
    await settle()
    assert not blocked.done()
    await writer.flush()
    await asyncio.wait_for(blocked, 1)
