"""The local event API: `wsfleet api` serves the EventApi over plain HTTP/1.1.

Everything between the bytes and the status code is the EventApi the Lambda handler uses:
routes, validation, status codes, SSRF rules and error bodies are the same code. This module
only turns a socket into an `HttpRequest` and an `HttpResponse` back into bytes, one request
per connection (`Connection: close`), after the checks only a locally reachable server needs
(Host, token, Content-Type: see api_perimeter.py). Requests are bounded in size and time (the
request must arrive within READ_TIMEOUT_S of connecting, so idle sockets are closed); at most
`max_connections` are served at once and more are answered 503 at once; a body larger than
the API's limit is answered 413 without being read; every handler task is owned and
cancelled on close.
"""

import asyncio
import http
import logging
import uuid

from entrypoints.api import MAX_BODY_BYTES, EventApi, HttpRequest, HttpResponse
from entrypoints.api.http import RETRY_AFTER_S, ApiError, error_response
from entrypoints.cli.api_perimeter import ApiPerimeter

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 10.0  # reading, handling and answering one request
READ_TIMEOUT_S = 5.0  # from connecting to the end of the request: an idle socket is closed
DEFAULT_MAX_CONNECTIONS = 64
MAX_HEADER_LINES = 100
MAX_LINE_BYTES = 8192


class BadHttp(Exception):
    """The bytes are not an HTTP/1.1 request this server handles; answered 400 (or 413)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


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
        self._port = port
        self._perimeter = perimeter or ApiPerimeter.of(host)
        self._max_connections = max_connections
        self._read_timeout_s = read_timeout_s
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._accept, self._host, self._port, limit=MAX_LINE_BYTES
        )

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        request_id = uuid.uuid4().hex
        if len(self._handlers) >= self._max_connections:
            # Answered without reading: the small reply fits the socket buffer, no wait.
            busy = error_response(
                503,
                "service_unavailable",
                f"more than {self._max_connections} open connections; retry later",
                request_id,
                {"Retry-After": str(RETRY_AFTER_S)},
            )
            writer.write(encode_response(busy, request_id))
            writer.close()
            return
        self._handlers.add(task)
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT_S):
                try:
                    async with asyncio.timeout(self._read_timeout_s):
                        request, headers = await read_request(reader, request_id)
                    self._perimeter.check(request.method, headers)
                except BadHttp as exc:
                    response = error_response(exc.status, exc.code, str(exc), request_id)
                except ApiError as exc:
                    log.info("request refused %d: %s", exc.status, exc.message)
                    response = error_response(
                        exc.status, exc.code, exc.message, request_id, exc.headers
                    )
                else:
                    response = await self._api.handle(request)
                await write_response(writer, response, request_id)
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            pass  # a client that stalls or hangs up gets no answer
        finally:
            self._handlers.discard(task)
            writer.close()


async def read_request(
    reader: asyncio.StreamReader, request_id: str
) -> tuple[HttpRequest, dict[str, str]]:
    """The request and its headers (lower-case names; a repeated one keeps its first value).
    Raises BadHttp, or asyncio.IncompleteReadError if the client hung up."""
    parts = (await _line(reader)).split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise BadHttp(400, "invalid_request", "not an HTTP/1.x request line")
    method, target, _ = parts
    length = 0
    headers: dict[str, str] = {}
    for _ in range(MAX_HEADER_LINES):
        line = await _line(reader)
        if not line:
            break
        name, _, value = line.partition(":")
        name = name.strip().lower()
        headers.setdefault(name, value.strip())
        if name == "content-length":
            if not value.strip().isdigit():
                raise BadHttp(400, "invalid_request", "Content-Length is not a number")
            length = int(value.strip())
        elif name == "transfer-encoding" and value.strip().lower() != "identity":
            raise BadHttp(400, "invalid_request", "send the body with Content-Length")
    else:
        raise BadHttp(400, "invalid_request", f"more than {MAX_HEADER_LINES} header lines")
    if length > MAX_BODY_BYTES:
        raise BadHttp(
            413,
            "payload_too_large",
            f"body is {length} bytes; the limit is {MAX_BODY_BYTES} bytes",
        )
    body = await reader.readexactly(length) if length else b""
    path = target.split("?", 1)[0]
    return HttpRequest(method.upper(), path, body, request_id), headers


async def _line(reader: asyncio.StreamReader) -> str:
    try:
        raw = await reader.readuntil(b"\n")
    except asyncio.LimitOverrunError:
        raise BadHttp(400, "invalid_request", "request line or header too long") from None
    return raw.decode("latin-1").rstrip("\r\n")


async def write_response(
    writer: asyncio.StreamWriter, response: HttpResponse, request_id: str
) -> None:
    writer.write(encode_response(response, request_id))
    await writer.drain()


def encode_response(response: HttpResponse, request_id: str) -> bytes:
    payload = response.encoded_body().encode("utf-8")
    headers = {
        **response.all_headers(),
        "X-Request-Id": request_id,
        "Content-Length": str(len(payload)),
        "Connection": "close",
    }
    try:
        reason = http.HTTPStatus(response.status).phrase
    except ValueError:
        reason = ""
    head = f"HTTP/1.1 {response.status} {reason}\r\n" + "".join(
        f"{name}: {value}\r\n" for name, value in headers.items()
    )
    return (head + "\r\n").encode("latin-1") + payload
