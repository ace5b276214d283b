"""DynamoDbMessageSink: the message sink port on a DynamoDB table, one item per message and
fencing token, keyed (pk = "CONN#<id>", sk = seq * SEQ_SCALE + token; schema.py).

Every 25 messages of a batch are one BatchWriteItem (a batch of 100: four, side by side).
BatchWriteItem takes no condition, so the fencing comes from the keys and from knowing when a
write may meet another copy (docs/decisions.md, "The DynamoDB sink: fenced by its keys"):
- An owner writes only items keyed by its own token. A stale owner's late write (a delayed
  request, a retry after its deadline) lands beside the newer owner's item, never on it, and
  every reader takes the highest token of a seq (`items.latest_versions`).
- The first write for a (connection, token) reads the highest seq stored under any token (one
  Query, Limit 1): its `mark`. A message above the mark (and above every seq this token wrote
  since) is written blind: no copy of it can exist, except a stale owner's, which loses on
  read. A message at or below the mark may meet another owner's copy: one Query reads that
  seq's items, and it is refused as stale (a newer token stored it) or as a conflict (other
  data is stored; the stored copy is kept), as the sink contract promises. Only a resumed or
  replayed stream writes such seqs; a streaming connection never does.

Unprocessed items (throttling within a batch) are retried with jittered back-off for at most
`retry_budget_s`, then the batch fails as SinkUnavailable (the writer retries it whole: every
put is idempotent). A batch the service refuses as invalid (an item over 400 KB) is written
again one PutItem per message, to name the message at fault.

Cost: 1 WCU per message up to 1 KB (a plain put), one request per 25 messages; one Query
(1 RCU) per connection and token at its first write. `resume_point` is one Query on the
connection's partition from the checkpoint, ascending, strongly consistent, projecting `sk`
and `prev` only, page after page until the first hole or the end; billed on the bytes read,
about 0.25 RRU per 1 KB message above the checkpoint, so a periodic checkpoint bounds it
(docs/deploy.md).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from adapters.backoff import delay_s
from adapters.dynamodb import schema
from adapters.dynamodb.errors import error_code, unavailable_as
from adapters.dynamodb.items import latest_versions, message_to_item
from application.aio import gather_all
from application.errors import ConfigurationError, SinkRefused, SinkUnavailable
from application.ports.sink import StoredMessage, follow_links, storable

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb.client import DynamoDBClient

# The writer keeps one batch in flight (per-connection order); a batch of 100 is four
# BatchWriteItem requests of 25 (the service's limit) sent side by side, so one worker's
# throughput is four requests per round trip, not one.
MAX_BATCH = 100
REQUEST_ITEMS = 25
# DynamoDB's item limit is 400 KB, attribute names and values included; read as 400,000 bytes,
# the strictest reading (the service takes a little more, moto stops at 405,000). The rest of a
# message item is bounded: a 128-character connection id, a 256-character worker id, a 38-digit
# key, token, timestamp, TTL and prev numbers, and eight attribute names, under 1 KiB together.
ITEM_LIMIT_BYTES = 400_000
ITEM_OVERHEAD_BYTES = 1024
MAX_MESSAGE_BYTES = ITEM_LIMIT_BYTES - ITEM_OVERHEAD_BYTES

_VALIDATION = "ValidationException"
# Unprocessed items: first retry after up to 25 ms, doubling to at most 1 s.
_RETRY_BASE_S = 0.025
_RETRY_CAP_S = 1.0

_Key = tuple[str, int]
_Owner = tuple[str, int]  # (connection id, token)


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
        concurrency: int = 8,
        query_page_limit: int | None = None,
        retry_budget_s: float = 2.0,
        tracked_owners: int = 65_536,
        on_retry: Callable[[int], None] | None = None,
    ) -> None:
        """`retention_s`: if set, each message carries a TTL (`expires_at`, epoch seconds) that
        many seconds after it was received; DynamoDB deletes expired items within days.
        `concurrency`: reads in flight at once (marks and seq checks). `query_page_limit`: the
        most items one page of `resume_point` reads (None: a 1 MB page), for tests of paging.
        `retry_budget_s`: how long unprocessed items are retried before the batch fails.
        `tracked_owners`: the (connection, token) marks kept; one forgotten costs one Query
        more. `on_retry(n)`: told of every retry of n unprocessed items (a metric)."""
        if retention_s is not None and retention_s <= 0:
            raise ConfigurationError(f"retention_s must be positive, got {retention_s}")
        if concurrency < 1:
            raise ConfigurationError(f"concurrency must be at least 1, got {concurrency}")
        if query_page_limit is not None and query_page_limit < 1:
            raise ConfigurationError(f"query_page_limit must be at least 1, got {query_page_limit}")
        if retry_budget_s <= 0:
            raise ConfigurationError(f"retry_budget_s must be positive, got {retry_budget_s}")
        if tracked_owners < 1:
            raise ConfigurationError(f"tracked_owners must be at least 1, got {tracked_owners}")
        self._page_limit = query_page_limit
        self._client = client
        self._table = table
        self._retention_s = retention_s
        self._retry_budget_s = retry_budget_s
        self._on_retry = on_retry
        self._reads = asyncio.Semaphore(concurrency)
        # Per (connection, token): the highest seq that may be stored under any other token.
        # Least recently written first, so the bound forgets an owner that stopped writing.
        self._marks: collections.OrderedDict[_Owner, int] = collections.OrderedDict()
        self._tracked = tracked_owners
        # "write", "BatchWriteItem", "messages", "unprocessed", "mark", "check", "PutItem";
        # "Query" (pages) and "links" (items) of resume_point
        self.operations: dict[str, int] = {}
        self.consumed_wcu = 0.0  # write units the batches consumed (ReturnConsumedCapacity)

    async def write(self, messages: Sequence[StoredMessage]) -> None:
        if len(messages) > self.max_batch:
            raise ValueError(f"batch of {len(messages)} exceeds max_batch {self.max_batch}")
        self._count("write")
        # One put per key: the last copy of a seq in the batch is the one written.
        unique = {(m.connection_id, m.seq): m for m in messages}
        self._count("messages", len(unique))
        invalid = {key for key, m in unique.items() if not _storable(m, self.max_message_bytes)}
        candidates = [m for key, m in unique.items() if key not in invalid]
        marks = await self._marks_of({(m.connection_id, m.token) for m in candidates})
        blind = [m for m in candidates if m.seq > marks[m.connection_id, m.token]]
        checked = [m for m in candidates if m.seq <= marks[m.connection_id, m.token]]
        verdicts = await gather_all(*(self._verdict(m) for m in checked))
        stale = {_key(m) for m, v in zip(checked, verdicts, strict=True) if v == "stale"}
        conflicts = {_key(m) for m, v in zip(checked, verdicts, strict=True) if v == "conflict"}
        writes = blind + [m for m, v in zip(checked, verdicts, strict=True) if v == "store"]
        invalid |= await self._put_all(writes)
        for m in writes:
            if _key(m) not in invalid:
                self._raise_mark((m.connection_id, m.token), m.seq)
        if stale or conflicts or invalid:
            raise SinkRefused(
                stale=frozenset(stale), conflicts=frozenset(conflicts), invalid=frozenset(invalid)
            )

    async def resume_point(self, connection_id: str, checkpoint_seq: int) -> int:
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "#pk = :pk AND #sk >= :first",
            "ProjectionExpression": "#sk, #prev",
            "ExpressionAttributeNames": {
                "#pk": schema.PK,
                "#sk": schema.SK,
                "#prev": schema.MESSAGE_PREV,
            },
            "ExpressionAttributeValues": {
                ":pk": {"S": schema.connection_key(connection_id)},
                ":first": {"N": str(schema.message_key(checkpoint_seq + 1, 0))},
            },
            "ScanIndexForward": True,
            "ConsistentRead": True,  # a put acknowledged to the dead owner must be seen
        }
        if self._page_limit is not None:
            request["Limit"] = self._page_limit

        async def pages() -> AsyncIterator[list[Any]]:
            while True:
                self._count("Query")
                with unavailable_as(SinkUnavailable, "resume point read"):
                    response = await self._client.query(**request)
                self._count("links", len(response["Items"]))
                yield response["Items"]
                start = response.get("LastEvaluatedKey")
                if not start:
                    return
                request["ExclusiveStartKey"] = start

        # A seq's items may straddle two pages: its last item (the highest token) is known
        # only once the next seq, or the end, is read. So the walk holds back one item.
        current = checkpoint_seq
        held: list[Any] = []
        async for page in pages():
            versions = list(latest_versions([*held, *page]))
            held = versions[-1:]
            current, hole = follow_links(current, (_link(item) for item in versions[:-1]))
            if hole:
                return current
        current, _ = follow_links(current, (_link(item) for item in held))
        return current

    async def _marks_of(self, owners: set[_Owner]) -> dict[_Owner, int]:
        missing = [owner for owner in owners if owner not in self._marks]
        learned = await gather_all(*(self._highest_stored(cid) for cid, _ in missing))
        marks = {owner: self._marks[owner] for owner in owners if owner in self._marks}
        for owner, mark in zip(missing, learned, strict=True):
            marks[owner] = max(mark, self._marks.get(owner, -1))  # a concurrent write's
            self._raise_mark(owner, marks[owner])
        return marks

    def _raise_mark(self, owner: _Owner, seq: int) -> None:
        self._marks[owner] = max(seq, self._marks.get(owner, -1))
        self._marks.move_to_end(owner)
        while len(self._marks) > self._tracked:
            self._marks.popitem(last=False)

    async def _highest_stored(self, connection_id: str) -> int:
        """The highest seq stored for the connection under any token; -1 if none."""
        self._count("mark")
        async with self._reads, _unavailable("message mark read"):
            response = await self._client.query(
                TableName=self._table,
                KeyConditionExpression="#pk = :pk",
                ProjectionExpression="#sk",
                ExpressionAttributeNames={"#pk": schema.PK, "#sk": schema.SK},
                ExpressionAttributeValues={":pk": {"S": schema.connection_key(connection_id)}},
                ScanIndexForward=False,
                Limit=1,
                ConsistentRead=True,
            )
        items = response["Items"]
        return schema.seq_and_token(int(items[0][schema.SK]["N"]))[0] if items else -1

    async def _verdict(self, message: StoredMessage) -> str:
        """ "stale" (a newer token stored this seq), "conflict" (other data is stored for it)
        or "store"."""
        self._count("check")
        async with self._reads, _unavailable("message check read"):
            response = await self._client.query(
                TableName=self._table,
                KeyConditionExpression="#pk = :pk AND #sk BETWEEN :low AND :high",
                ProjectionExpression="#sk, #data",
                ExpressionAttributeNames={
                    "#pk": schema.PK,
                    "#sk": schema.SK,
                    "#data": schema.MESSAGE_DATA,
                },
                ExpressionAttributeValues={
                    ":pk": {"S": schema.connection_key(message.connection_id)},
                    ":low": {"N": str(schema.message_key(message.seq, 0))},
                    ":high": {"N": str(schema.message_key(message.seq + 1, 0) - 1)},
                },
                ConsistentRead=True,
            )
        copies = [
            (schema.seq_and_token(int(item[schema.SK]["N"]))[1], item[schema.MESSAGE_DATA]["S"])
            for item in response["Items"]
        ]
        if any(token > message.token for token, _ in copies):
            return "stale"
        if any(data != message.data for _, data in copies):
            return "conflict"
        return "store"

    async def _put_all(self, messages: list[StoredMessage]) -> set[_Key]:
        """Store every message (one BatchWriteItem, its unprocessed items retried); returns
        the keys the service refused as invalid. Raises SinkUnavailable."""
        if not messages:
            return set()
        try:
            await gather_all(
                *(
                    self._batch_put(messages[i : i + REQUEST_ITEMS])
                    for i in range(0, len(messages), REQUEST_ITEMS)
                )
            )
        except ClientError as exc:
            if error_code(exc) != _VALIDATION:
                raise
            # One item the service will not take fails the whole request: find which.
            outcomes = await gather_all(*(self._put_alone(m) for m in messages))
            return {_key(m) for m, ok in zip(messages, outcomes, strict=True) if not ok}
        return set()

    async def _batch_put(self, messages: list[StoredMessage]) -> None:
        requests: list[Any] = [
            {"PutRequest": {"Item": message_to_item(m, self._expires_at(m))}} for m in messages
        ]
        deadline = time.monotonic() + self._retry_budget_s
        attempt = 0
        while True:
            self._count("BatchWriteItem")
            # A ValidationException is not transient: it passes through to `_put_all`.
            with unavailable_as(SinkUnavailable, "message batch write"):
                response = await self._client.batch_write_item(
                    RequestItems={self._table: requests}, ReturnConsumedCapacity="TOTAL"
                )
            for consumed in response.get("ConsumedCapacity", ()):
                self.consumed_wcu += float(consumed.get("CapacityUnits", 0.0))
            requests = list(response.get("UnprocessedItems", {}).get(self._table, ()))
            if not requests:
                return
            attempt += 1
            self._count("unprocessed", len(requests))
            if self._on_retry is not None:
                self._on_retry(len(requests))
            pause = delay_s(attempt, _RETRY_BASE_S, _RETRY_CAP_S)
            if time.monotonic() + pause > deadline:
                raise SinkUnavailable(
                    f"DynamoDB message batch write: {len(requests)} items still unprocessed "
                    f"after {attempt} attempts"
                )
            await asyncio.sleep(pause)

    async def _put_alone(self, message: StoredMessage) -> bool:
        """One unconditional put (the key is the writer's own); False if refused as invalid."""
        self._count("PutItem")
        try:
            async with self._reads, _unavailable("message write"):
                await self._client.put_item(
                    TableName=self._table, Item=message_to_item(message, self._expires_at(message))
                )
        except ClientError as exc:
            if error_code(exc) != _VALIDATION:
                raise
            return False
        return True

    def _expires_at(self, message: StoredMessage) -> int | None:
        if self._retention_s is None:
            return None
        return message.received_at_ms // 1000 + self._retention_s

    def _count(self, name: str, value: int = 1) -> None:
        self.operations[name] = self.operations.get(name, 0) + value


def _storable(message: StoredMessage, max_message_bytes: int) -> bool:
    """The port's rule, and a token that fits the key (every real token does)."""
    return storable(message, max_message_bytes) and 0 <= message.token < schema.SEQ_SCALE


def _key(message: StoredMessage) -> _Key:
    return (message.connection_id, message.seq)


def _link(item: Any) -> tuple[int, int]:
    """(seq, prev_seq) of a projected item. An item without a prev link (none should exist:
    every put writes one) links to nothing, so the walk stops before it: a rewrite, not a loss."""
    seq = schema.seq_and_token(int(item[schema.SK]["N"]))[0]
    prev = item.get(schema.MESSAGE_PREV)
    return seq, int(prev["N"]) if prev else seq
