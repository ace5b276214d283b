"""The worker's HTTP health endpoint: `GET /healthz` for the container health check (200 while
the loops are alive and the store was reached recently, else 503), `GET /status`, a JSON
view for operators (connections, tokens, lease remaining, checkpoints), and `GET /metrics`,
the worker's metrics in Prometheus' text format (when given a scrape function).

On aiohttp.web through entrypoints/web/listener.py: at most MAX_CONNECTIONS sockets (a new one
evicts an idle one), the request head within REQUEST_TIMEOUT_S of connecting, one request per
socket. `/status` names connections, tokens and checkpoints, so a page in a local browser
must not read it through DNS rebinding: a Host that is a name other than `localhost` or the
bound one is refused 421 (an IP literal, what probes and Prometheus send, is answered)."""

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import Any

import attrs
from aiohttp import web
from aiohttp.typedefs import Handler

from application.worker.worker import Worker
from entrypoints.web import ANY_PATH, Listener, host_name, is_ip_literal

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 5.0
MAX_CONNECTIONS = 32  # a health check, a scraper and an operator or two


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
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        self._worker = worker
        self._scrape = scrape
        self._host = host
        self._service = service_name
        self._started_at = time.time()
        self._names = frozenset({"localhost", host_name(host)})
        app = web.Application(middlewares=[self._guard])
        app.router.add_route("*", ANY_PATH, self._handle)
        self._listener = Listener(
            app,
            host,
            port,
            max_connections=max_connections,
            head_timeout_s=REQUEST_TIMEOUT_S,
            bad_request=lambda status, message: _json(status, {"error": "bad_request"}),
        )

    @property
    def port(self) -> int:
        """The bound port (useful when configured as an ephemeral one in tests)."""
        return self._listener.port

    async def start(self) -> None:
        """Raises OSError if the address cannot be bound."""
        await self._listener.start()
        log.info("health endpoint on http://%s:%d/healthz", self._host, self.port)

    async def close(self) -> None:
        await self._listener.close()

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        host = request.headers.get("Host")
        if host is not None:
            name = host_name(host)
            if name not in self._names and not is_ip_literal(name):
                return _json(421, {"error": "misdirected_request"})
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT_S):
                return await handler(request)
        except TimeoutError:
            return _json(503, {"error": "timeout"})

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path, method = request.path, request.method
        if path == "/metrics" and method == "GET" and self._scrape:
            content_type, payload = self._scrape()
            return _payload(200, content_type, payload)
        status, body = self.respond(method, path)
        return _json(status, body)

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


def _json(status: int, body: dict[str, Any]) -> web.Response:
    payload = json.dumps(body, separators=(",", ":")).encode()
    return _payload(status, "application/json", payload)


def _payload(status: int, content_type: str, payload: bytes) -> web.Response:
    headers = {"Content-Type": content_type, "Cache-Control": "no-store"}
    return web.Response(status=status, body=payload, headers=headers)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
