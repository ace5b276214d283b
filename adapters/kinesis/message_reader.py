"""Reading a connection's messages back from a Kinesis stream, exactly once.

A stream cannot be queried by connection: every shard is read from the oldest record kept
(TRIM_HORIZON) to the tip, and the connection's records picked out by partition key. The
reader keeps what it found and where it left each shard, so the next call for that connection
reads only what was added since (`wsfleet messages` asks page after page, and `--follow`
every second); an iterator that expired meanwhile (five minutes) starts the scan again. The
first call still reads the stream's whole retention: fine for an operator's look and for
tests, not for a consumer, which reads the stream as it flows (KCL, Lambda, Firehose) and
applies the same rule as `exactly_once` below.

A record holds a run of one connection's messages (records.py: format 2, aggregated; format 1,
one message, from before): each is de-aggregated into its messages, in the record's order.
The rule then applies per message, for a sink that can neither refuse a stale owner's late
records nor keep a retried batch from putting its records twice: of the messages of one
(connection, seq), keep the one with the highest token (the newest owner's), and of equal
tokens the first.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import aiohttp
import attrs
from botocore.exceptions import BotoCoreError, ClientError

from adapters.kinesis.records import messages_of
from application.errors import SinkUnavailable
from application.ports.sink import StoredMessage


def exactly_once(messages: Iterable[StoredMessage]) -> list[StoredMessage]:
    """One message per seq, by the rule above, in seq order."""
    kept: dict[int, StoredMessage] = {}
    for message in messages:
        seen = kept.get(message.seq)
        if seen is None or message.token > seen.token:
            kept[message.seq] = message
    return [kept[seq] for seq in sorted(kept)]


_READ_FAILURES = (ClientError, BotoCoreError, aiohttp.ClientError, OSError, TimeoutError)


@attrs.define
class _Scan:
    """One connection's records read so far, and where each shard was left: the iterator to
    go on from, or None once a closed shard (after a resharding) was read to its end."""

    copies: list[StoredMessage] = attrs.Factory(list)
    after: dict[str, str | None] = attrs.Factory(dict)


class KinesisMessageReader:
    def __init__(self, client: Any, stream: str, *, page: int = 1000) -> None:
        self._client = client
        self._target = (
            {"StreamARN": stream} if stream.startswith("arn:") else {"StreamName": stream}
        )
        self._page = page
        self._scans: dict[str, _Scan] = {}

    async def messages(
        self, connection_id: str, from_seq: int = 0, limit: int | None = None
    ) -> list[StoredMessage]:
        return exactly_once(await self.copies(connection_id, from_seq))[:limit]

    async def copies(self, connection_id: str, from_seq: int = 0) -> list[StoredMessage]:
        """Every record of the connection with seq >= from_seq, copies included, in the order
        its shard holds them: what a consumer receives before the rule (a judge counts the
        duplicates in it). Raises SinkUnavailable."""
        scan = self._scans.setdefault(connection_id, _Scan())
        try:
            try:
                await self._catch_up(connection_id, scan)
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "ExpiredIteratorException":
                    raise
                scan = self._scans[connection_id] = _Scan()  # read it all again
                await self._catch_up(connection_id, scan)
        except _READ_FAILURES as exc:
            raise SinkUnavailable(f"Kinesis read failed: {type(exc).__name__}: {exc}") from exc
        return [m for m in scan.copies if m.seq >= from_seq]

    async def _catch_up(self, connection_id: str, scan: _Scan) -> None:
        """Every shard read on from where `scan` left it, to its tip."""
        for shard in await self._shards():
            if shard in scan.after and scan.after[shard] is None:
                continue  # closed and read to its end
            iterator = scan.after.get(shard) or await self._oldest(shard)
            while iterator:
                response = await self._client.get_records(ShardIterator=iterator, Limit=self._page)
                for record in response["Records"]:
                    if record.get("PartitionKey") != connection_id:
                        continue
                    # An aggregated record holds a run of the connection's messages.
                    scan.copies += [
                        m for m in messages_of(record["Data"]) if m.connection_id == connection_id
                    ]
                # Only now: a read that fails before this point is read again next time.
                iterator = scan.after[shard] = response.get("NextShardIterator")
                if not response["Records"] and not response.get("MillisBehindLatest"):
                    break  # at the tip

    async def _shards(self) -> list[str]:
        shards: list[str] = []
        request: dict[str, Any] = dict(self._target)
        while True:
            response = await self._client.list_shards(**request)
            shards += [shard["ShardId"] for shard in response["Shards"]]
            token = response.get("NextToken")
            if not token:
                return shards
            request = {"NextToken": token}

    async def _oldest(self, shard: str) -> str:
        response = await self._client.get_shard_iterator(
            ShardId=shard, ShardIteratorType="TRIM_HORIZON", **self._target
        )
        iterator: str = response["ShardIterator"]
        return iterator
