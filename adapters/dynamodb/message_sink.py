"""DynamoDbMessageSink: the message sink port on a DynamoDB table, one item per message keyed
(pk = "CONN#<id>", sk = seq), so storing a message again overwrites it with the same content:
writes are idempotent and a batch can always be retried whole.

Cost: BatchWriteItem of up to 25 puts, 1 WCU per message up to 1 KB (more for larger
payloads; an item is capped at 400 KB, so the upstream's maximum message size must stay below
that). BatchWriteItem takes no conditions, so a stale owner's write is not refused here: it can
only rewrite a seq with the data the upstream sent for it, which is harmless. Fencing stale
owners is the lease's job (a worker stops writing when it can no longer trust its lease).

`UnprocessedItems` (throttling of part of a batch) are re-sent with jittered exponential
back-off, up to `max_attempts` calls in all, then SinkUnavailable: the caller retries the whole
batch later, which is safe because every put is idempotent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from adapters.dynamodb import backoff, schema
from adapters.dynamodb.errors import unavailable_as
from adapters.dynamodb.items import message_to_item
from application.errors import ConfigurationError, SinkUnavailable
from application.ports.sink import StoredMessage

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb.client import DynamoDBClient

MAX_BATCH = 25  # BatchWriteItem's limit per call


class DynamoDbMessageSink:
    max_batch = MAX_BATCH

    def __init__(
        self,
        client: DynamoDBClient,
        table: str = schema.DEFAULT_MESSAGES_TABLE,
        *,
        retention_s: int | None = None,
        max_attempts: int = 6,
        retry_base_s: float = 0.05,
        retry_cap_s: float = 2.0,
    ) -> None:
        """`retention_s`: if set, each message carries a TTL (`expires_at`, epoch seconds) that
        many seconds after it was received; DynamoDB deletes expired items within days."""
        if retention_s is not None and retention_s <= 0:
            raise ConfigurationError(f"retention_s must be positive, got {retention_s}")
        if max_attempts < 1:
            raise ConfigurationError(f"max_attempts must be at least 1, got {max_attempts}")
        self._client = client
        self._table = table
        self._retention_s = retention_s
        self._max_attempts = max_attempts
        self._retry_base_s = retry_base_s
        self._retry_cap_s = retry_cap_s
        self.operations: dict[str, int] = {}  # "write", "BatchWriteItem", "messages"

    async def write(self, messages: Sequence[StoredMessage]) -> None:
        if len(messages) > self.max_batch:
            raise ValueError(f"batch of {len(messages)} exceeds max_batch {self.max_batch}")
        self._count("write")
        # BatchWriteItem refuses two requests for one key; the last copy of a seq wins.
        unique = {(m.connection_id, m.seq): m for m in messages}
        pending: list[Any] = [
            {"PutRequest": {"Item": message_to_item(m, self._expires_at(m))}}
            for m in unique.values()
        ]
        self._count("messages", len(pending))
        for attempt in range(self._max_attempts):
            if not pending:
                return
            if attempt:
                await backoff.pause(attempt - 1, self._retry_base_s, self._retry_cap_s)
            self._count("BatchWriteItem")
            with unavailable_as(SinkUnavailable, "message write"):
                response = await self._client.batch_write_item(RequestItems={self._table: pending})
            pending = list(response.get("UnprocessedItems", {}).get(self._table, []))
        if pending:
            raise SinkUnavailable(
                f"DynamoDB kept {len(pending)} of {len(unique)} messages unprocessed after "
                f"{self._max_attempts} attempts (throttled)"
            )

    def _expires_at(self, message: StoredMessage) -> int | None:
        if self._retention_s is None:
            return None
        return message.received_at_ms // 1000 + self._retention_s

    def _count(self, name: str, value: int = 1) -> None:
        self.operations[name] = self.operations.get(name, 0) + value
