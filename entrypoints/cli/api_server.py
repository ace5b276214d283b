"""The local event API: `wsfleet api` serves the EventApi on aiohttp.web.

Everything between the request and the status code is the EventApi the Lambda handler uses:
routes, validation, status codes, SSRF rules and error bodies are the same code. This module
only turns an aiohttp request into an `HttpRequest` and an `HttpResponse` back, one request per
connection (`Connection: close`), after the checks only a locally reachable server needs
(Host, token, Content-Type: api_perimeter.py, run as a middleware). Bounds: the request head
within `read_timeout_s` of connecting, the body within `read_timeout_s` more (408), the whole
exchange within REQUEST_TIMEOUT_S (503); a body over MAX_BODY_BYTES is answered 413, and
read and dropped so the client receives it; at most `max_connections` sockets, where a new
one evicts an idle one (entrypoints/web/listener.py).
"""

import asyncio
import logging
import uuid

from aiohttp import web
from aiohttp.typedefs import Handler

from entrypoints.api import MAX_BODY_BYTES, EventApi, HttpRequest, HttpResponse
from entrypoints.api.http import RETRY_AFTER_S, ApiError, error_response
from entrypoints.cli.api_perimeter import ApiPerimeter
from entrypoints.web import ANY_PATH, Listener

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 10.0  # reading, handling and answering one request
READ_TIMEOUT_S = 5.0  # from connecting to the end of the request head; then for the body
DEFAULT_MAX_CONNECTIONS = 64
_REQUEST_ID = web.RequestKey("request_id", str)


class LocalApiServer:
    def __init__(
        self,
        api: EventApi,
        host: str,
        port: int,
        perimeter: ApiPerimeter | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        read_timeout_s: float = READ_TIMEOUT_S,
    ) -> None:
        self._api = api
        self._host = host
        self._perimeter = perimeter or ApiPerimeter.of(host)
        self._read_timeout_s = read_timeout_s
        app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=[self._guard])
        app.router.add_route("*", ANY_PATH, self._handle)
        self._listener = Listener(
            app,
            host,
            port,
            max_connections=max_connections,
            head_timeout_s=read_timeout_s,
            bad_request=_malformed,
        )

    @property
    def port(self) -> int:
        return self._listener.port

    @property
    def url(self) -> str:
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self.port}"

    async def start(self) -> None:
        """Raises OSError if the address cannot be bound."""
        await self._listener.start()

    async def close(self) -> None:
        await self._listener.close()

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """The perimeter, before any route: framing and size, then Host, token and
        Content-Type (api_perimeter.py). Every answer carries its request id."""
        request_id = uuid.uuid4().hex
        request[_REQUEST_ID] = request_id
        try:
            _check_framing(request)
            self._perimeter.check(request.method, request.headers)
            async with asyncio.timeout(REQUEST_TIMEOUT_S):
                response = await handler(request)
        except ApiError as exc:
            log.info("request refused %d: %s", exc.status, exc.message)
            response = _encode(
                error_response(exc.status, exc.code, exc.message, request_id, exc.headers)
            )
        except TimeoutError:
            log.warning("request not answered within %.0f s", REQUEST_TIMEOUT_S)
            busy = {"Retry-After": str(RETRY_AFTER_S)}
            message = "the request was not answered in time; retry later"
            response = _encode(
                error_response(503, "service_unavailable", message, request_id, busy)
            )
        response.headers["X-Request-Id"] = request_id
        return response

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        request_id = request[_REQUEST_ID]
        try:
            async with asyncio.timeout(self._read_timeout_s):
                body = await request.read()
        except TimeoutError:
            raise ApiError(
                408,
                "request_timeout",
                f"the body did not arrive within {self._read_timeout_s:g} s",
            ) from None
        except web.HTTPRequestEntityTooLarge:
            raise _too_large(MAX_BODY_BYTES + 1) from None
        # The path as sent, still percent-encoded: the routes decode the id themselves.
        path = request.raw_path.split("?", 1)[0]
        call = HttpRequest(request.method.upper(), path, body, request_id)
        return _encode(await self._api.handle(call))


def _check_framing(request: web.Request) -> None:
    """What the Lambda never sees: a body must come with a Content-Length (no chunks) no
    larger than MAX_BODY_BYTES. Checked on the head, so the client need not send the body."""
    encoding = request.headers.get("Transfer-Encoding", "identity").strip().lower()
    if encoding != "identity":
        raise ApiError(400, "invalid_request", "send the body with Content-Length")
    length = request.content_length
    if length is not None and length > MAX_BODY_BYTES:
        raise _too_large(length)


def _too_large(length: int) -> ApiError:
    return ApiError(
        413,
        "payload_too_large",
        f"body is {length} bytes; the limit is {MAX_BODY_BYTES} bytes",
    )


def _encode(response: HttpResponse) -> web.Response:
    return web.Response(
        status=response.status,
        body=response.encoded_body().encode("utf-8"),
        headers=response.all_headers(),
    )


def _malformed(status: int, message: str) -> web.StreamResponse:
    """What aiohttp could not parse: the request line, a header, the Content-Length."""
    request_id = uuid.uuid4().hex
    response = _encode(error_response(status, "invalid_request", message, request_id))
    response.headers["X-Request-Id"] = request_id
    return response
