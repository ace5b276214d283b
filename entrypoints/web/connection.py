"""aiohttp's protocol for one socket, reporting its life to the Listener that owns it.

A request aiohttp cannot parse (request line, header, Content-Length) is answered by the
owner's `bad_request(status, message)` and logged at INFO in one line: hostile input is not an
error of ours (aiohttp would log it at ERROR with a stack trace). An exception escaping a
handler is aiohttp's to answer: logged with its stack trace, answered 500.
"""

import asyncio
import logging
from typing import Protocol

from aiohttp import web

log = logging.getLogger(__name__)


class Owner(Protocol):
    def admit(self, conn: "Connection") -> bool: ...
    def forget(self, conn: "Connection") -> None: ...
    def bad_request(self, status: int, message: str) -> web.StreamResponse: ...


class Connection(web.RequestHandler):
    """aiohttp's protocol for one socket, reporting to its owner."""

    def __init__(
        self,
        listener: Owner,
        manager: web.Server,
        *,
        loop: asyncio.AbstractEventLoop,
        keepalive_timeout: float,
        lingering_time: float,
        access_log: None,
    ) -> None:
        super().__init__(
            manager,
            loop=loop,
            keepalive_timeout=keepalive_timeout,
            lingering_time=lingering_time,
            access_log=access_log,  # type: ignore[arg-type]  # None turns it off
        )
        self._listener = listener

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        if not self._listener.admit(self):
            transport.close()

    def connection_lost(self, exc: BaseException | None) -> None:
        self._listener.forget(self)
        super().connection_lost(exc)

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if status >= 500 or request.writer.output_size > 0:
            return super().handle_error(request, status, exc, message)  # a bug: logged
        log.info("malformed request refused %d: %s", status, (message or type(exc).__name__)[:200])
        reason = type(exc).__name__ if exc is not None else "malformed request"
        response = self._listener.bad_request(status, f"not a valid HTTP/1.1 request ({reason})")
        response.force_close()
        return response
