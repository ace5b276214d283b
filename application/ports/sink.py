"""The message sink port: where each upstream message is durably stored."""

from collections.abc import Sequence
from typing import Protocol

import attrs

# The largest seq any sink stores: a signed 64-bit integer (SQLite INTEGER, DynamoDB N as
# used by readers in other languages). The worker refuses a larger one at the boundary.
MAX_SEQ = 2**63 - 1


def utf8_size(data: str) -> int:
    """The bytes `data` takes in UTF-8. ASCII (most upstream JSON) is measured without encoding
    a copy: this runs once per received message. Raises UnicodeEncodeError (a lone surrogate)."""
    return len(data) if data.isascii() else len(data.encode("utf-8"))


@attrs.frozen
class StoredMessage:
    connection_id: str
    seq: int
    data: str
    received_at_ms: int
    worker_id: str
    token: int  # the fencing token of the lease under which the message was received


def storable(message: "StoredMessage", max_message_bytes: int) -> bool:
    """The one rule for what a sink can store: a seq in 0..MAX_SEQ and data within its limit.
    The worker applies it at the boundary; each sink again, to report SinkRefused(invalid)."""
    return 0 <= message.seq <= MAX_SEQ and utf8_size(message.data) <= max_message_bytes


class MessageSink(Protocol):
    max_batch: int  # the most messages `write` accepts in one call
    # The largest `data` (UTF-8 bytes) the sink can store in one message, with room for the
    # rest of the row: the worker rejects a larger message at the boundary, and the settings
    # refuse an upstream message limit above it.
    max_message_bytes: int

    async def write(self, messages: Sequence[StoredMessage]) -> None:
        """Store every message durably before returning, idempotently on (connection_id, seq):
        writing the same seq twice leaves one copy. Fenced: a message whose (connection_id,
        seq) is stored under a newer token is not written (stale), nor one whose seq is stored
        with different data (a conflict: the stored copy is kept). Such messages, and any the
        sink cannot store at all, are reported by SinkRefused, raised after every other message
        of the batch is stored. Raises SinkUnavailable if any message may not be stored (the
        caller retries the whole batch)."""
        ...
