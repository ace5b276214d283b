"""The Kinesis record format (adapters/kinesis/records.py): a connection's messages of a batch
aggregated into records within the service's limit, read back in order; records of the
single-message format written before aggregation still read; foreign records skipped."""

import json

from adapters.kinesis.message_sink import MAX_MESSAGE_BYTES
from adapters.kinesis.records import RECORD_LIMIT_BYTES, messages_of, records_of
from application.ports.sink import MAX_SEQ, StoredMessage


def message(seq: int, cid: str = "c1", data: str | None = None, token: int = 1) -> StoredMessage:
    text = f'{{"seq": {seq}}}' if data is None else data
    return StoredMessage(cid, seq, text, 1_700_000_000_000 + seq, "w1#1", token, seq - 1)


def test_a_connections_run_is_one_record_read_back_in_order() -> None:
    run = [message(seq, data=f"é \x01 {seq}") for seq in range(1, 301)]

    records, refused = records_of("c1", run)

    assert refused == []
    assert [r.messages for r in records] == [300]
    (record,) = records
    assert record.entry["PartitionKey"] == "c1"
    assert record.size == len(record.entry["Data"]) + len(b"c1")
    assert json.loads(record.entry["Data"])["format"] == 2
    assert messages_of(record.entry["Data"]) == run


def test_a_run_larger_than_a_record_is_split_at_the_limit_in_order() -> None:
    run = [message(seq, data="x" * 300_000) for seq in range(1, 8)]

    records, refused = records_of("c1", run)

    assert refused == []
    assert [r.messages for r in records] == [3, 3, 1]
    assert all(r.size <= RECORD_LIMIT_BYTES for r in records)
    assert all(r.size == len(r.entry["Data"]) + 2 for r in records)
    assert [m for r in records for m in messages_of(r.entry["Data"])] == run


def test_a_message_too_large_for_a_record_alone_is_refused_alone() -> None:
    escaped = message(2, data="\x01" * (MAX_MESSAGE_BYTES // 2))  # 6 bytes each in JSON
    records, refused = records_of("c1", [message(1), escaped, message(3)])

    assert refused == [escaped]
    assert [m.seq for r in records for m in messages_of(r.entry["Data"])] == [1, 3]


def test_the_largest_message_the_sink_states_fits_a_record_alone_at_worst() -> None:
    """GIVEN the longest ids, escaped at six bytes a character, and the largest numbers: a
    message of max_message_bytes still fits a record of its own."""
    cid, worker = "\x01" * 128, "\x01" * 256
    largest = StoredMessage(cid, MAX_SEQ, "x" * MAX_MESSAGE_BYTES, MAX_SEQ, worker, MAX_SEQ, -1)

    records, refused = records_of(cid, [largest])

    assert refused == []
    assert records[0].size <= RECORD_LIMIT_BYTES
    assert messages_of(records[0].entry["Data"]) == [largest]


def test_a_single_message_record_of_before_aggregation_is_still_read() -> None:
    old = {
        "connection_id": "c1",
        "seq": 7,
        "prev_seq": 6,
        "data": '{"seq": 7}',
        "token": 1,
        "worker_session": "w1#1",
        "received_at_ms": 1_700_000_000_007,
    }
    assert messages_of(json.dumps(old).encode()) == [message(7)]


def test_records_of_other_producers_or_a_later_format_hold_no_messages() -> None:
    later = {"format": 3, "connection_id": "c1", "messages": []}
    half = {"format": 2, "connection_id": "c1", "messages": [{"seq": 1}]}
    for data in (b"not json", b"[1, 2]", b'{"seq": 1}', json.dumps(later).encode()):
        assert messages_of(data) == []
    assert messages_of(json.dumps(half).encode()) == []
