"""The one mapping between stored messages and Kinesis records, each way.

A record holds a run of one connection's messages from one batch, in seq order (aggregated,
as the KPL does: a connection's batch is one record, so it goes in one request whatever its
rate). Its partition key is the connection id, so a connection's records go to one shard, in
the order they were put. Format 2 (`"format": 2`), the connection id once:

    {"format": 2, "connection_id": "...", "messages": [
        {"seq": 7, "prev_seq": 6, "data": "...", "token": 3, "worker_session": "w1-ab12#1",
         "received_at_ms": 1700000000007}, ...]}

Format 1, written before aggregation and still read (a stream keeps its records across a
rolling upgrade), has no "format" and one message: {"connection_id": "...", "seq": 7, ...}.
"""

import json
from collections.abc import Sequence
from typing import Any

import attrs

from application.ports.sink import StoredMessage

FORMAT = 2
# A record's data plus its partition key may take 1 MiB (the service's limit).
RECORD_LIMIT_BYTES = 1_048_576
_TAIL = b"]}"


@attrs.frozen
class Record:
    """A PutRecords entry, the messages it holds and its size against the service's limits."""

    entry: dict[str, Any]
    messages: int
    size: int


def _json(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def _element(message: StoredMessage) -> bytes:
    return _json(
        {
            "seq": message.seq,
            "prev_seq": message.prev_seq,
            "data": message.data,
            "token": message.token,
            "worker_session": message.worker_id,
            "received_at_ms": message.received_at_ms,
        }
    )


def records_of(
    connection_id: str, messages: Sequence[StoredMessage]
) -> tuple[list[Record], list[StoredMessage]]:
    """The records of one connection's messages (in the order given: the caller sorts them by
    seq), each as full as the record limit allows, and the messages too large for a record of
    their own (refused: data escapes to up to six bytes a character)."""
    key = connection_id.encode()
    head = b'{"format":%d,"connection_id":%s,"messages":[' % (FORMAT, _json(connection_id))
    empty = len(head) + len(_TAIL) + len(key)
    records: list[Record] = []
    refused: list[StoredMessage] = []
    parts: list[bytes] = []
    size = empty

    def close(parts: list[bytes], size: int) -> None:
        data = head + b",".join(parts) + _TAIL
        records.append(Record({"Data": data, "PartitionKey": connection_id}, len(parts), size))

    for message in messages:
        element = _element(message)
        if empty + len(element) > RECORD_LIMIT_BYTES:
            refused.append(message)
            continue
        grown = size + len(element) + (1 if parts else 0)  # the comma
        if grown > RECORD_LIMIT_BYTES:
            close(parts, size)
            parts, grown = [], empty + len(element)
        parts.append(element)
        size = grown
    if parts:
        close(parts, size)
    return records, refused


def messages_of(data: bytes) -> list[StoredMessage]:
    """The messages a record holds, in its order (either format); none for a record this sink
    did not write (another producer on the same stream) or of a later format than this
    reader knows."""
    try:
        body = json.loads(data)
        if not isinstance(body, dict):
            return []
        if "format" not in body:
            return [_message(str(body["connection_id"]), body)]
        if body["format"] != FORMAT:
            return []
        connection_id = str(body["connection_id"])
        return [_message(connection_id, element) for element in body["messages"]]
    except (ValueError, KeyError, TypeError, AttributeError):
        return []


def _message(connection_id: str, body: dict[str, Any]) -> StoredMessage:
    return StoredMessage(
        connection_id=connection_id,
        seq=int(body["seq"]),
        data=str(body["data"]),
        received_at_ms=int(body["received_at_ms"]),
        worker_id=str(body["worker_session"]),
        token=int(body["token"]),
        prev_seq=int(body["prev_seq"]),
    )
