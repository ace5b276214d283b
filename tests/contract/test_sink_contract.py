"""The MessageSink contract: one suite, run unchanged against every sink (see conftest.py).
Each sink is read back through its own storage by a test-side reader (the port only writes)."""

import pytest

from application.errors import SinkRefused
from application.ports import StoredMessage
from application.ports.sink import MAX_SEQ
from tests.contract.conftest import SinkUnderTest


def message(seq: int, cid: str = "c1", data: str | None = None, token: int = 1) -> StoredMessage:
    return StoredMessage(
        connection_id=cid,
        seq=seq,
        data=f"payload {seq}" if data is None else data,
        received_at_ms=1_700_000_000_000 + seq % 1_000_000,
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


# Fencing (issue 13): the sink, like the store, refuses what a stale owner writes, and never
# lets one seq hold two contents silently. Refused messages are named; the rest is stored.


async def test_a_write_under_an_older_token_than_the_rows_is_refused(sink: SinkUnderTest) -> None:
    newer = message(2, token=5)
    await sink.sink.write([newer])

    with pytest.raises(SinkRefused) as refused:
        await sink.sink.write([message(1, token=4), message(2, token=4), message(3, token=4)])

    assert refused.value.stale == {("c1", 2)}
    assert refused.value.conflicts == set()
    assert refused.value.invalid == set()
    assert await sink.read("c1") == [message(1, token=4), newer, message(3, token=4)]


async def test_a_stale_token_with_other_data_is_refused_as_stale(sink: SinkUnderTest) -> None:
    await sink.sink.write([message(1, token=5)])

    with pytest.raises(SinkRefused) as refused:
        await sink.sink.write([message(1, token=4, data="other")])

    assert refused.value.stale == {("c1", 1)}
    assert await sink.read("c1") == [message(1, token=5)]


async def test_other_data_for_a_stored_seq_is_refused_as_a_conflict_and_kept(
    sink: SinkUnderTest,
) -> None:
    first = message(1, data="first", token=1)
    await sink.sink.write([first])

    with pytest.raises(SinkRefused) as refused:
        await sink.sink.write([message(1, data="second", token=2), message(2, token=2)])

    assert refused.value.conflicts == {("c1", 1)}
    assert refused.value.stale == set()
    assert await sink.read("c1") == [first, message(2, token=2)]


async def test_a_message_of_max_message_bytes_is_stored_and_one_byte_more_refused(
    sink: SinkUnderTest,
) -> None:
    limit = sink.sink.max_message_bytes
    largest = message(1, data="é" * (limit // 2) + "x" * (limit % 2))  # counted in UTF-8 bytes
    too_large = message(2, data="x" * (limit + 1))

    with pytest.raises(SinkRefused) as refused:
        await sink.sink.write([largest, too_large, message(3)])

    assert refused.value.invalid == {("c1", 2)}
    assert await sink.read("c1") == [largest, message(3)]


async def test_seqs_are_stored_up_to_max_seq_and_beyond_it_refused(sink: SinkUnderTest) -> None:
    with pytest.raises(SinkRefused) as refused:
        await sink.sink.write([message(0), message(MAX_SEQ), message(MAX_SEQ + 1)])

    assert refused.value.invalid == {("c1", MAX_SEQ + 1)}
    assert [m.seq for m in await sink.read("c1")] == [0, MAX_SEQ]
