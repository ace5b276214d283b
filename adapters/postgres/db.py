"""PostgresDatabase: an asyncpg pool with the error translation and the transaction retries
written once, for the store, the hint queue and the sink. A process opens one pool
(`open_pool`) and hands each adapter a PostgresDatabase over it with that adapter's own
"unavailable" error; whoever opened the pool closes it.

- `write(fn)` runs `fn(connection)` in one READ COMMITTED transaction. Row locks taken by `fn`
  (SELECT ... FOR UPDATE / FOR SHARE) are what make read-decide-write atomic; two writers that
  both found no row and both INSERT collide on the primary key instead, and a serialization
  failure or deadlock may end any transaction: those are retried from the start (the loser
  then decides on what won), a few times, then reported unavailable.
- The server or the network failing (connection errors, a shutdown, too many connections, a
  timeout) raises the adapter's `unavailable` error, whose outcome is unknown. Anything else
  (a bug, a domain refusal raised by `fn`) propagates, the transaction rolled back.
"""

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import NoReturn, TypeAlias, TypeVar

import asyncpg

from adapters.postgres.defaults import DEFAULT_POOL_SIZE
from adapters.postgres.schema import Conn, check_schema, migrate
from application.errors import ApplicationError, ConfigurationError

T = TypeVar("T")
Pool: TypeAlias = "asyncpg.Pool[asyncpg.Record]"

DEFAULT_TIMEOUT_S = 10.0
RETRIES = 5
# Server states whose outcome is "try again later": connection exceptions, insufficient
# resources, operator intervention (shutdown, restart), system errors.
_UNAVAILABLE_CLASSES = ("08", "53", "57", "58")
# Retried inside `write`: a unique violation (two creators), serialization failure, deadlock.
_RETRIED_STATES = ("23505", "40001", "40P01")


def unavailable_cause(exc: BaseException) -> bool:
    """Whether `exc` means the database could not be reached or could not answer now."""
    if isinstance(exc, asyncpg.PostgresError):
        state = str(exc.sqlstate or "")
        return state[:2] in _UNAVAILABLE_CLASSES or state in _RETRIED_STATES
    return isinstance(
        exc, OSError | TimeoutError | asyncpg.InterfaceError | asyncpg.InternalClientError
    )


async def open_pool(
    url: str,
    *,
    size: int = DEFAULT_POOL_SIZE,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    statement_cache_size: int = 100,
    check: bool = True,
    unavailable: type[ApplicationError] = ApplicationError,
) -> Pool:
    """A pool of up to `size` connections to `url` (a libpq URI; a password in it, or libpq's
    PGPASSWORD / PGPASSFILE). `statement_cache_size=0` turns asyncpg's prepared statements
    off, for PgBouncer in transaction mode before 1.21. With `check`, refuses a database whose
    schema version this wsfleet does not know (ConfigurationError naming it and the version).
    Raises ConfigurationError (malformed URI, refused login, unknown database or schema) or
    `unavailable` (the server unreachable or not answering); messages never quote the URI."""
    if size < 1:
        raise ConfigurationError(f"a PostgreSQL pool needs at least 1 connection, got {size}")
    try:
        pool = await asyncpg.create_pool(
            url,
            min_size=1,
            max_size=size,
            command_timeout=timeout_s,
            timeout=timeout_s,
            statement_cache_size=statement_cache_size,
        )
    except (
        asyncpg.InvalidPasswordError,
        asyncpg.InvalidAuthorizationSpecificationError,
        asyncpg.InvalidCatalogNameError,
    ) as exc:
        raise ConfigurationError(f"PostgreSQL refused the connection: {exc}") from None
    except ValueError:  # asyncpg's URI parser, whose message may quote the URI (a secret)
        raise ConfigurationError("the PostgreSQL URL is not a valid libpq URI") from None
    except OverflowError:  # a port the parser let through and the socket refuses
        raise ConfigurationError("the PostgreSQL URL has a port outside 0-65535") from None
    except Exception as exc:
        if unavailable_cause(exc):
            raise unavailable(f"PostgreSQL: {type(exc).__name__}: {exc}") from exc
        raise
    if check:
        try:
            async with pool.acquire() as conn:
                await check_schema(conn)
        except BaseException:
            await pool.close()
            raise
    return pool


async def migrate_database(url: str, *, statement_cache_size: int = 100) -> tuple[int, int]:
    """`schema.migrate` on the database at `url` (what `wsfleet migrate` runs): (version found,
    version now). Raises as `open_pool` does."""
    pool = await open_pool(url, size=1, check=False, statement_cache_size=statement_cache_size)
    try:
        async with pool.acquire() as conn:
            return await migrate(conn)
    finally:
        await pool.close()


class PostgresDatabase:
    def __init__(
        self,
        pool: Pool,
        unavailable: type[ApplicationError],
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.pool = pool
        self._unavailable = unavailable
        self._timeout_s = timeout_s

    async def write(self, fn: Callable[[Conn], Awaitable[T]]) -> T:
        """`fn` in one transaction, retried from the start on a key collision, serialization
        failure or deadlock."""
        for attempt in range(RETRIES):
            try:
                async with (
                    self.pool.acquire(timeout=self._timeout_s) as conn,
                    conn.transaction(),
                ):
                    return await fn(conn)
            except asyncpg.PostgresError as exc:
                if exc.sqlstate not in _RETRIED_STATES or attempt + 1 == RETRIES:
                    self._raise(exc)
            except Exception as exc:
                self._raise(exc)
            await asyncio.sleep(random.uniform(0, 0.01 * 2**attempt))
        raise AssertionError("unreachable")

    async def read(self, fn: Callable[[Conn], Awaitable[T]]) -> T:
        """`fn` on a pooled connection, outside any explicit transaction."""
        try:
            async with self.pool.acquire(timeout=self._timeout_s) as conn:
                return await fn(conn)
        except Exception as exc:
            self._raise(exc)

    def _raise(self, exc: Exception) -> NoReturn:
        if unavailable_cause(exc):
            raise self._unavailable(f"PostgreSQL: {type(exc).__name__}: {exc}") from exc
        raise exc
