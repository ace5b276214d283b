"""The connection store's read-only operations on DynamoDB (see connection_store.py for what
each costs): consistent GetItem, the sharded orphan index, BatchGetItem, the event log, Scan."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from adapters.dynamodb import backoff, schema
from adapters.dynamodb.errors import unavailable_as
from adapters.dynamodb.expressions import name
from adapters.dynamodb.items import connection_from_item, event_from_item, key, n, s
from adapters.dynamodb.schema import TableNames
from application.errors import StoreUnavailable
from domain import Connection, DesiredState, DomainError, Event, validate_connection_id

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb.client import DynamoDBClient

BATCH_GET_KEYS = 100  # BatchGetItem's limit per call
_BATCH_CONCURRENCY = 4  # BatchGetItem calls in flight for one desired_states


class ConnectionQueries:
    def __init__(
        self,
        client: DynamoDBClient,
        tables: TableNames,
        shards: int,
        *,
        max_attempts: int,
        retry_base_s: float,
        retry_cap_s: float,
        on_request: Callable[[str], None],
    ) -> None:
        self._client = client
        self._tables = tables
        self._shards = shards
        self._max_attempts = max_attempts
        self._retry_base_s = retry_base_s
        self._retry_cap_s = retry_cap_s
        self._on_request = on_request  # counts each DynamoDB call by API name

    async def read(self, connection_id: str, op: str) -> Connection | None:
        self._on_request("GetItem")
        with unavailable_as(StoreUnavailable, op):
            response = await self._client.get_item(
                TableName=self._tables.connections, Key=key(connection_id), ConsistentRead=True
            )
        item = response.get("Item")
        return connection_from_item(item) if item else None

    async def iter_orphans(
        self, now_ms: int, page_size: int
    ) -> AsyncIterator[Sequence[Connection]]:
        """All shards are queried concurrently, each paged with its LastEvaluatedKey; at most
        one page per shard is held at a time, so memory stays bounded by shards x page_size."""
        if page_size < 1:
            raise ValueError(f"page_size must be positive, got {page_size}")
        pending: dict[str, Mapping[str, Any] | None] = dict.fromkeys(
            schema.all_orphan_shards(self._shards)
        )
        buffer: list[Connection] = []
        while pending:
            shards = list(pending)
            pages = await asyncio.gather(
                *(self._orphan_page(shard, pending[shard], now_ms, page_size) for shard in shards)
            )
            pending = {}
            for shard, (found, last_key) in zip(shards, pages, strict=True):
                buffer.extend(found)
                if last_key:
                    pending[shard] = last_key
            while len(buffer) >= page_size:
                yield buffer[:page_size]
                del buffer[:page_size]
        if buffer:
            yield buffer

    async def _orphan_page(
        self, shard: str, start: Mapping[str, Any] | None, now_ms: int, limit: int
    ) -> tuple[list[Connection], Mapping[str, Any] | None]:
        shard_name, shard_names = name(schema.ORPHAN_SHARD)
        available, available_names = name(schema.AVAILABLE_AT_MS)
        extra: dict[str, Any] = {"ExclusiveStartKey": start} if start else {}
        self._on_request("Query")
        with unavailable_as(StoreUnavailable, "iter_orphans"):
            response = await self._client.query(
                TableName=self._tables.connections,
                IndexName=schema.ORPHAN_INDEX,
                KeyConditionExpression=f"{shard_name} = :shard AND {available} < :now",
                ExpressionAttributeNames={**shard_names, **available_names},
                ExpressionAttributeValues={":shard": s(shard), ":now": n(now_ms)},
                Limit=limit,
                **extra,
            )
        found = [connection_from_item(item) for item in response.get("Items", [])]
        return found, response.get("LastEvaluatedKey")

    async def next_available_at(self, now_ms: int) -> int | None:
        """The first index entry at or after now, per shard (Limit 1), then the minimum."""
        shard_name, shard_names = name(schema.ORPHAN_SHARD)
        available, available_names = name(schema.AVAILABLE_AT_MS)

        async def first(shard: str) -> int | None:
            self._on_request("Query")
            with unavailable_as(StoreUnavailable, "next_available_at"):
                response = await self._client.query(
                    TableName=self._tables.connections,
                    IndexName=schema.ORPHAN_INDEX,
                    KeyConditionExpression=f"{shard_name} = :shard AND {available} >= :now",
                    ExpressionAttributeNames={**shard_names, **available_names},
                    ExpressionAttributeValues={":shard": s(shard), ":now": n(now_ms)},
                    ProjectionExpression=available,
                    ScanIndexForward=True,
                    Limit=1,
                )
            items = response.get("Items", [])
            return int(items[0][schema.AVAILABLE_AT_MS]["N"]) if items else None

        found = await asyncio.gather(*(first(sh) for sh in schema.all_orphan_shards(self._shards)))
        return min((t for t in found if t is not None), default=None)

    async def desired_states(self, connection_ids: Sequence[str]) -> Mapping[str, DesiredState]:
        wanted = list(dict.fromkeys(cid for cid in connection_ids if _valid_id(cid)))
        limit = asyncio.Semaphore(_BATCH_CONCURRENCY)

        async def chunk(ids: Sequence[str]) -> dict[str, DesiredState]:
            async with limit:
                return await self._desired_chunk(ids)

        result: dict[str, DesiredState] = {}
        for part in await asyncio.gather(
            *(chunk(wanted[i : i + BATCH_GET_KEYS]) for i in range(0, len(wanted), BATCH_GET_KEYS))
        ):
            result.update(part)
        return result

    async def _desired_chunk(self, ids: Sequence[str]) -> dict[str, DesiredState]:
        table = self._tables.connections
        pk_name, pk_names = name(schema.PK)
        state_name, state_names = name(schema.DESIRED_STATE)
        keys: list[Any] = [key(cid) for cid in ids]
        found: dict[str, DesiredState] = {}
        for attempt in range(self._max_attempts):
            self._on_request("BatchGetItem")
            with unavailable_as(StoreUnavailable, "desired_states"):
                response = await self._client.batch_get_item(
                    RequestItems={
                        table: {
                            "Keys": keys,
                            "ProjectionExpression": f"{pk_name}, {state_name}",
                            "ExpressionAttributeNames": {**pk_names, **state_names},
                        }
                    }
                )
            for item in response.get("Responses", {}).get(table, []):
                cid = schema.connection_id_of(item[schema.PK]["S"])
                found[cid] = DesiredState(item[schema.DESIRED_STATE]["S"])
            unprocessed = response.get("UnprocessedKeys", {}).get(table)
            keys = list(unprocessed["Keys"]) if unprocessed else []
            if not keys:
                return found
            await backoff.pause(attempt, self._retry_base_s, self._retry_cap_s)
        raise StoreUnavailable(
            f"DynamoDB desired_states: {len(keys)} keys still unprocessed after "
            f"{self._max_attempts} attempts"
        )

    async def history(self, connection_id: str) -> Sequence[Event]:
        if not _valid_id(connection_id):
            return []
        pk_name, pk_names = name(schema.PK)
        events: list[Event] = []
        start: Mapping[str, Any] | None = None
        while True:
            extra: dict[str, Any] = {"ExclusiveStartKey": start} if start else {}
            self._on_request("Query")
            with unavailable_as(StoreUnavailable, "history"):
                response = await self._client.query(
                    TableName=self._tables.events,
                    KeyConditionExpression=f"{pk_name} = :pk",
                    ExpressionAttributeNames=pk_names,
                    ExpressionAttributeValues={":pk": s(schema.connection_key(connection_id))},
                    ConsistentRead=True,
                    ScanIndexForward=True,  # by version
                    **extra,
                )
            events.extend(event_from_item(item) for item in response.get("Items", []))
            start = response.get("LastEvaluatedKey")
            if not start:
                return events

    async def list_connections(self, limit: int = 1000) -> Sequence[Connection]:
        """Up to `limit` connections sorted by id. A Scan has no order: with more than `limit`
        connections in the table, which ones are listed is arbitrary (they are still sorted)."""
        found: list[Connection] = []
        start: Mapping[str, Any] | None = None
        while len(found) < limit:
            extra: dict[str, Any] = {"ExclusiveStartKey": start} if start else {}
            self._on_request("Scan")
            with unavailable_as(StoreUnavailable, "list_connections"):
                response = await self._client.scan(
                    TableName=self._tables.connections,
                    Limit=min(limit - len(found), 1000),
                    ConsistentRead=True,
                    **extra,
                )
            found.extend(connection_from_item(item) for item in response.get("Items", []))
            start = response.get("LastEvaluatedKey")
            if not start:
                break
        return sorted(found, key=lambda c: c.connection_id)[:limit]


def _valid_id(connection_id: str) -> bool:
    try:
        validate_connection_id(connection_id)
    except DomainError:
        return False
    return True
