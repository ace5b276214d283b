"""The one mapping between a stored message and a Kinesis record, each way.

A record's data is one JSON object with every field of the stored message; its partition key is
the connection id, so a connection's records go to one shard, in the order they were put.

    {"connection_id": "...", "seq": 7, "prev_seq": 6, "data": "...", "token": 3,
     "worker_session": "w1-ab12#1", "received_at_ms": 1700000000007}
"""

import json
from typing import Any

from application.ports.sink import StoredMessage

# A record's data plus its partition key may take 1 MiB (the service's limit).
RECORD_LIMIT_BYTES = 1_048_576


def record_of(message: StoredMessage) -> dict[str, Any]:
    """The PutRecords entry of a message."""
    body = {
        "connection_id": message.connection_id,
        "seq": message.seq,
        "prev_seq": message.prev_seq,
        "data": message.data,
        "token": message.token,
        "worker_session": message.worker_id,
        "received_at_ms": message.received_at_ms,
    }
    return {
        "Data": json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode(),
        "PartitionKey": message.connection_id,
    }


def record_size(record: dict[str, Any]) -> int:
    return len(record["Data"]) + len(record["PartitionKey"].encode())


def stored_of(data: bytes) -> StoredMessage | None:
    """The message a record holds; None for a record this sink did not write (another
    producer on the same stream)."""
    try:
        body = json.loads(data)
        return StoredMessage(
            connection_id=str(body["connection_id"]),
            seq=int(body["seq"]),
            data=str(body["data"]),
            received_at_ms=int(body["received_at_ms"]),
            worker_id=str(body["worker_session"]),
            token=int(body["token"]),
            prev_seq=int(body["prev_seq"]),
        )
    except (ValueError, KeyError, TypeError):
        return None
