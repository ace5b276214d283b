"""The MessageSink contract: one suite, run unchanged against every sink (see conftest.py).
Each sink is read back through its own storage by a test-side reader (the port only writes)."""

import pytest

from application.ports import StoredMessage
from tests.contract.conftest import SinkUnderTest


def message(seq: int, cid: str = "c1", data: str | None = None, token: int = 1) -> StoredMessage:
    return StoredMessage(
        connection_id=cid,
        seq=seq,
        data=f"payload {seq}" if data is None else data,
        received_at_ms=1_700_000_000_000 + seq,
        worker_id="w1",
        token=token,
    )


async def test_written_messages_are_read_back_in_seq_order(sink: SinkUnderTest) -> None:
    batch = [message(seq) for seq in (3, 1, 2)]

    await sink.sink.write(batch)

    assert await sink.read("c1") == sorted(batch, key=lambda m: m.seq)


async def test_writing_a_seq_again_leaves_one_copy(sink: SinkUnderTest) -> None:
    await sink.sink.write([message(1), message(2)])
    await sink.sink.write([message(2), message(3)])  # a retried, overlapping batch
    rewritten = message(3, token=2)  # a new owner re-receiving the same seq
    await sink.sink.write([rewritten])

    stored = await sink.read("c1")

    assert [m.seq for m in stored] == [1, 2, 3]
    assert stored[-1] == rewritten


async def test_a_batch_of_exactly_max_batch_is_stored_whole(sink: SinkUnderTest) -> None:
    batch = [message(seq) for seq in range(1, sink.sink.max_batch + 1)]

    await sink.sink.write(batch)

    assert await sink.read("c1") == batch


async def test_a_batch_larger_than_max_batch_is_refused_and_nothing_stored(
    sink: SinkUnderTest,
) -> None:
    with pytest.raises(ValueError, match="max_batch"):
        await sink.sink.write([message(seq) for seq in range(sink.sink.max_batch + 1)])
    assert await sink.read("c1") == []


async def test_duplicate_seqs_within_one_batch_store_one_copy(sink: SinkUnderTest) -> None:
    batch = [message(1), message(2), message(1), message(2), message(3)]

    await sink.sink.write(batch)

    assert [m.seq for m in await sink.read("c1")] == [1, 2, 3]


async def test_connections_are_stored_apart(sink: SinkUnderTest) -> None:
    await sink.sink.write([message(1, "a"), message(1, "b", data="other"), message(2, "a")])

    assert [m.seq for m in await sink.read("a")] == [1, 2]
    assert await sink.read("b") == [message(1, "b", data="other")]
    assert await sink.read("c") == []


async def test_an_empty_batch_is_a_no_op(sink: SinkUnderTest) -> None:
    await sink.sink.write([])

    assert await sink.read("c1") == []


async def test_payloads_are_stored_exactly(sink: SinkUnderTest) -> None:
    odd = ['{"seq": 1, "data": "ünïcode ✓"}', "", "x" * 20_000, "line\nbreak\ttab"]
    batch = [message(seq, data=data) for seq, data in enumerate(odd, start=1)]

    await sink.sink.write(batch)

    assert await sink.read("c1") == batch
