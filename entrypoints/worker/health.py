"""The worker's HTTP health endpoint: `GET /healthz` for the container health check (200 while
the loops are alive and the store was reached recently, else 503), `GET /status`, a JSON
view for operators (connections, tokens, lease remaining, checkpoints), and `GET /metrics`,
the worker's metrics in Prometheus' text format (when given a scrape function).

Plain asyncio and a minimal HTTP/1.1 reader: three GET routes do not justify a web framework.
Each request is bounded in size and time, and every handler task is owned and cancelled on
close."""

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import Any

import attrs

from application.worker.worker import Worker

log = logging.getLogger(__name__)

_REQUEST_TIMEOUT_S = 5.0
_MAX_HEADER_LINES = 64
_REASONS = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}


# A scrape: the exposition's content type and body.
Scrape = Callable[[], tuple[str, bytes]]


class HealthServer:
    def __init__(
        self,
        worker: Worker,
        host: str,
        port: int,
        service_name: str,
        scrape: Scrape | None = None,
    ) -> None:
        self._worker = worker
        self._scrape = scrape
        self._host = host
        self._port = port
        self._service = service_name
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._started_at = time.time()

    @property
    def port(self) -> int:
        """The bound port (useful when configured as an ephemeral one in tests)."""
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, self._host, self._port)
        log.info("health endpoint on http://%s:%d/healthz", self._host, self.port)

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
        self._handlers.add(task)
        try:
            async with asyncio.timeout(_REQUEST_TIMEOUT_S):
                method, path = await _read_request(reader)
                if path.split("?", 1)[0] == "/metrics" and method == "GET" and self._scrape:
                    content_type, payload = self._scrape()
                    await _write(writer, 200, content_type, payload)
                else:
                    status, body = self.respond(method, path)
                    await _write_response(writer, status, body)
        except (TimeoutError, ConnectionError, ValueError, asyncio.IncompleteReadError):
            pass  # a broken or slow probe gets no answer; the next one will
        finally:
            self._handlers.discard(task)
            writer.close()

    def respond(self, method: str, path: str) -> tuple[int, dict[str, Any]]:
        route = path.split("?", 1)[0]
        routes = ["/healthz", "/status", *(["/metrics"] if self._scrape else [])]
        if route not in routes:
            return 404, {"error": "not_found", "routes": routes}
        if method != "GET":
            return 405, {"error": "method_not_allowed", "allowed": ["GET"]}
        health = self._worker.health()
        status = 200 if health.healthy else 503
        if route == "/healthz":
            return status, {
                "healthy": health.healthy,
                "loops_alive": health.loops_alive,
                "store_reached_age_s": _round(health.store_reached_age_s),
            }
        return status, {
            "service": self._service,
            "worker_id": self._worker.worker_id,
            "uptime_s": round(time.time() - self._started_at, 1),
            "healthy": health.healthy,
            "loops_alive": health.loops_alive,
            "store_reached_age_s": _round(health.store_reached_age_s),
            "active_connections": health.active_connections,
            "max_connections": self._worker.ctx.config.max_connections,
            "lease_ms": self._worker.ctx.config.lease_ms,
            "connections": [attrs.asdict(view) for view in health.connections],
        }


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str]:
    line = (await reader.readline()).decode("latin-1").split()
    if len(line) != 3 or not line[2].startswith("HTTP/"):
        raise ValueError("not an HTTP request line")
    for _ in range(_MAX_HEADER_LINES):
        if (await reader.readline()) in (b"\r\n", b"\n", b""):
            return line[0], line[1]
    raise ValueError("too many header lines")


async def _write_response(writer: asyncio.StreamWriter, status: int, body: dict[str, Any]) -> None:
    payload = json.dumps(body, separators=(",", ":")).encode()
    await _write(writer, status, "application/json", payload)


async def _write(
    writer: asyncio.StreamWriter, status: int, content_type: str, payload: bytes
) -> None:
    head = (
        f"HTTP/1.1 {status} {_REASONS.get(status, '')}\r\n"
        f"Content-Type: {content_type}\r\n"
        f"Content-Length: {len(payload)}\r\n"
        "Cache-Control: no-store\r\n"
        "Connection: close\r\n\r\n"
    )
    writer.write(head.encode("latin-1") + payload)
    await writer.drain()


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
