"""DynamoDB capacity units, computed from the requests and items that pass through a client
wrapper, by the documented rules (moto's and DynamoDB Local's ConsumedCapacity are constants
per call, whatever the item size or indexes, so they cannot be used):

- item size: attribute names plus values (strings: UTF-8 bytes; numbers: about one byte per
  two significant digits, plus one); reads round up to 4 KB, writes to 1 KB;
- GetItem: 1 RRU per 4 KB strongly consistent (0.5 eventually); a missing item still costs 1;
- Query / Scan: the returned items' total size rounded up to 4 KB, x 0.5 if eventually
  consistent (a GSI always is; a KEYS_ONLY index returns keys only); an empty result is
  charged as one read — assumption;
- BatchGetItem: each item on its own, rounded up to 4 KB, x 0.5 unless ConsistentRead;
- UpdateItem / PutItem / DeleteItem (and Put in BatchWriteItem): 1 WRU per KB of the larger of
  the old and new item; a refused conditional write still consumes it;
- TransactWriteItems: 2 WRU per KB per item, a ConditionCheck included (AWS bills a transaction's
  condition checks as transactional writes: the conservative reading — assumption);
- GSIs (from adapters/dynamodb/tables.py, so the real projections): a write that moves an item's
  key within an index costs 2 index WRU (delete + put), one that adds the item to or removes it
  from the index 1, one that changes a projected attribute of an indexed item 1 (with a
  KEYS_ONLY index, only key changes count); index writes caused by a transaction are counted
  at the standard rate — assumption.

Old and new items are read around each write with unmetered consistent GetItems on the inner
client, so the index rules see exact items (the bench counts units, it does not time calls).
"""

import math
from collections import Counter, defaultdict
from typing import Any

from botocore.exceptions import ClientError

from adapters.dynamodb import schema
from adapters.dynamodb.schema import TableNames
from adapters.dynamodb.tables import table_definitions

Item = dict[str, Any]


def item_size(item: Item) -> int:
    size = 0
    for name, value in item.items():
        size += len(name.encode())
        if "S" in value:
            size += len(value["S"].encode())
        elif "N" in value:
            digits = value["N"].lstrip("-").replace(".", "").strip("0") or "0"
            size += math.ceil(len(digits) / 2) + 1
        else:
            size += 1
    return size


def _kb(size: int, unit: int) -> int:
    return max(1, math.ceil(size / unit))


class Index:
    """One GSI: its key attributes and what it projects."""

    def __init__(self, definition: dict[str, Any]) -> None:
        self.name: str = definition["IndexName"]
        self.keys = [k["AttributeName"] for k in definition["KeySchema"]]
        self.projection: str = definition["Projection"]["ProjectionType"]

    def writes(self, before: Item | None, after: Item | None) -> int:
        """Index writes (of up to 1 KB each) that turning `before` into `after` costs."""
        was_in = before is not None and all(k in before for k in self.keys)
        now_in = after is not None and all(k in after for k in self.keys)
        if not (was_in or now_in):
            return 0
        if was_in != now_in:
            return 1
        assert before is not None
        assert after is not None
        if any(before[k] != after[k] for k in self.keys):
            return 2
        if self.projection == "ALL" and before != after:
            return 1
        return 0


class Meter:
    """Totals per API and per table/index: requests, RRU, WRU."""

    def __init__(self, tables: TableNames | None = None) -> None:
        self.requests: Counter[str] = Counter()
        self.rcu: defaultdict[str, float] = defaultdict(float)
        self.wcu: defaultdict[str, float] = defaultdict(float)
        self.indexes: dict[str, list[Index]] = {
            d["TableName"]: [Index(i) for i in d.get("GlobalSecondaryIndexes", [])]
            for d in table_definitions(tables or TableNames())
        }
        self.sorted_tables = {
            d["TableName"]
            for d in table_definitions(tables or TableNames())
            if len(d["KeySchema"]) > 1
        }
        self.largest_item = 0

    def clear(self) -> None:
        self.requests.clear()
        self.rcu.clear()
        self.wcu.clear()

    def write(
        self, api: str, table: str, before: Item | None, after: Item | None, factor: int
    ) -> None:
        size = max(item_size(before or {}), item_size(after or {}))
        self.largest_item = max(self.largest_item, size)
        self.wcu[f"{api} {table}"] += factor * _kb(size, 1024)
        for index in self.indexes.get(table, []):
            writes = index.writes(before, after)
            if writes:
                self.wcu[f"{api} {table} {index.name}"] += writes * _kb(size, 1024)

    @property
    def total_rcu(self) -> float:
        return sum(self.rcu.values())

    @property
    def total_wcu(self) -> float:
        return sum(self.wcu.values())


class MeteringClient:
    """Wraps an aiobotocore DynamoDB client; every call is counted and charged (see module)."""

    def __init__(self, inner: Any, meter: Meter) -> None:
        self._inner = inner
        self.meter = meter

    def __getattr__(self, api: str) -> Any:
        real = getattr(self._inner, api)
        if not callable(real) or api.startswith("get_waiter"):
            return real

        async def call(**kwargs: Any) -> Any:
            self.meter.requests[api] += 1
            written = self._written(api, kwargs)
            before = {k: await self._peek(*k) for k in written}
            try:
                response = await real(**kwargs)
            except ClientError:
                self._charge_writes(api, kwargs, before, before)  # refused: still consumed
                raise
            after = {k: await self._peek(*k) for k in written}
            self._charge_reads(api, kwargs, response)
            self._charge_writes(api, kwargs, before, after)
            return response

        return call

    @staticmethod
    def _written(api: str, kwargs: dict[str, Any]) -> list[tuple[str, str]]:
        """(table, pk) of each item the call may write or check."""
        if api in ("update_item", "delete_item"):
            return [(kwargs["TableName"], kwargs["Key"][schema.PK]["S"])]
        if api == "put_item":
            return [(kwargs["TableName"], kwargs["Item"][schema.PK]["S"])]
        if api == "transact_write_items":
            found = []
            for entry in kwargs["TransactItems"]:
                for op, body in entry.items():
                    keyed = body["Item"] if op == "Put" else body["Key"]
                    found.append((body["TableName"], keyed[schema.PK]["S"]))
            return found
        return []

    async def _peek(self, table: str, pk: str) -> Item | None:
        """The item now (unmetered). Only hash-key tables are peeked: the event and message
        tables are append-only (a Put there never has an old item worth charging)."""
        if table not in self.meter.indexes or table in self.meter.sorted_tables:
            return None
        response = await self._inner.get_item(
            TableName=table, Key={schema.PK: {"S": pk}}, ConsistentRead=True
        )
        item: Item | None = response.get("Item")
        return item

    def _charge_reads(self, api: str, kwargs: dict[str, Any], response: dict[str, Any]) -> None:
        m = self.meter
        if api == "get_item":
            factor = 1.0 if kwargs.get("ConsistentRead") else 0.5
            size = item_size(response.get("Item") or {})
            m.rcu[f"{api} {kwargs['TableName']}"] += factor * _kb(size, 4096)
        elif api in ("query", "scan"):
            items = response.get("Items", [])
            factor = 1.0 if kwargs.get("ConsistentRead") else 0.5
            where = kwargs["TableName"] + (
                f" {kwargs['IndexName']}" if "IndexName" in kwargs else ""
            )
            size = sum(item_size(i) for i in items)
            m.rcu[f"{api} {where}"] += factor * _kb(size, 4096)
        elif api == "batch_get_item":
            for table, found in response.get("Responses", {}).items():
                request = kwargs["RequestItems"][table]
                factor = 1.0 if request.get("ConsistentRead") else 0.5
                m.rcu[f"{api} {table}"] += sum(factor * _kb(item_size(i), 4096) for i in found)

    def _charge_writes(
        self,
        api: str,
        kwargs: dict[str, Any],
        before: dict[tuple[str, str], Item | None],
        after: dict[tuple[str, str], Item | None],
    ) -> None:
        m = self.meter
        if api in ("update_item", "delete_item", "put_item"):
            ((where, old),) = before.items()
            new = after[where] if api != "put_item" or after[where] else kwargs["Item"]
            m.write(api, where[0], old, new, 1)
        elif api == "transact_write_items":
            for entry in kwargs["TransactItems"]:
                for op, body in entry.items():
                    table = body["TableName"]
                    keyed = body["Item"] if op == "Put" else body["Key"]
                    where = (table, keyed[schema.PK]["S"])
                    old, new = before.get(where), after.get(where)
                    if op == "Put" and new is None:
                        new = body["Item"]  # an append-only table (not peeked) or refused
                    if op == "ConditionCheck":
                        size = max(item_size(old or {}), 1)
                        m.wcu[f"{api} {table} (check)"] += 2 * _kb(size, 1024)
                    else:
                        m.write(api, table, old, new, 2)
        elif api == "batch_write_item":
            for table, requests in kwargs["RequestItems"].items():
                for request in requests:
                    m.write(api, table, None, request["PutRequest"]["Item"], 1)
