"""PostgresMessageSink: the message sink port on PostgreSQL (the `messages` table of the
fleet's database).

A batch is one statement in one transaction: every message of it in one multi-row
`INSERT ... SELECT FROM unnest(...) ON CONFLICT (connection_id, seq) DO UPDATE ... WHERE`, the
fence in the statement itself (a rewrite only under a token no older than the row's and with
the same data; the row lock of the conflict makes it exact against a concurrent writer).
`RETURNING` names what was written; whatever was not is read back in the same transaction to
say why (stale or conflicting: SinkRefused, raised after the rest is committed). A batch that
holds one seq twice is written in rounds (one statement may not change a row twice).

`resume_point` walks the primary key from the checkpoint, reading (seq, prev_seq) a page at a
time, and stops at the first hole (`follow_links`): no page past it is read.

PostgreSQL text holds no NUL character: a message containing one is refused as invalid, like
one above `max_message_bytes`.
"""

from collections.abc import Sequence

import asyncpg

from adapters.postgres.db import PostgresDatabase
from adapters.postgres.schema import MESSAGES, Conn
from application.errors import ConfigurationError, SinkRefused
from application.ports.sink import StoredMessage, follow_links, storable

DEFAULT_MAX_BATCH = 500
# PostgreSQL stores text values up to 1 GB; the bound keeps a whole batch of the largest
# messages within a worker's memory (the same as the SQLite sink's).
MAX_MESSAGE_BYTES = 16 * 2**20
DEFAULT_LINK_PAGE = 1000

_COLUMNS = "connection_id, seq, prev_seq, token, received_at_ms, worker_id, data"
_UPSERT = (
    f"INSERT INTO {MESSAGES} AS m ({_COLUMNS}) "
    "SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], "
    "$6::text[], $7::text[]) "
    "ON CONFLICT (connection_id, seq) DO UPDATE SET data = excluded.data, "
    "prev_seq = excluded.prev_seq, token = excluded.token, "
    "received_at_ms = excluded.received_at_ms, worker_id = excluded.worker_id, "
    "writes = m.writes + 1 "
    # The fence: never under an older token, never other data.
    "WHERE m.token <= excluded.token AND m.data = excluded.data "
    "RETURNING m.connection_id, m.seq"
)
_STORED = (
    f"SELECT m.connection_id, m.seq, m.token, m.data FROM {MESSAGES} AS m "
    "JOIN unnest($1::text[], $2::bigint[]) AS k(connection_id, seq) "
    "ON m.connection_id = k.connection_id AND m.seq = k.seq"
)
_LINKS = (
    f"SELECT seq, prev_seq FROM {MESSAGES} WHERE connection_id = $1 AND seq > $2 "
    "ORDER BY seq LIMIT $3"
)
_PAGE = (
    f"SELECT {_COLUMNS} FROM {MESSAGES} WHERE connection_id = $1 AND seq >= $2 "
    "ORDER BY seq LIMIT $3"
)
_SEQS = f"SELECT seq FROM {MESSAGES} WHERE connection_id = $1 ORDER BY seq"
_REWRITES = (
    f"SELECT connection_id, SUM(writes - 1) FROM {MESSAGES} WHERE writes > 1 GROUP BY connection_id"
)

Key = tuple[str, int]


class PostgresMessageSink:
    def __init__(
        self,
        db: PostgresDatabase,
        *,
        max_batch: int = DEFAULT_MAX_BATCH,
        link_page: int = DEFAULT_LINK_PAGE,
    ) -> None:
        if max_batch < 1 or link_page < 1:
            raise ConfigurationError(
                f"max_batch and link_page must be at least 1, got {max_batch} and {link_page}"
            )
        self._db = db
        self.max_batch = max_batch
        self.max_message_bytes = MAX_MESSAGE_BYTES
        self._link_page = link_page

    async def write(self, messages: Sequence[StoredMessage]) -> None:
        if len(messages) > self.max_batch:
            raise ValueError(f"batch of {len(messages)} exceeds max_batch {self.max_batch}")
        if not messages:
            return
        invalid = frozenset(
            (m.connection_id, m.seq)
            for m in messages
            if not storable(m, self.max_message_bytes) or "\x00" in m.data
        )
        rounds = _rounds([m for m in messages if (m.connection_id, m.seq) not in invalid])

        async def upsert(c: Conn) -> tuple[set[Key], set[Key]]:
            stale: set[Key] = set()
            conflicts: set[Key] = set()
            for batch in rounds:
                written = {(r[0], r[1]) for r in await c.fetch(_UPSERT, *_columns(batch))}
                refused = {
                    (m.connection_id, m.seq): m
                    for m in batch
                    if (m.connection_id, m.seq) not in written
                }
                if not refused:
                    continue
                ids, seqs = zip(*refused, strict=True)
                for row in await c.fetch(_STORED, list(ids), list(seqs)):
                    key = (row["connection_id"], row["seq"])
                    mine = refused[key]
                    (stale if row["token"] > mine.token else conflicts).add(key)
            return stale, conflicts

        stale, conflicts = await self._db.write(upsert)
        if stale or conflicts or invalid:
            raise SinkRefused(
                stale=frozenset(stale), conflicts=frozenset(conflicts), invalid=invalid
            )

    async def resume_point(self, connection_id: str, checkpoint_seq: int) -> int:
        async def walk(c: Conn) -> int:
            current = checkpoint_seq
            while True:
                page = await c.fetch(_LINKS, connection_id, current, self._link_page)
                current, hole = follow_links(current, ((r[0], r[1]) for r in page))
                if hole or len(page) < self._link_page:
                    return current

        return await self._db.read(walk)

    async def read(self, connection_id: str) -> list[StoredMessage]:
        """Every stored message of a connection, in seq order."""
        return await self.messages(connection_id)

    async def messages(
        self, connection_id: str, from_seq: int = 0, limit: int | None = None
    ) -> list[StoredMessage]:
        """Up to `limit` stored messages from `from_seq` on, in seq order (the primary key's)."""
        rows = await self._db.read(lambda c: c.fetch(_PAGE, connection_id, from_seq, limit))
        return [_message_from_row(row) for row in rows]

    async def seqs(self, connection_id: str) -> list[int]:
        rows = await self._db.read(lambda c: c.fetch(_SEQS, connection_id))
        return [int(row[0]) for row in rows]

    async def rewrites(self) -> dict[str, int]:
        """Per connection, how many writes hit a seq that was already stored (absent: none)."""
        rows = await self._db.read(lambda c: c.fetch(_REWRITES))
        return {str(row[0]): int(row[1]) for row in rows}


def _rounds(messages: Sequence[StoredMessage]) -> list[list[StoredMessage]]:
    """The batch split so that no round holds one key twice, in batch order."""
    rounds: list[list[StoredMessage]] = []
    seen: dict[Key, int] = {}
    for m in messages:
        key = (m.connection_id, m.seq)
        n = seen.get(key, -1) + 1
        seen[key] = n
        if n == len(rounds):
            rounds.append([])
        rounds[n].append(m)
    return rounds


def _columns(batch: Sequence[StoredMessage]) -> list[list[object]]:
    return [
        [m.connection_id for m in batch],
        [m.seq for m in batch],
        [m.prev_seq for m in batch],
        [m.token for m in batch],
        [m.received_at_ms for m in batch],
        [m.worker_id for m in batch],
        [m.data for m in batch],
    ]


def _message_from_row(row: asyncpg.Record) -> StoredMessage:
    return StoredMessage(
        connection_id=row["connection_id"],
        seq=row["seq"],
        data=row["data"],
        received_at_ms=row["received_at_ms"],
        worker_id=row["worker_id"],
        token=row["token"],
        prev_seq=row["prev_seq"],
    )
