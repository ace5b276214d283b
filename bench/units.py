"""DynamoDB capacity units, computed from the requests and items that pass through a client
wrapper, by the documented rules (moto's own ConsumedCapacity is a constant per call — 1.0,
0.5, or 2.0 per transaction item — whatever the item size or indexes, so it cannot be used):

- item size: attribute names plus values (strings: UTF-8 bytes; numbers: about one byte per
  two significant digits, plus one); reads round up to 4 KB, writes to 1 KB;
- GetItem: 1 RCU per 4 KB strongly consistent (0.5 eventually); a missing item still costs 1;
- Query: the returned items' total size rounded up to 4 KB, x 0.5 if eventually consistent (a
  GSI always is); an empty result is charged as one read (0.5 RCU) — assumption;
- BatchGetItem: each item on its own, rounded up to 4 KB, x 0.5 (eventually consistent);
- UpdateItem / Put in BatchWriteItem: 1 WCU per KB of the larger of the old and new item; a
  refused conditional write still consumes it;
- TransactWriteItems: 2 WCU per KB per item;
- GSI (the sparse, ALL-projected orphan index): a write that changes the index key
  (available_at_ms or orphan_shard) costs 2 index WCU (delete + put), one that adds the item
  to or removes it from the index 1, one that updates another attribute of an indexed item 1;
  index writes caused by a transaction are counted at the standard rate — assumption.
"""

import math
from collections import Counter, defaultdict
from typing import Any

from botocore.exceptions import ClientError

from adapters.dynamodb import schema

INDEX_KEYS = (schema.AVAILABLE_AT_MS, schema.ORPHAN_SHARD)


def item_size(item: dict[str, Any]) -> int:
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


class Meter:
    """Totals per API and per table/index: requests, RCU, WCU."""

    def __init__(self) -> None:
        self.requests: Counter[str] = Counter()
        self.rcu: defaultdict[str, float] = defaultdict(float)
        self.wcu: defaultdict[str, float] = defaultdict(float)
        self.items: dict[str, dict[str, Any]] = {}  # the last full item seen, per pk
        self.largest_item = 0

    def remember(self, item: dict[str, Any] | None) -> None:
        if item and schema.PK in item and len(item) > 3:  # a full item, not a projection
            self.items[item[schema.PK]["S"]] = item
            self.largest_item = max(self.largest_item, item_size(item))

    def size_of(self, key: dict[str, Any]) -> int:
        item = self.items.get(key[schema.PK]["S"])
        return item_size(item) if item else 300

    def update(
        self, api: str, kwargs: dict[str, Any], after: dict[str, Any] | None, x: int
    ) -> None:
        table = kwargs["TableName"]
        before = self.items.get(kwargs["Key"][schema.PK]["S"])
        size = max(item_size(before) if before else 0, item_size(after) if after else 0)
        self.wcu[f"{api} {table}"] += x * _kb(size or self.size_of(kwargs["Key"]), 1024)
        expression = kwargs.get("UpdateExpression", "")
        names = kwargs.get("ExpressionAttributeNames", {})
        touched = {names.get(token, token) for token in expression.replace(",", " ").split()}
        was_in = before is not None and schema.ORPHAN_SHARD in before
        now_in = (after or before or {}).get(schema.ORPHAN_SHARD) is not None
        if after is not None:
            now_in = schema.ORPHAN_SHARD in after
        if was_in or now_in:
            changes_key = bool(touched & set(INDEX_KEYS))
            writes = 2 if (changes_key and was_in and now_in) else 1
            self.wcu[f"{api} {table} index"] += writes * _kb(size or 300, 1024)
        self.remember(after)


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
            try:
                response = await real(**kwargs)
            except ClientError as exc:
                self._charge_refused(api, kwargs, exc)
                raise
            self._charge(api, kwargs, response)
            return response

        return call

    def _charge(self, api: str, kwargs: dict[str, Any], response: dict[str, Any]) -> None:
        m = self.meter
        if api == "get_item":
            item = response.get("Item")
            m.remember(item)
            factor = 1.0 if kwargs.get("ConsistentRead") else 0.5
            m.rcu[f"{api} {kwargs['TableName']}"] += factor * _kb(item_size(item or {}), 4096)
        elif api == "query":
            items = response.get("Items", [])
            for item in items:
                m.remember(item)
            factor = 1.0 if kwargs.get("ConsistentRead") else 0.5
            where = kwargs["TableName"] + (" index" if "IndexName" in kwargs else "")
            size = sum(item_size(i) for i in items)
            m.rcu[f"{api} {where}"] += factor * _kb(size, 4096)
        elif api == "batch_get_item":
            for table, found in response.get("Responses", {}).items():
                m.rcu[f"{api} {table}"] += sum(0.5 * _kb(m.size_of(i), 4096) for i in found)
        elif api == "update_item":
            m.update(api, kwargs, response.get("Attributes"), 1)
        elif api == "transact_write_items":
            for entry in kwargs["TransactItems"]:
                if "Update" in entry:
                    m.update(api, entry["Update"], None, 2)
                elif "Put" in entry:
                    put = entry["Put"]
                    m.wcu[f"{api} {put['TableName']}"] += 2 * _kb(item_size(put["Item"]), 1024)
        elif api == "batch_write_item":
            for table, requests in kwargs["RequestItems"].items():
                for request in requests:
                    item = request["PutRequest"]["Item"]
                    m.wcu[f"{api} {table}"] += _kb(item_size(item), 1024)

    def _charge_refused(self, api: str, kwargs: dict[str, Any], exc: ClientError) -> None:
        if api == "update_item":
            key = kwargs["Key"]
            self.meter.wcu[f"{api} {kwargs['TableName']} (refused)"] += _kb(
                self.meter.size_of(key), 1024
            )
            refused: Any = exc.response.get("Item")
            self.meter.remember(refused)
        elif api == "transact_write_items":
            for entry in kwargs["TransactItems"]:
                for body in entry.values():
                    self.meter.wcu[f"{api} {body['TableName']} (cancelled)"] += 2
