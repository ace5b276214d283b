"""Serve an aiohttp.web application on one address with a connection cap that idle sockets
cannot fill, a deadline for the request head, and framing errors answered in the server's own
body shape.

- At most `max_connections` sockets are open. A socket that arrives at the cap evicts the
  oldest one that is not inside a request (it connected but has not finished sending its
  request head); only when every open socket is inside a request, each bounded by its
  server's request deadline, is the newcomer closed at once. Idle or slow sockets therefore
  cost an attacker a socket each that the next real client takes back.
- A socket must finish its request head within `head_timeout_s` of connecting (aiohttp's
  keep-alive timer, which also runs before the first request), else it is closed.
- Every response closes its connection: one request per socket, as the clients expect.
- A body the handler did not read (a 413) is read and dropped for up to LINGER_S before the
  socket closes, so the client receives the answer instead of a reset.
- A request aiohttp cannot parse (request line, header, Content-Length) is answered by
  `bad_request(status, message)` (entrypoints/web/connection.py).
"""

import asyncio
from collections.abc import Callable

from aiohttp import web
from aiohttp.typedefs import Handler

from entrypoints.web.connection import Connection

LINGER_S = 2.0  # reading an unread body after the answer: 2 MiB takes milliseconds locally
SHUTDOWN_S = 1.0  # close() waits this long for requests in progress
# The one route each server has (it routes itself): every path, a decoded newline included
# (`.*` stops at one, and aiohttp would answer its own text/plain 404).
ANY_PATH = r"/{path:[\s\S]*}"

# The answer to a request that is not HTTP aiohttp can parse: (status, message) -> response.
BadRequestBody = Callable[[int, str], web.StreamResponse]


class Listener:
    def __init__(
        self,
        app: web.Application,
        host: str,
        port: int,
        *,
        max_connections: int,
        head_timeout_s: float,
        bad_request: BadRequestBody,
    ) -> None:
        self._app = app
        self._host = host
        self._port = port
        self._max_connections = max_connections
        self._head_timeout_s = head_timeout_s
        self._bad_request = bad_request
        self._open: dict[Connection, None] = {}  # insertion order: the oldest first
        self._busy: set[web.RequestHandler] = set()
        self._runner: web.AppRunner | None = None
        self._server: asyncio.Server | None = None
        app.middlewares.insert(0, self._one_request)

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def open_connections(self) -> int:
        return len(self._open)

    async def start(self) -> None:
        """Raises OSError if the address cannot be bound."""
        self._runner = web.AppRunner(self._app, shutdown_timeout=SHUTDOWN_S)
        await self._runner.setup()
        loop = asyncio.get_running_loop()
        try:
            self._server = await loop.create_server(self._connection, self._host, self._port)
        except OSError:
            await self._runner.cleanup()
            raise

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        if self._runner is not None:
            await self._runner.cleanup()
        if self._server is not None:
            await self._server.wait_closed()

    def _connection(self) -> Connection:
        assert self._runner is not None
        assert self._runner.server is not None
        return Connection(
            self,
            self._runner.server,
            loop=asyncio.get_running_loop(),
            keepalive_timeout=self._head_timeout_s,
            lingering_time=LINGER_S,
            access_log=None,
        )

    def admit(self, conn: Connection) -> bool:
        """Make room for `conn` (evicting the oldest idle socket if at the cap); False if
        every open socket is inside a request."""
        if len(self._open) >= self._max_connections:
            idle = next((c for c in self._open if c not in self._busy), None)
            if idle is None:
                return False
            self.forget(idle)
            if idle.transport is not None:
                idle.transport.close()
        self._open[conn] = None
        return True

    def forget(self, conn: Connection) -> None:
        self._open.pop(conn, None)

    @web.middleware
    async def _one_request(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        protocol = request.protocol
        self._busy.add(protocol)
        try:
            response = await handler(request)
        except web.HTTPException as exc:
            exc.force_close()
            raise
        finally:
            self._busy.discard(protocol)
        response.force_close()
        return response

    def bad_request(self, status: int, message: str) -> web.StreamResponse:
        return self._bad_request(status, message)
