"""The lease store's read-only operations on DynamoDB (see connection_store.py for what each
costs): consistent GetItem and BatchGetItem, the Scan of the (small) sessions table, the three
sparse indexes of the connections table, the event log."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from adapters import backoff
from adapters.dynamodb import schema
from adapters.dynamodb.errors import unavailable_as
from adapters.dynamodb.expressions import name
from adapters.dynamodb.items import (
    connection_from_item,
    event_from_item,
    key,
    n,
    s,
    session_event_from_item,
    session_from_item,
    session_key,
)
from adapters.dynamodb.schema import TableNames
from application.aio import gather_all
from application.errors import StoreUnavailable
from application.ports.store import check_page_size
from domain import (
    Connection,
    DomainError,
    Event,
    SessionEvent,
    WorkerSession,
    validate_connection_id,
)

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb.client import DynamoDBClient

BATCH_GET_KEYS = 100  # BatchGetItem's limit per call
# Dead sessions' owner-index Queries (then their BatchGetItems) in flight at once in an orphan
# scan: as many as the orphan shards' Queries, so a scan's memory stays within that many pages.
DEAD_READS_AT_ONCE = 16


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

    # --- single items ------------------------------------------------------------------------

    async def read(self, connection_id: str, op: str) -> Connection | None:
        self._on_request("GetItem")
        with unavailable_as(StoreUnavailable, op):
            response = await self._client.get_item(
                TableName=self._tables.connections, Key=key(connection_id), ConsistentRead=True
            )
        item = response.get("Item")
        return connection_from_item(item) if item else None

    async def read_session(self, session_id: str, op: str) -> WorkerSession | None:
        self._on_request("GetItem")
        with unavailable_as(StoreUnavailable, op):
            response = await self._client.get_item(
                TableName=self._tables.sessions, Key=session_key(session_id), ConsistentRead=True
            )
        item = response.get("Item")
        return session_from_item(item) if item else None

    async def read_connections(self, connection_ids: Sequence[str], op: str) -> list[Connection]:
        """Many connections, strongly consistent, 100 keys per BatchGetItem; absent ids are
        left out. Unprocessed keys are asked again with back-off."""
        found: list[Connection] = []
        wanted = list(dict.fromkeys(connection_ids))
        for i in range(0, len(wanted), BATCH_GET_KEYS):
            found.extend(await self._batch(wanted[i : i + BATCH_GET_KEYS], op))
        return found

    async def _batch(self, ids: Sequence[str], op: str) -> list[Connection]:
        table = self._tables.connections
        keys: list[Any] = [key(cid) for cid in ids]
        found: list[Connection] = []
        for attempt in range(self._max_attempts):
            self._on_request("BatchGetItem")
            with unavailable_as(StoreUnavailable, op):
                response = await self._client.batch_get_item(
                    RequestItems={table: {"Keys": keys, "ConsistentRead": True}}
                )
            found.extend(
                connection_from_item(item) for item in response.get("Responses", {}).get(table, [])
            )
            unprocessed = response.get("UnprocessedKeys", {}).get(table)
            keys = list(unprocessed["Keys"]) if unprocessed else []
            if not keys:
                return found
            await backoff.pause(attempt, self._retry_base_s, self._retry_cap_s)
        raise StoreUnavailable(
            f"DynamoDB {op}: {len(keys)} keys still unprocessed after {self._max_attempts} attempts"
        )

    # --- sessions ----------------------------------------------------------------------------

    async def list_sessions(self, op: str = "list_sessions") -> list[WorkerSession]:
        """Every session item (a consistent Scan: one item per worker process not yet cleaned
        up, about 150 bytes each, so one request per ~27 workers' 4 KB)."""
        found: list[WorkerSession] = []
        start: Mapping[str, Any] | None = None
        while True:
            extra: dict[str, Any] = {"ExclusiveStartKey": start} if start else {}
            self._on_request("Scan")
            with unavailable_as(StoreUnavailable, op):
                response = await self._client.scan(
                    TableName=self._tables.sessions, ConsistentRead=True, **extra
                )
            found.extend(session_from_item(item) for item in response.get("Items", []))
            start = response.get("LastEvaluatedKey")
            if not start:
                return sorted(found, key=lambda session: session.session_id)

    # --- the owner indexes -------------------------------------------------------------------

    async def owned_ids(
        self, session_id: str, op: str, *, index: str = schema.OWNER_INDEX, limit: int = 0
    ) -> list[str]:
        """Ids of the connections listed under `session_id` in a KEYS_ONLY owner index
        (`connections-by-owner`, or `stops-by-owner`), all pages (or the first `limit`).
        Eventually consistent, as every GSI read."""
        attribute = schema.OWNED_BY if index == schema.OWNER_INDEX else schema.STOP_OWNER
        owner, owner_names = name(attribute)
        ids: list[str] = []
        start: Mapping[str, Any] | None = None
        while True:
            extra: dict[str, Any] = {"ExclusiveStartKey": start} if start else {}
            if limit:
                extra["Limit"] = limit
            self._on_request("Query")
            with unavailable_as(StoreUnavailable, op):
                response = await self._client.query(
                    TableName=self._tables.connections,
                    IndexName=index,
                    KeyConditionExpression=f"{owner} = :owner",
                    ExpressionAttributeNames=owner_names,
                    ExpressionAttributeValues={":owner": s(session_id)},
                    **extra,
                )
            ids.extend(
                schema.connection_id_of(item[schema.PK]["S"]) for item in response.get("Items", [])
            )
            start = response.get("LastEvaluatedKey")
            if not start or (limit and len(ids) >= limit):
                return ids

    # --- orphans -----------------------------------------------------------------------------

    async def iter_orphans(
        self, now_ms: int, page_size: int
    ) -> AsyncIterator[Sequence[Connection]]:
        """Two sources, each checked against `Connection.is_orphan` with the sessions as read:
        the connections of every dead session (sessions Scan, then per dead session a Query on
        `connections-by-owner` and a consistent BatchGetItem of what it lists, up to
        DEAD_READS_AT_ONCE of either side by side), and the unowned
        ones whose back-off is over (every shard of `orphans-by-shard`, concurrently, each paged;
        at most one page per shard held at a time, so memory stays within shards x page_size)."""
        check_page_size(page_size)
        sessions = await self.list_sessions("iter_orphans")
        by_id = {session.session_id: session for session in sessions}
        buffer: list[Connection] = []
        dead = [session for session in sessions if not session.is_live(now_ms)]
        # Read side by side, DEAD_READS_AT_ONCE requests at a time: one dead session after
        # another, an AZ loss's survivors spent 666 round trips (4.3 s) reading 333 dead
        # sessions before taking any (bench/RESULTS.md section 33).
        for first in range(0, len(dead), DEAD_READS_AT_ONCE):
            group = dead[first : first + DEAD_READS_AT_ONCE]
            owned = await gather_all(
                *(self.owned_ids(session.session_id, "iter_orphans") for session in group)
            )
            ids = [cid for listed in owned for cid in listed]
            id_pages = [ids[i : i + page_size] for i in range(0, len(ids), page_size)]
            for at in range(0, len(id_pages), DEAD_READS_AT_ONCE):
                reads = await gather_all(
                    *(
                        self.read_connections(id_page, "iter_orphans")
                        for id_page in id_pages[at : at + DEAD_READS_AT_ONCE]
                    )
                )
                for read in reads:
                    buffer.extend(c for c in read if c.is_orphan(now_ms, by_id))
                while len(buffer) >= page_size:
                    yield buffer[:page_size]
                    del buffer[:page_size]
        pending: dict[str, Mapping[str, Any] | None] = dict.fromkeys(
            schema.all_orphan_shards(self._shards)
        )
        while pending:
            shards = list(pending)
            pages = await asyncio.gather(
                *(self._orphan_page(shard, pending[shard], now_ms, page_size) for shard in shards)
            )
            pending = {}
            for shard, (found, last_key) in zip(shards, pages, strict=True):
                # The index lags: an entry may be one that was acquired a moment ago.
                buffer.extend(c for c in found if c.is_orphan(now_ms, by_id))
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
        not_before, not_before_names = name(schema.NOT_BEFORE_MS)
        extra: dict[str, Any] = {"ExclusiveStartKey": start} if start else {}
        self._on_request("Query")
        with unavailable_as(StoreUnavailable, "iter_orphans"):
            response = await self._client.query(
                TableName=self._tables.connections,
                IndexName=schema.ORPHAN_INDEX,
                KeyConditionExpression=f"{shard_name} = :shard AND {not_before} < :now",
                ExpressionAttributeNames={**shard_names, **not_before_names},
                ExpressionAttributeValues={":shard": s(shard), ":now": n(now_ms)},
                Limit=limit,
                **extra,
            )
        found = [connection_from_item(item) for item in response.get("Items", [])]
        return found, response.get("LastEvaluatedKey")

    async def next_available_at(self, now_ms: int) -> int | None:
        """The earliest back-off end: the first orphan-index entry at or after now, per shard
        (Limit 1)."""
        shard_name, shard_names = name(schema.ORPHAN_SHARD)
        not_before, not_before_names = name(schema.NOT_BEFORE_MS)

        async def first(shard: str) -> int | None:
            self._on_request("Query")
            with unavailable_as(StoreUnavailable, "next_available_at"):
                response = await self._client.query(
                    TableName=self._tables.connections,
                    IndexName=schema.ORPHAN_INDEX,
                    KeyConditionExpression=f"{shard_name} = :shard AND {not_before} >= :now",
                    ExpressionAttributeNames={**shard_names, **not_before_names},
                    ExpressionAttributeValues={":shard": s(shard), ":now": n(now_ms)},
                    ProjectionExpression=not_before,
                    ScanIndexForward=True,
                    Limit=1,
                )
            items = response.get("Items", [])
            return int(items[0][schema.NOT_BEFORE_MS]["N"]) if items else None

        found = await asyncio.gather(*(first(sh) for sh in schema.all_orphan_shards(self._shards)))
        return min((t for t in found if t is not None), default=None)

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

    async def session_history(self, session_id: str) -> Sequence[SessionEvent]:
        pk_name, pk_names = name(schema.PK)
        events: list[SessionEvent] = []
        start: Mapping[str, Any] | None = None
        while True:
            extra: dict[str, Any] = {"ExclusiveStartKey": start} if start else {}
            self._on_request("Query")
            with unavailable_as(StoreUnavailable, "session_history"):
                response = await self._client.query(
                    TableName=self._tables.events,
                    KeyConditionExpression=f"{pk_name} = :pk",
                    ExpressionAttributeNames=pk_names,
                    ExpressionAttributeValues={":pk": s(schema.session_events_key(session_id))},
                    ConsistentRead=True,
                    ScanIndexForward=True,
                    **extra,
                )
            events.extend(session_event_from_item(item) for item in response.get("Items", []))
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
