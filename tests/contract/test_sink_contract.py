"""The MessageSink contract: one suite, run unchanged against every sink (see conftest.py).
Each sink is read back through its own storage by a test-side reader (the port only writes)."""

import pytest

from application.errors import SinkRefused
from application.ports import StoredMessage
from application.ports.sink import MAX_SEQ
from tests.contract.conftest import SinkUnderTest


def message(
    seq: int, cid: str = "c1", data: str | None = None, token: int = 1, prev: int | None = None
) -> StoredMessage:
    """Seq `seq`, linked to `prev` (by default the seq just before: a contiguous stream)."""
    return StoredMessage(
        connection_id=cid,
        seq=seq,
        data=f"payload {seq}" if data is None else data,
        received_at_ms=1_700_000_000_000 + seq % 1_000_000,
        worker_id="w1",
        token=token,
        prev_seq=seq - 1 if prev is None else prev,
    )


async def write_all(sink: SinkUnderTest, messages: list[StoredMessage]) -> None:
    for start in range(0, len(messages), sink.sink.max_batch):
        await sink.sink.write(messages[start : start + sink.sink.max_batch])


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


@pytest.mark.needs("fencing")
async def test_a_write_under_an_older_token_than_the_rows_is_refused(sink: SinkUnderTest) -> None:
    newer = message(2, token=5)
    await sink.sink.write([newer])

    with pytest.raises(SinkRefused) as refused:
        await sink.sink.write([message(1, token=4), message(2, token=4), message(3, token=4)])

    assert refused.value.stale == {("c1", 2)}
    assert refused.value.conflicts == set()
    assert refused.value.invalid == set()
    assert await sink.read("c1") == [message(1, token=4), newer, message(3, token=4)]


@pytest.mark.needs("fencing")
async def test_a_stale_token_with_other_data_is_refused_as_stale(sink: SinkUnderTest) -> None:
    await sink.sink.write([message(1, token=5)])

    with pytest.raises(SinkRefused) as refused:
        await sink.sink.write([message(1, token=4, data="other")])

    assert refused.value.stale == {("c1", 1)}
    assert await sink.read("c1") == [message(1, token=5)]


@pytest.mark.needs("fencing")
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


async def test_a_prev_link_that_is_not_below_its_seq_is_refused_as_invalid(
    sink: SinkUnderTest,
) -> None:
    with pytest.raises(SinkRefused) as refused:
        await sink.sink.write([message(1), message(2, prev=2), message(3, prev=-2), message(4)])

    assert refused.value.invalid == {("c1", 2), ("c1", 3)}
    assert [m.seq for m in await sink.read("c1")] == [1, 4]


# The resume point (issue 12): where a new owner resumes, from what the sink stored, without a
# checkpoint written per heartbeat. From the checkpoint, each stored message whose prev link
# reaches what is already proven stored extends it; the first that does not is a hole.


@pytest.mark.needs("resume_point")
async def test_the_resume_point_of_nothing_stored_is_the_checkpoint(sink: SinkUnderTest) -> None:
    assert await sink.sink.resume_point("c1", 0) == 0
    assert await sink.sink.resume_point("c1", 42) == 42


@pytest.mark.needs("resume_point")
async def test_the_resume_point_of_a_contiguous_stream_is_its_last_seq(
    sink: SinkUnderTest,
) -> None:
    await sink.sink.write([message(seq) for seq in range(1, 8)])

    assert await sink.sink.resume_point("c1", 0) == 7
    assert await sink.sink.resume_point("c1", 3) == 7
    assert await sink.sink.resume_point("c1", 7) == 7


@pytest.mark.needs("resume_point")
async def test_the_resume_point_walks_across_upstream_gaps_linked_by_prev(
    sink: SinkUnderTest,
) -> None:
    # The upstream skipped 3-4 and 7-9 (jumps within the window): the links say nothing is
    # missing, though the seqs are not contiguous.
    await sink.sink.write([message(1), message(2), message(5, prev=2), message(6)])
    await sink.sink.write([message(10, prev=6), message(11)])

    assert await sink.sink.resume_point("c1", 0) == 11
    assert await sink.sink.resume_point("c1", 5) == 11


@pytest.mark.needs("resume_point")
async def test_a_link_reaching_below_what_is_proven_stored_still_links(
    sink: SinkUnderTest,
) -> None:
    # One owner received 5 right after 2 (3-4 skipped for it); a later one got 3 and 4
    # replayed and stored them. 5's link reaches past them: nothing is missing before 5.
    await sink.sink.write([message(1), message(2), message(5, prev=2)])
    await sink.sink.write([message(3, token=2), message(4, token=2)])

    assert await sink.sink.resume_point("c1", 0) == 5


@pytest.mark.needs("resume_point")
async def test_the_resume_point_stops_before_a_hole(sink: SinkUnderTest) -> None:
    # A batch of 1..8 whose writer died with 5 not stored (any subset of a batch may land).
    await sink.sink.write([message(seq) for seq in (1, 2, 3, 4, 6, 7, 8)])

    assert await sink.sink.resume_point("c1", 0) == 4
    assert await sink.sink.resume_point("c1", 5) == 8  # a checkpoint past the hole vouches for it


@pytest.mark.needs("resume_point")
async def test_the_resume_point_stops_before_a_hole_right_after_the_checkpoint(
    sink: SinkUnderTest,
) -> None:
    await sink.sink.write([message(seq) for seq in (3, 4)])  # 2 never landed

    assert await sink.sink.resume_point("c1", 1) == 1


@pytest.mark.needs("resume_point")
async def test_the_resume_point_stops_before_a_hole_across_an_upstream_gap(
    sink: SinkUnderTest,
) -> None:
    # 10 follows 6 in the stream (7-9 skipped upstream), but 10 is lost: 11 links to it, not
    # to 6, so the gap is not bridged.
    await sink.sink.write([message(5), message(6), message(11, prev=10), message(12)])

    assert await sink.sink.resume_point("c1", 4) == 6


@pytest.mark.needs("resume_point")
async def test_messages_at_or_below_the_checkpoint_are_ignored(sink: SinkUnderTest) -> None:
    # Below the checkpoint a hole (2) and a link that reaches nothing (3 -> 1 with 2 lost):
    # the checkpoint vouches for everything up to it, so neither stops the walk.
    await sink.sink.write([message(1), message(3, prev=1), message(4), message(5), message(6)])
    await sink.sink.write([message(3, cid="c1-other")])

    assert await sink.sink.resume_point("c1", 4) == 6
    assert await sink.sink.resume_point("c1", 9) == 9  # never below the checkpoint


@pytest.mark.needs("resume_point")
async def test_another_connections_messages_are_never_counted(sink: SinkUnderTest) -> None:
    await sink.sink.write([message(1, "a"), message(2, "a"), message(3, "a")])
    # b's stream would fill a's hole at 4 and extend it, if it were read as a's; ids that
    # share a prefix with a's too.
    await sink.sink.write([message(4, "b"), message(4, "a1"), message(4, "aa"), message(5, "a")])

    assert await sink.sink.resume_point("a", 0) == 3
    assert await sink.sink.resume_point("b", 0) == 0
    assert await sink.sink.resume_point("b", 3) == 4


@pytest.mark.needs("resume_point")
async def test_a_rewrite_stores_the_rewriters_prev_link(sink: SinkUnderTest) -> None:
    # A wrote 4 linked to 3, and 3 never landed; B (newer token) received 4 right after 2,
    # the upstream having skipped 3 for it, and rewrote 4 with the same data.
    await sink.sink.write([message(1), message(2), message(4)])
    assert await sink.sink.resume_point("c1", 0) == 2

    await sink.sink.write([message(4, token=2, prev=2)])

    assert await sink.sink.resume_point("c1", 0) == 4
    assert (await sink.read("c1"))[-1] == message(4, token=2, prev=2)


@pytest.mark.needs("resume_point")
async def test_the_resume_point_is_found_across_many_pages(sink: SinkUnderTest) -> None:
    # 240 messages: several pages of the DynamoDB sink under test (conftest.py pages it by
    # DYNAMODB_QUERY_PAGE items; tests/integration/test_dynamodb_sink.py has its 1 MB pages).
    stream = [message(seq) for seq in range(1, 241)]
    await write_all(sink, stream[:170] + stream[171:])  # 171 was never stored

    assert await sink.sink.resume_point("c1", 0) == 170

    await sink.sink.write([stream[170]])

    assert await sink.sink.resume_point("c1", 0) == 240
    assert await sink.sink.resume_point("c1", 120) == 240
