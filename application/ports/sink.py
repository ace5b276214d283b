"""The message sink port: where each upstream message is durably stored."""

from collections.abc import Iterable, Sequence
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
    worker_id: str  # the worker session that received it (its id names the worker)
    token: int  # the fencing token of the lease under which the message was received
    # The seq of the message before this one in the stream as its worker accepted it: the
    # checkpoint it resumed from for the first message after an acquire, the last seq before
    # an upstream gap across one. It says "nothing exists between prev_seq and seq", which is
    # what lets a new owner find a hole without a checkpoint written per heartbeat: upstream
    # seqs may legitimately skip (a jump within WSFLEET_SEQ_JUMP_WINDOW), so contiguity
    # alone cannot tell a skip from a message that was never stored (see `resume_point`).
    prev_seq: int


def storable(message: "StoredMessage", max_message_bytes: int) -> bool:
    """The one rule for what a sink can store: a seq in 0..MAX_SEQ, a prev_seq below it (-1
    at the lowest: nothing before seq 0), and data within its limit. The worker applies it at
    the boundary; each sink again, to report SinkRefused(invalid)."""
    return (
        0 <= message.seq <= MAX_SEQ
        and -1 <= message.prev_seq < message.seq
        and utf8_size(message.data) <= max_message_bytes
    )


def follow_links(current: int, links: Iterable[tuple[int, int]]) -> tuple[int, bool]:
    """The one rule for where a new owner resumes. `current` is a seq up to which everything
    is known stored (at first, the checkpoint); `links` are a connection's stored (seq,
    prev_seq) pairs above it, in ascending seq order. Each message whose prev link reaches
    `current` extends it to its seq; the first that does not marks a hole (a message between
    was never stored, e.g. a batch half written when its writer died: its messages land in
    any subset). Returns (the seq reached, whether a hole stopped the walk). Reads no further
    than the hole, so a sink feeds it lazily, page by page if it pages."""
    for seq, prev_seq in links:
        if prev_seq > current:
            return current, True
        current = seq
    return current, False


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

    async def resume_point(self, connection_id: str, checkpoint_seq: int) -> int | None:
        """Where a new owner resumes after `checkpoint_seq` (the last checkpoint recorded with
        the connection): the highest stored seq reached from it through prev links with no
        hole (`follow_links`), so >= checkpoint_seq; every seq the upstream sent up to it is
        stored. None if the sink cannot answer (a user sink without the links): the worker
        then falls back to recording checkpoints with the connection. Raises SinkUnavailable
        if the sink cannot be read now."""
        ...


class MessageReader(Protocol):
    """Reading a built-in sink back (`wsfleet messages`): the sink port only writes."""

    async def messages(
        self, connection_id: str, from_seq: int = 0, limit: int | None = None
    ) -> list[StoredMessage]:
        """Up to `limit` (None: all) stored messages of the connection with seq >= from_seq,
        ascending, one per seq (the sink's own rule where it keeps several copies). Raises
        SinkUnavailable."""
        ...
