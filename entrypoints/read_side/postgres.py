"""How the postgres backend's pool, store and sink are opened (PostgresContainer opens them
the same way), and its read side: one pool, no container."""

from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager

from adapters.postgres.db import Pool, PostgresDatabase, open_pool
from adapters.postgres.message_sink import PostgresMessageSink
from adapters.postgres.store import PostgresConnectionStore
from application.errors import ConfigurationError, SinkUnavailable, StoreUnavailable
from application.ports import ConnectionStore, MessageReader
from entrypoints.extensions import no_reader, sink_choice
from entrypoints.settings import Settings

# asyncpg's default: statements prepared once per database connection and kept.
STATEMENT_CACHE_SIZE = 100
URL_VARIABLE = "WSFLEET_POSTGRES_URL"
# A read side's pool: a command makes one request at a time.
READ_POOL = 2


def postgres_url(settings: Settings) -> str:
    assert settings.postgres_url is not None  # required with this backend (settings/load.py)
    return settings.postgres_url


def statement_cache_size(settings: Settings) -> int:
    return STATEMENT_CACHE_SIZE if settings.postgres_prepared_statements else 0


@contextmanager
def naming_the_url() -> Iterator[None]:
    """The adapters' configuration errors (a URL the driver cannot parse, a refused login, a
    schema to migrate) say what is wrong but not where it was set: name the variable."""
    try:
        yield
    except ConfigurationError as exc:
        raise ConfigurationError(f"{URL_VARIABLE}=(hidden): {exc}") from exc


async def postgres_pool(settings: Settings, size: int | None = None) -> AsyncIterator[Pool]:
    with naming_the_url():
        pool = await open_pool(
            postgres_url(settings),
            size=settings.postgres_pool_size if size is None else size,
            statement_cache_size=statement_cache_size(settings),
            unavailable=StoreUnavailable,
        )
    try:
        yield pool
    finally:
        await pool.close()


def postgres_store(pool: Pool, sessions: Pool | None = None) -> PostgresConnectionStore:
    """`sessions`: a pool for the worker session's own commands (PostgresContainer opens one
    of a connection); without it, `pool` serves all."""
    lane = None if sessions is None else PostgresDatabase(sessions, StoreUnavailable)
    return PostgresConnectionStore(PostgresDatabase(pool, StoreUnavailable), lane)


def postgres_sink(pool: Pool) -> PostgresMessageSink:
    return PostgresMessageSink(PostgresDatabase(pool, SinkUnavailable))


class PostgresReadSide:
    def __init__(self, settings: Settings, opened: AsyncExitStack) -> None:
        self._settings = settings
        self._opened = opened
        self._pool: Pool | None = None
        self._store: ConnectionStore | None = None
        self._reader: MessageReader | None = None

    async def _open_pool(self) -> Pool:
        if self._pool is None:
            opening = asynccontextmanager(postgres_pool)(self._settings, READ_POOL)
            self._pool = await self._opened.enter_async_context(opening)
        return self._pool

    async def store(self) -> ConnectionStore:
        if self._store is None:
            self._store = postgres_store(await self._open_pool())
        return self._store

    async def reader(self) -> MessageReader:
        if self._reader is None:
            if sink_choice(self._settings) != "postgres":
                return no_reader(self._settings)
            self._reader = postgres_sink(await self._open_pool())
        return self._reader


@asynccontextmanager
async def read_side(settings: Settings) -> AsyncIterator[PostgresReadSide]:
    async with AsyncExitStack() as opened:
        yield PostgresReadSide(settings, opened)
