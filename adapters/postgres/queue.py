"""PostgresNotificationQueue: the hint queue in the fleet's PostgreSQL database, with SQS's
delivery semantics (the contract's): at least once, a delay, a visibility timeout, give-back.

A receive claims visible rows with `FOR UPDATE SKIP LOCKED` in one UPDATE: each gets a fresh
receipt and becomes invisible until now + the visibility timeout, so one consumer on any host
holds it at a time and concurrent receivers skip each other's rows instead of queueing behind
them; not deleted in time, a hint is delivered again. Times are the injected clock's wall
time (comparable across hosts whose clocks are in sync, as the leases already need).

Waking: a send (and a give-back) NOTIFYs `wsfleet_hints` in its transaction; a waiting
receiver LISTENs on a connection of its own and claims again at once when woken. A
notification is not durable (one sent while nobody listens is gone), so it only wakes: a
waiting receiver also looks every `poll_interval_s` (a delayed hint is found that way), and a
lost listener connection means polling until it is made again. `listen_url` is where the
LISTEN connection goes (the pool's URL; behind PgBouncer in transaction mode, where LISTEN does
not work, the server's own); None polls only.

Bounded (`max_depth`) and aged out (`retention_s`) as the SQLite queue is: hints are
droppable, reconciliation finds every orphan from the store.
"""

import asyncio
import secrets
from collections.abc import Sequence

import asyncpg

from adapters.postgres.db import PostgresDatabase
from adapters.postgres.schema import HINTS, HINTS_CHANNEL, Conn
from adapters.sqlite.hints import delivery_of, encode_hint  # the one hint format, pure JSON
from application.errors import QueueUnavailable
from application.ports import Clock
from application.ports.queue import Delivery, HintOrigin, check_delay

MAX_MESSAGES = 10  # per receive, as SQS
DEFAULT_VISIBILITY_TIMEOUT_S = 30.0
DEFAULT_POLL_INTERVAL_S = 1.0
DEFAULT_MAX_DEPTH = 10_000
DEFAULT_RETENTION_S = 3600.0
LISTEN_CONNECT_TIMEOUT_S = 5.0

_NOTIFY = f"SELECT pg_notify('{HINTS_CHANNEL}', '')"
_DEPTH = f"SELECT count(*) FROM {HINTS}"
_DROP_OLD = f"DELETE FROM {HINTS} WHERE sent_at_ms < $1"
_INSERT = (
    f"INSERT INTO {HINTS} (body, sent_at_ms, visible_at_ms) "
    "SELECT body, $2, $3 FROM unnest($1::text[]) AS b(body)"
)
_DROP_EXPIRED = f"DELETE FROM {HINTS} WHERE visible_at_ms <= $1 AND sent_at_ms < $2"
# The receipt is the row id and this claim's nonce: a receipt of an earlier delivery of the same
# row no longer matches once the row is claimed again.
_CLAIM = f"""
WITH picked AS (
    SELECT id FROM {HINTS} WHERE visible_at_ms <= $1
    ORDER BY visible_at_ms, id LIMIT $2 FOR UPDATE SKIP LOCKED
)
UPDATE {HINTS} AS h SET receipt = h.id::text || ':' || $3, visible_at_ms = $4,
    receive_count = h.receive_count + 1
FROM picked WHERE h.id = picked.id
RETURNING h.id, h.body, h.receipt
"""
_DELETE = (
    f"DELETE FROM {HINTS} AS h USING unnest($1::bigint[], $2::text[]) AS r(id, receipt) "
    "WHERE h.id = r.id AND h.receipt = r.receipt"
)
_RELEASE = (
    f"UPDATE {HINTS} AS h SET receipt = NULL, visible_at_ms = $3 "
    "FROM unnest($1::bigint[], $2::text[]) AS r(id, receipt) "
    "WHERE h.id = r.id AND h.receipt = r.receipt"
)


class PostgresNotificationQueue:
    def __init__(
        self,
        db: PostgresDatabase,
        clock: Clock,
        *,
        listen_url: str | None = None,
        visibility_timeout_s: float = DEFAULT_VISIBILITY_TIMEOUT_S,
        poll_interval_s: float = DEFAULT_POLL_INTERVAL_S,
        max_depth: int = DEFAULT_MAX_DEPTH,
        retention_s: float = DEFAULT_RETENTION_S,
    ) -> None:
        """`listen_url` is a secret, like every URL here: never logged."""
        if visibility_timeout_s <= 0 or poll_interval_s <= 0 or max_depth < 1 or retention_s <= 0:
            raise ValueError("visibility timeout, poll interval, depth and retention must be > 0")
        self._db = db
        self._clock = clock
        self._listen_url = listen_url
        self._visibility_ms = round(visibility_timeout_s * 1000)
        self._poll_interval_s = poll_interval_s
        self._max_depth = max_depth
        self._retention_ms = round(retention_s * 1000)
        self._listener: asyncpg.Connection[asyncpg.Record] | None = None
        self._woken = asyncio.Event()

    async def close(self) -> None:
        if self._listener is not None:
            listener, self._listener = self._listener, None
            await listener.close()

    async def send(
        self,
        connection_ids: Sequence[str],
        *,
        delay_s: int = 0,
        copy: bool = False,
        origin: HintOrigin | None = None,
    ) -> None:
        bodies = [encode_hint(cid, copy=copy, origin=origin) for cid in connection_ids]
        await self.send_raw(bodies, delay_s=delay_s)

    async def send_raw(self, bodies: Sequence[str], *, delay_s: int = 0) -> None:
        """Enqueue bodies as they are (tests and tools use it to add malformed ones)."""
        check_delay(delay_s)
        if not bodies:
            return
        now = self._clock.now_ms()

        async def insert(c: Conn) -> None:
            if await c.fetchval(_DEPTH) + len(bodies) > self._max_depth:
                await c.execute(_DROP_OLD, now - self._retention_ms)
                depth = await c.fetchval(_DEPTH)
                if depth + len(bodies) > self._max_depth:
                    raise QueueUnavailable(
                        f"notification queue is full ({depth} hints, at most {self._max_depth}); "
                        "reconciliation will find these connections instead"
                    )
            await c.execute(_INSERT, list(bodies), now, now + delay_s * 1000)
            if delay_s == 0:
                await c.execute(_NOTIFY)  # delivered at commit

        await self._db.write(insert)

    async def receive(self, max_messages: int, wait_s: float) -> Sequence[Delivery]:
        if not 1 <= max_messages <= MAX_MESSAGES:
            raise ValueError(f"max_messages must be 1-{MAX_MESSAGES}, got {max_messages}")
        deadline = self._clock.monotonic() + wait_s
        if wait_s > 0:
            await self._ensure_listener()
        while True:
            self._woken.clear()  # before the claim: a send after it wakes the wait below
            deliveries = await self._claim(max_messages)
            remaining = deadline - self._clock.monotonic()
            if deliveries or remaining <= 0:
                return deliveries
            try:
                async with self._clock.timeout(min(self._poll_interval_s, remaining)):
                    await self._woken.wait()
            except TimeoutError:
                pass

    async def release(self, receipts: Sequence[str]) -> None:
        keys = [key for key in map(_receipt_key, receipts) if key is not None]
        if keys:
            ids, issued = zip(*keys, strict=True)
            now = self._clock.now_ms()

            async def release(c: Conn) -> None:
                await c.execute(_RELEASE, list(ids), list(issued), now)
                await c.execute(_NOTIFY)

            await self._db.write(release)

    async def delete(self, receipts: Sequence[str]) -> None:
        keys = [key for key in map(_receipt_key, receipts) if key is not None]
        if keys:
            ids, issued = zip(*keys, strict=True)
            await self._db.write(lambda c: c.execute(_DELETE, list(ids), list(issued)))

    async def _claim(self, max_messages: int) -> list[Delivery]:
        now = self._clock.now_ms()
        nonce = secrets.token_hex(8)

        async def claim(c: Conn) -> list[Delivery]:
            await c.execute(_DROP_EXPIRED, now, now - self._retention_ms)
            rows = await c.fetch(_CLAIM, now, max_messages, nonce, now + self._visibility_ms)
            rows = sorted(rows, key=lambda r: int(r["id"]))
            return [delivery_of(row["body"], row["receipt"]) for row in rows]

        return await self._db.write(claim)

    async def _ensure_listener(self) -> None:
        """A LISTEN connection, made again after it was lost; without one, receive polls."""
        if self._listen_url is None:
            return
        if self._listener is not None and not self._listener.is_closed():
            return
        self._listener = None
        try:
            listener = await asyncpg.connect(self._listen_url, timeout=LISTEN_CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError):
            return  # polling until the next receive tries again
        try:
            await listener.add_listener(HINTS_CHANNEL, self._notified)
        except BaseException:
            await listener.close()
            raise
        self._listener = listener

    def _notified(self, *_: object) -> None:
        self._woken.set()


def _receipt_key(receipt: str) -> tuple[int, str] | None:
    """(row id, receipt) for a receipt this queue issued; None for anything else (ignored)."""
    id_, _, nonce = receipt.partition(":")
    # At most 18 digits: always within PostgreSQL's bigint.
    return (int(id_), receipt) if id_.isdigit() and len(id_) <= 18 and nonce else None
