"""The embedded backend's files, how its store and sink are opened (EmbeddedContainer opens
them the same way), and its read side: SQLite only, no container."""

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

from adapters.sqlite.message_sink import SqliteMessageSink
from adapters.sqlite.store import SqliteConnectionStore
from application.ports import ConnectionStore, MessageReader
from entrypoints.extensions import no_reader, sink_choice
from entrypoints.settings import Settings

STATE_FILE = "wsfleet.sqlite"
MESSAGES_FILE = "messages.sqlite"


def state_path(settings: Settings) -> Path:
    return Path(settings.data_dir) / STATE_FILE


def messages_path(settings: Settings) -> Path:
    return Path(settings.data_dir) / MESSAGES_FILE


async def sqlite_store(settings: Settings) -> AsyncIterator[SqliteConnectionStore]:
    async with SqliteConnectionStore.open(state_path(settings)) as store:
        yield store


async def sqlite_sink(settings: Settings) -> AsyncIterator[SqliteMessageSink]:
    async with SqliteMessageSink.open(messages_path(settings)) as sink:
        yield sink


class EmbeddedReadSide:
    def __init__(self, settings: Settings, opened: AsyncExitStack) -> None:
        self._settings = settings
        self._opened = opened
        self._store: ConnectionStore | None = None
        self._reader: MessageReader | None = None

    async def store(self) -> ConnectionStore:
        if self._store is None:
            opening = asynccontextmanager(sqlite_store)(self._settings)
            self._store = await self._opened.enter_async_context(opening)
        return self._store

    async def reader(self) -> MessageReader:
        if self._reader is None:
            if sink_choice(self._settings) != "sqlite":
                return no_reader(self._settings)
            opening = asynccontextmanager(sqlite_sink)(self._settings)
            self._reader = await self._opened.enter_async_context(opening)
        return self._reader


@asynccontextmanager
async def read_side(settings: Settings) -> AsyncIterator[EmbeddedReadSide]:
    async with AsyncExitStack() as opened:
        yield EmbeddedReadSide(settings, opened)
