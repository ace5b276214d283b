"""A tiny JSON-over-HTTP client for a dev stack's control endpoints (a worker's health and
status, the simulator's records and streams, the local API). urllib in a thread: the caller's
event loop never waits on a socket."""

import asyncio
import json
import ssl
import urllib.error
import urllib.request
from typing import Any

TIMEOUT_S = 10.0


def _call(
    method: str, url: str, body: Any, timeout_s: float, context: ssl.SSLContext | None
) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    # Every request says JSON, a bodyless one too: the local API refuses others (415).
    headers = {"Content-Type": "application/json"}
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s, context=context) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    except (urllib.error.URLError, OSError):
        return 0, None
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, raw.decode(errors="replace")


async def call(
    method: str,
    url: str,
    body: Any = None,
    *,
    timeout_s: float = TIMEOUT_S,
    context: ssl.SSLContext | None = None,
) -> tuple[int, Any]:
    """(status, decoded JSON body or text); status 0 when nothing answered."""
    return await asyncio.to_thread(_call, method, url, body, timeout_s, context)


async def get(
    url: str, timeout_s: float = TIMEOUT_S, context: ssl.SSLContext | None = None
) -> tuple[int, Any]:
    return await call("GET", url, timeout_s=timeout_s, context=context)


async def post(
    url: str, body: Any = None, timeout_s: float = TIMEOUT_S, context: ssl.SSLContext | None = None
) -> tuple[int, Any]:
    return await call("POST", url, body, timeout_s=timeout_s, context=context)
