"""The message sink port: where each upstream message is durably stored."""

from collections.abc import Sequence
from typing import Protocol

import attrs


@attrs.frozen
class StoredMessage:
    connection_id: str
    seq: int
    data: str
    received_at_ms: int
    worker_id: str
    token: int  # the fencing token of the lease under which the message was received


class MessageSink(Protocol):
    max_batch: int  # the most messages `write` accepts in one call

    async def write(self, messages: Sequence[StoredMessage]) -> None:
        """Store every message durably before returning, idempotently on (connection_id, seq):
        writing the same seq twice leaves one copy. Raises SinkUnavailable if any message may
        not be stored (the caller retries the whole batch)."""
        ...
