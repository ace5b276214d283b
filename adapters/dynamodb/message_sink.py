"""DynamoDbMessageSink: the message sink port on a DynamoDB table, one item per message keyed
(pk = "CONN#<id>", sk = seq).

Fenced (found by a security review: BatchWriteItem takes no condition, so a stale owner could
overwrite a newer owner's rows). Each message is one conditional PutItem, the batch's puts
concurrently:

    attribute_not_exists(pk) OR (lease_token <= :token AND message_data = :data)

so a rewrite of the same content under the same or a newer token is idempotent, and nothing
else lands. A refused put returns the stored item (ReturnValuesOnConditionCheckFailure=ALL_OLD;
read back when absent) to say why: a newer token (stale) or other data (a conflict). A put the
service refuses as invalid (ValidationException: item larger than 400 KB) is reported too.
Every other put of the batch is stored first; then SinkRefused names the refused messages.

Cost: 1 WCU per message up to 1 KB, as with BatchWriteItem (a refused condition costs the same);
25 requests instead of one, in parallel on the client's connection pool. Throttling is retried
by botocore's standard retry mode; what remains becomes SinkUnavailable (the caller retries
the whole batch: every put is idempotent).

Each item carries its prev link (`prev`, StoredMessage.prev_seq). `resume_point` is one Query
on the connection's partition, `sk > :checkpoint` ascending, strongly consistent, projecting
`sk` and `prev` only, page after page until the first hole (no page is read past it) or the end.
Its cost: a Query is billed on the size of the items it reads, not on what it projects, rounded
up to 4 KB per page; strongly consistent, so one read unit per 4 KB read: about 0.25 RRU per
1 KB message above the checkpoint (1 RRU per message up to 4 KB, 100 at the 400 KB item limit),
and at least 1 RRU per call. A page holds up to 1 MB of items (256 RRU); so the cost and the
time of a takeover grow with the messages stored since the connection's last recorded
checkpoint, which is what a periodic checkpoint bounds (docs/deploy.md, docs/decisions.md).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from adapters.dynamodb import schema
from adapters.dynamodb.errors import CONDITION_FAILED, error_code, failed_item, unavailable_as
from adapters.dynamodb.items import message_to_item
from application.aio import gather_all
from application.errors import ConfigurationError, SinkRefused, SinkUnavailable
from application.ports.sink import StoredMessage, follow_links, storable

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb.client import DynamoDBClient

MAX_BATCH = 25  # puts in flight at once per batch
# DynamoDB's item limit is 400 KB, attribute names and values included; read as 400,000 bytes,
# the strictest reading (the service takes a little more, moto stops at 405,000). The rest of a
# message item is bounded: a 128-character connection id, a 256-character worker id, seq,
# token, timestamp, TTL and prev numbers, and eight attribute names, under 1 KiB together.
ITEM_LIMIT_BYTES = 400_000
ITEM_OVERHEAD_BYTES = 1024
MAX_MESSAGE_BYTES = ITEM_LIMIT_BYTES - ITEM_OVERHEAD_BYTES

_CONDITION = "attribute_not_exists(#pk) OR (#token <= :token AND #data = :data)"
_VALIDATION = "ValidationException"

_Key = tuple[str, int]


@contextlib.asynccontextmanager
async def _unavailable(what: str) -> AsyncIterator[None]:
    with unavailable_as(SinkUnavailable, what):
        yield


class DynamoDbMessageSink:
    max_batch = MAX_BATCH
    max_message_bytes = MAX_MESSAGE_BYTES

    def __init__(
        self,
        client: DynamoDBClient,
        table: str = schema.DEFAULT_MESSAGES_TABLE,
        *,
        retention_s: int | None = None,
        concurrency: int = MAX_BATCH,
        query_page_limit: int | None = None,
    ) -> None:
        """`retention_s`: if set, each message carries a TTL (`expires_at`, epoch seconds) that
        many seconds after it was received; DynamoDB deletes expired items within days.
        `query_page_limit`: the most items one page of `resume_point` reads (None: as many as
        fit in DynamoDB's 1 MB page), for tests of its paging."""
        if retention_s is not None and retention_s <= 0:
            raise ConfigurationError(f"retention_s must be positive, got {retention_s}")
        if concurrency < 1:
            raise ConfigurationError(f"concurrency must be at least 1, got {concurrency}")
        if query_page_limit is not None and query_page_limit < 1:
            raise ConfigurationError(f"query_page_limit must be at least 1, got {query_page_limit}")
        self._page_limit = query_page_limit
        self._client = client
        self._table = table
        self._retention_s = retention_s
        # Puts in flight at once. The writer has one batch in flight, so this is the worker's
        # sink throughput: `concurrency` / put latency (at 4, ~800 messages/s at 5 ms, a
        # seventh of what one BatchWriteItem per batch gave). A whole batch at once keeps one
        # round trip per batch; the client's pool is sized max_connections + headroom
        # (entrypoints/containers.py), so renewals still find a connection free.
        self._puts = asyncio.Semaphore(concurrency)
        # "write", "PutItem", "messages"; "Query" (pages) and "links" (items) of resume_point
        self.operations: dict[str, int] = {}

    async def write(self, messages: Sequence[StoredMessage]) -> None:
        if len(messages) > self.max_batch:
            raise ValueError(f"batch of {len(messages)} exceeds max_batch {self.max_batch}")
        self._count("write")
        # One put per key: the last copy of a seq in the batch is the one written.
        unique = {(m.connection_id, m.seq): m for m in messages}
        self._count("messages", len(unique))
        # Every put ends before an error (unavailable: the batch is retried; or a deployment
        # error) is raised.
        outcomes = await gather_all(*(self._put(m) for m in unique.values()))
        stale: set[_Key] = set()
        conflicts: set[_Key] = set()
        invalid: set[_Key] = set()
        for key, outcome in zip(unique, outcomes, strict=True):
            {"stale": stale, "conflict": conflicts, "invalid": invalid, "stored": set()}[
                outcome
            ].add(key)
        if stale or conflicts or invalid:
            raise SinkRefused(
                stale=frozenset(stale), conflicts=frozenset(conflicts), invalid=frozenset(invalid)
            )

    async def resume_point(self, connection_id: str, checkpoint_seq: int) -> int:
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "#pk = :pk AND #sk > :checkpoint",
            "ProjectionExpression": "#sk, #prev",
            "ExpressionAttributeNames": {
                "#pk": schema.PK,
                "#sk": schema.SK,
                "#prev": schema.MESSAGE_PREV,
            },
            "ExpressionAttributeValues": {
                ":pk": {"S": schema.connection_key(connection_id)},
                ":checkpoint": {"N": str(checkpoint_seq)},
            },
            "ScanIndexForward": True,
            "ConsistentRead": True,  # a put acknowledged to the dead owner must be seen
        }
        if self._page_limit is not None:
            request["Limit"] = self._page_limit
        current = checkpoint_seq
        while True:
            self._count("Query")
            with unavailable_as(SinkUnavailable, "resume point read"):
                response = await self._client.query(**request)
            items = response["Items"]
            self._count("links", len(items))
            current, hole = follow_links(current, (_link(item) for item in items))
            start = response.get("LastEvaluatedKey")
            if hole or not start:
                return current
            request["ExclusiveStartKey"] = start

    async def _put(self, message: StoredMessage) -> str:
        """ "stored", "stale", "conflict" or "invalid"; raises SinkUnavailable."""
        if not storable(message, self.max_message_bytes):
            return "invalid"
        self._count("PutItem")
        try:
            async with self._puts, _unavailable("message write"):
                await self._client.put_item(
                    TableName=self._table,
                    Item=message_to_item(message, self._expires_at(message)),
                    ConditionExpression=_CONDITION,
                    ExpressionAttributeNames={
                        "#pk": schema.PK,
                        "#token": schema.FENCING_TOKEN,
                        "#data": schema.MESSAGE_DATA,
                    },
                    ExpressionAttributeValues={
                        ":token": {"N": str(message.token)},
                        ":data": {"S": message.data},
                    },
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
        except ClientError as exc:
            code = error_code(exc)
            if code == _VALIDATION:
                return "invalid"
            if code != CONDITION_FAILED:
                raise
            stored = failed_item(exc) or await self._stored(message)
            if stored is None:
                raise SinkUnavailable("message write refused, then the item was gone") from exc
            token = int(stored.get(schema.FENCING_TOKEN, {}).get("N", "0"))
            return "stale" if token > message.token else "conflict"
        return "stored"

    async def _stored(self, message: StoredMessage) -> Any:
        async with self._puts, _unavailable("message read"):
            response = await self._client.get_item(
                TableName=self._table,
                Key={
                    schema.PK: {"S": schema.connection_key(message.connection_id)},
                    schema.SK: {"N": str(message.seq)},
                },
                ConsistentRead=True,
            )
        return response.get("Item")

    def _expires_at(self, message: StoredMessage) -> int | None:
        if self._retention_s is None:
            return None
        return message.received_at_ms // 1000 + self._retention_s

    def _count(self, name: str, value: int = 1) -> None:
        self.operations[name] = self.operations.get(name, 0) + value


def _link(item: Any) -> tuple[int, int]:
    """(seq, prev_seq) of a projected item. An item without a prev link (none should exist:
    every put writes one) links to nothing, so the walk stops before it: a rewrite, not a loss."""
    seq = int(item[schema.SK]["N"])
    prev = item.get(schema.MESSAGE_PREV)
    return seq, int(prev["N"]) if prev else seq
