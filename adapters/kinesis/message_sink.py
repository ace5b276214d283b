"""KinesisMessageSink: the message sink port on a Kinesis data stream (PutRecords).

Aggregation: a connection's messages of one batch go into one record, in seq order, as many
as its 1 MiB holds (adapters/kinesis/records.py has the format), so a connection at any rate
is stored at one request per batch, and the stream counts (and bills) records, not messages.

Order: the partition key is the connection id, so a connection's records land on one shard in
the order they are put. A PutRecords request may fail some of its records (FailedRecordCount,
an ErrorCode per record, in request order) while later ones land; if a connection had two
records in one request, its second could then land before its first is retried. So a batch is
sent in rounds, each holding at most one record per connection (its next one), and a round's
failed records are retried (alone) before the next round goes: a connection never gets a later
record in before an earlier one. A round is needed per 1 MiB of one connection's batch: one
request per batch unless a connection's messages of a batch exceed a record.

Limits: 500 records and 5 MiB per request (a round larger than either is sent in several
requests); 1 MiB per record, so `max_message_bytes` leaves room for the record's other fields
(a message alone must fit a record; a larger one is refused, alone). Failed records are
retried with full-jitter back-off for at most `retry_budget_s`; then, or on an error for the
whole request after botocore's own retries (throttling, an outage), the batch fails as
SinkUnavailable, never as a message's fault: the writer retries the whole batch.

What Kinesis cannot do, and who does it instead:
- It cannot refuse anything: no fencing of a stale owner's late records, and a retried batch
  puts its records again. Readers apply one rule (`KinesisMessageReader`): a (connection, seq)
  already seen is dropped, the copy with the higher token kept.
- It cannot say what it holds, so `resume_point` is None: the worker records checkpoints with
  the connection (WSFLEET_CHECKPOINT_INTERVAL_S), and a takeover replays what came after the
  last one: duplicates (dropped by the reader's rule) bounded by rate x interval, none lost.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

import aiohttp
from botocore.exceptions import BotoCoreError, ClientError

from adapters.backoff import delay_s  # the same full-jitter rule
from adapters.kinesis.records import RECORD_LIMIT_BYTES, Record, records_of
from application.errors import ConfigurationError, SinkRefused, SinkUnavailable
from application.ports.sink import StoredMessage, storable

MAX_RECORDS = 500
MAX_REQUEST_BYTES = 5 * 1_048_576
# The JSON around the data in a record of one message: names, numbers, a 128-character
# connection id (in the record and its partition key) and a 256-character worker session
# (escaped at worst 6 bytes each), with room to spare.
RECORD_OVERHEAD_BYTES = 4096
# Data is JSON-escaped in the record: a control character takes six bytes. The limit is the
# service's for the record, so a message whose escaped form is larger is refused as invalid.
MAX_MESSAGE_BYTES = RECORD_LIMIT_BYTES - RECORD_OVERHEAD_BYTES

_REQUEST_FAILURES = (ClientError, BotoCoreError, aiohttp.ClientError, OSError, TimeoutError)
_RETRY_BASE_S = 0.05
_RETRY_CAP_S = 1.0


class KinesisMessageSink:
    max_batch = MAX_RECORDS
    max_message_bytes = MAX_MESSAGE_BYTES

    def __init__(
        self,
        client: Any,
        stream: str,
        *,
        retry_budget_s: float = 5.0,
        on_retry: Callable[[int], None] | None = None,
    ) -> None:
        """`stream`: the stream's name or ARN. `on_retry(n)`: told of every retry of failed
        records holding n messages (a metric of messages)."""
        if not stream:
            raise ConfigurationError("the Kinesis sink needs a stream name or ARN")
        if retry_budget_s <= 0:
            raise ConfigurationError(f"retry_budget_s must be positive, got {retry_budget_s}")
        self._client = client
        self._target = (
            {"StreamARN": stream} if stream.startswith("arn:") else {"StreamName": stream}
        )
        self._retry_budget_s = retry_budget_s
        self._on_retry = on_retry
        # "write", "PutRecords", "records" and "messages" sent (retries included), "failed"
        # (records)
        self.operations: dict[str, int] = {}

    async def write(self, messages: Sequence[StoredMessage]) -> None:
        if len(messages) > self.max_batch:
            raise ValueError(f"batch of {len(messages)} exceeds max_batch {self.max_batch}")
        self._count("write")
        unique = {(m.connection_id, m.seq): m for m in messages}
        invalid: set[tuple[str, int]] = set()
        runs: dict[str, list[StoredMessage]] = {}
        for key, m in unique.items():
            if storable(m, self.max_message_bytes):
                runs.setdefault(m.connection_id, []).append(m)
            else:
                invalid.add(key)
        # Each connection's records, in seq order: its k-th goes in round k.
        records: list[list[Record]] = []
        for connection_id, run in runs.items():
            packed, too_large = records_of(connection_id, sorted(run, key=lambda m: m.seq))
            invalid.update((connection_id, m.seq) for m in too_large)
            records.append(packed)
        deadline = time.monotonic() + self._retry_budget_s
        for k in range(max(map(len, records), default=0)):
            round_ = [packed[k] for packed in records if k < len(packed)]
            for request in _requests(round_):
                await self._put(request, deadline)
        if invalid:
            raise SinkRefused(invalid=frozenset(invalid))

    async def resume_point(self, connection_id: str, checkpoint_seq: int) -> int | None:
        return None  # a stream cannot say what it holds

    async def _put(self, records: list[Record], deadline: float) -> None:
        attempt = 0
        while True:
            self._count("PutRecords")
            self._count("records", len(records))
            self._count("messages", sum(r.messages for r in records))
            entries = [r.entry for r in records]
            try:
                response = await self._client.put_records(Records=entries, **self._target)
            except _REQUEST_FAILURES as exc:
                # Whatever the service or the network answers for the whole request is an
                # outage, never a message's fault: the writer retries the batch with back-off
                # (a missing stream or a refused permission too, named in the message).
                raise SinkUnavailable(f"Kinesis PutRecords failed: {_describe(exc)}") from exc
            if not response.get("FailedRecordCount"):
                return
            results = response["Records"]
            records = [
                r for r, result in zip(records, results, strict=True) if "ErrorCode" in result
            ]
            attempt += 1
            self._count("failed", len(records))
            if self._on_retry is not None:
                self._on_retry(sum(r.messages for r in records))  # the metric counts messages
            pause = delay_s(attempt, _RETRY_BASE_S, _RETRY_CAP_S)
            if time.monotonic() + pause > deadline:
                codes = sorted({result["ErrorCode"] for result in results if "ErrorCode" in result})
                raise SinkUnavailable(
                    f"Kinesis PutRecords: {len(records)} records still failing after "
                    f"{attempt} attempts ({', '.join(codes)})"
                )
            await asyncio.sleep(pause)

    def _count(self, name: str, value: int = 1) -> None:
        self.operations[name] = self.operations.get(name, 0) + value


def _requests(records: list[Record]) -> list[list[Record]]:
    """A round cut into requests within the per-request limits (order kept)."""
    requests: list[list[Record]] = []
    size = 0
    for record in records:
        if (
            not requests
            or len(requests[-1]) == MAX_RECORDS
            or size + record.size > MAX_REQUEST_BYTES
        ):
            requests.append([])
            size = 0
        requests[-1].append(record)
        size += record.size
    return requests


def _describe(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code")
        if code:
            return str(code)
    return f"{type(exc).__name__}: {exc}"
