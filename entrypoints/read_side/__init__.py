"""What the read-only commands (`messages`, `status`, `history`) need of a backend: its
connection store and the reader of its message sink, opened without the composition root.

The containers (entrypoints/containers.py and its siblings) import every adapter of their
backend, the worker, the API and dependency-injector: about a second of CPU before a command
prints anything. A read needs two objects, so each backend has a read side too, named in the
registry (`Backend.read_side`, entrypoints/backends.py) and imported only when that backend is
used. A read side opens what is asked of it on first use and closes it on exit.

Which reader a sink has is decided here and only here (the containers have no reader); which
sink a backend runs is the settings loader's (`sink_choice`, entrypoints/extensions.py). How a
store or a client is opened is shared with the containers (each backend's module below is
what its container calls), so the two cannot drift apart.
"""

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Protocol

from application.ports import ConnectionStore, MessageReader
from entrypoints.backends import backend_of, load

if TYPE_CHECKING:
    from entrypoints.settings import Settings


class ReadSide(Protocol):
    async def store(self) -> ConnectionStore:
        """The backend's connection store (opened on first call)."""
        ...

    async def reader(self) -> MessageReader:
        """The reader of the configured sink (opened on first call). Raises
        ConfigurationError for a sink of the team's own: only built-in sinks are read."""
        ...


@asynccontextmanager
async def open_read_side(settings: "Settings") -> AsyncIterator[ReadSide]:
    """The read side of the settings' backend; whatever it opened is closed on exit."""
    opener = load(backend_of(settings.backend).read_side)
    opened: AbstractAsyncContextManager[ReadSide] = opener(settings)
    async with opened as side:
        yield side
