"""The sink writer, on virtual time: what it says when the sink refuses or fails a message (an
operator's only trace of a connection given up on), how it backs off a sink outage, and the
bounds of a session's buffer. Found by mutation testing (`make mutants`, bench/MUTANTS.md):
each of these survived the worker unit tier."""

import asyncio
import itertools
import logging
import sys
from collections.abc import Sequence

import pytest

from application.errors import SinkUnavailable
from application.ports import StoredMessage
from application.worker.ingest import IngestBuffer, Rejected
from tests.unit.test_ingest_writer_fencing import Harness, Lease

INGEST_LOG = "application.worker.ingest"


def _records(caplog: pytest.LogCaptureFixture, level: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == INGEST_LOG and r.levelno == level]


def _names(record: logging.LogRecord, cid: str, token: int) -> None:
    assert (record.__dict__["worker_id"], record.__dict__["connection_id"]) == ("w1", cid)
    assert record.__dict__["token"] == token


async def _three_messages(buffer: IngestBuffer) -> None:
    for seq in (1, 2, 3):
        await buffer.put(seq, f"m{seq}")


async def test_a_stale_refusal_is_logged_naming_the_seq_connection_and_token(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = Harness()
    await h.sink.write([StoredMessage("c1", 2, "m2", 1, "w2", 2, 1)])  # a newer owner wrote 2
    buffer, _ = h.buffer("c1", token=1)
    await _three_messages(buffer)

    with caplog.at_level(logging.INFO, logger=INGEST_LOG):
        await h.writer.flush()

    (record,) = _records(caplog, logging.WARNING)
    assert record.getMessage() == "sink refused seq 2: a newer owner wrote it"
    _names(record, "c1", 1)


async def test_an_unstorable_message_fails_its_connection_saying_which_seq(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = Harness()
    h.sink.max_message_bytes = 10
    buffer, _ = h.buffer("c1", token=3)
    await buffer.put(1, "m1")
    await buffer.put(2, "x" * 11)  # more than the sink stores

    with caplog.at_level(logging.INFO, logger=INGEST_LOG):
        await h.writer.flush()

    (record,) = _records(caplog, logging.ERROR)
    assert record.getMessage() == "sink cannot store seq 2: failing the connection"
    _names(record, "c1", 3)
    assert h.failures["c1"] == buffer.failure == "the sink cannot store seq 2"
    # Failed for good: nothing more is taken from its upstream, and the reason says why.
    with pytest.raises(Rejected, match=r"^the sink cannot store seq 2$"):
        await buffer.put(3, "m3")
    assert buffer.checkpoint == 1


async def test_other_data_for_a_stored_seq_is_logged_naming_the_seq_connection_and_token(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = Harness()
    await h.sink.write([StoredMessage("c1", 2, "first", 1, "w0", 1, 1)])
    buffer, _ = h.buffer("c1", token=2)
    await _three_messages(buffer)

    with caplog.at_level(logging.INFO, logger=INGEST_LOG):
        await h.writer.flush()

    (record,) = _records(caplog, logging.ERROR)
    assert record.getMessage() == (
        "seq 2 is stored already with different data: kept the stored copy, failing the connection"
    )
    _names(record, "c1", 2)


async def test_a_message_the_sink_fails_on_unexpectedly_is_logged_and_fails_its_connection(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = Harness()
    real_write = h.sink.write

    async def choke_on_seq_2(messages: Sequence[StoredMessage]) -> None:
        if any(m.seq == 2 for m in messages):
            raise RuntimeError("the sink's own bug")
        await real_write(messages)

    h.sink.write = choke_on_seq_2  # type: ignore[method-assign]
    buffer, _ = h.buffer("c1", token=4)
    await _three_messages(buffer)

    with caplog.at_level(logging.INFO, logger=INGEST_LOG):
        await h.writer.flush()

    (record,) = _records(caplog, logging.ERROR)
    assert record.getMessage() == (
        "the sink cannot store message seq 2 (its neighbours stored): failing its connection"
    )
    _names(record, "c1", 4)
    assert h.failures["c1"] == "the sink could not store seq 2"
    assert (h.sink.seqs("c1"), buffer.checkpoint) == ([1], 1)


async def test_a_sink_outage_is_retried_with_a_growing_back_off_and_logged_with_its_cause(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Back-off 0.05 s doubling, each delay in [cap/2, cap]: a writer that hammered a sink
    that is down (or waited the longest delay at once) would show here. While it fails, the
    writer is not keeping up (no balancing handoff starts then); once a write lands, it is."""
    h = Harness()
    real_write = h.sink.write
    attempts: list[float] = []

    async def timed_write(messages: Sequence[StoredMessage]) -> None:
        attempts.append(h.clock.monotonic())
        await real_write(messages)

    h.sink.write = timed_write  # type: ignore[method-assign]
    h.sink.fail_next(3)
    buffer, _ = h.buffer("c1")
    await _three_messages(buffer)

    with caplog.at_level(logging.INFO, logger=INGEST_LOG):
        flush = asyncio.create_task(h.writer.flush())
        await h.clock.run_until(lambda: len(attempts) >= 1, 1, step_s=0.001)
        assert not h.writer.keeping_up()
        await h.clock.run_until(flush.done, 5, step_s=0.001)
    await flush

    assert len(attempts) == 4
    gaps = [later - earlier for earlier, later in itertools.pairwise(attempts)]
    for gap, (low, high) in zip(gaps, [(0.025, 0.05), (0.05, 0.1), (0.1, 0.2)], strict=True):
        assert low - 1e-9 <= gap <= high + 1e-9, gaps
    assert buffer.checkpoint == 3
    assert h.writer.keeping_up()
    warnings = _records(caplog, logging.WARNING)
    assert [r.getMessage() for r in warnings] == [
        f"sink write of 3 failed (attempt {n}): injected sink failure" for n in (1, 2, 3)
    ]


async def test_messages_whose_trust_ended_during_an_outage_are_dropped_and_the_writer_lives() -> (
    None
):
    h = Harness()
    buffer, lease = h.buffer("c1")
    await _three_messages(buffer)

    async def down_and_fenced_meanwhile(messages: Sequence[StoredMessage]) -> None:
        lease.trusted = False  # the self-fence deadline passes while the sink is down
        raise SinkUnavailable("down")

    h.sink.write = down_and_fenced_meanwhile  # type: ignore[method-assign]
    flush = asyncio.create_task(h.writer.flush())
    await h.clock.run_until(flush.done, 5)
    await flush  # the writer did not die of it

    assert (buffer.pending, buffer.checkpoint) == (0, 0)
    assert h.sink.seqs("c1") == []


async def test_a_buffer_takes_messages_up_to_exactly_its_byte_bound() -> None:
    h = Harness()
    size = sys.getsizeof("m1")
    failed: list[str] = []
    lane = h.writer.lanes[0]
    buffer = IngestBuffer(lane, Lease("c1", 1), 0, 10, 2 * size, failed.append)  # type: ignore[arg-type]

    await asyncio.wait_for(buffer.put(1, "m1"), 1)
    await asyncio.wait_for(buffer.put(2, "m2"), 1)  # exactly at the bound: still taken
    third = asyncio.create_task(buffer.put(3, "m3"))
    await asyncio.sleep(0)
    assert not third.done(), "past the bound the receive loop waits"
    assert (buffer.pending, buffer.pending_bytes) == (2, 2 * size)

    await h.writer.flush()
    await asyncio.wait_for(third, 1)
    await h.writer.flush()
    assert buffer.checkpoint == 3


async def test_a_flush_writes_what_was_queued_when_it_began_in_sink_sized_batches() -> None:
    """A message that arrives during a flush waits for the next one: a drain that took in
    whatever kept arriving would never end under a steady inflow."""
    h = Harness()
    h.sink.max_batch = 2
    buffer, _ = h.buffer("c1")
    real_write = h.sink.write
    batches: list[list[int]] = []

    async def recorded(messages: Sequence[StoredMessage]) -> None:
        batches.append([m.seq for m in messages])
        if len(batches) == 1:
            await buffer.put(4, "m4")  # arrives while the first batch is written
        await real_write(messages)

    h.sink.write = recorded  # type: ignore[method-assign]
    await _three_messages(buffer)

    await h.writer.flush()

    assert batches == [[1, 2], [3]]
    assert (buffer.checkpoint, buffer.pending) == (3, 1)


async def test_what_is_stored_is_counted_once_with_the_lag_of_its_oldest_message() -> None:
    h = Harness()
    buffer, _ = h.buffer("c1")
    await buffer.put(1, "m1")
    await h.clock.advance(0.25)
    await buffer.put(2, "m2")
    await h.clock.advance(0.05)

    await h.writer.flush()

    assert h.metrics.counters["MessagesIngested"] == 2
    assert h.writer.stored == 2
    assert h.metrics.timings["IngestLagMs"] == [300]


async def test_the_writer_keeps_up_while_nothing_queued_waited_past_four_flush_intervals() -> None:
    h = Harness()  # flush interval 0.2 s: four of them are 800 ms
    assert h.writer.keeping_up()
    buffer, _ = h.buffer("c1")
    await buffer.put(1, "m1")
    await h.clock.advance(0.8)
    assert h.writer.keeping_up()
    await h.clock.advance(0.001)
    assert not h.writer.keeping_up()
