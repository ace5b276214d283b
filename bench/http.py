"""Tiny JSON-over-HTTP client for the children's control endpoints (simulator records, worker
health). urllib in a thread: the runner's event loop never blocks on a socket."""

import asyncio
import json
import ssl
import urllib.error
import urllib.request
from typing import Any


def _call(
    url: str, method: str, timeout_s: float, context: ssl.SSLContext | None
) -> tuple[int, Any]:
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s, context=context) as response:
            status, body = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, body = exc.code, exc.read()
    except (urllib.error.URLError, OSError):
        return 0, None
    try:
        return status, json.loads(body)
    except ValueError:
        return status, body.decode(errors="replace")


async def get(
    url: str, timeout_s: float = 10.0, context: ssl.SSLContext | None = None
) -> tuple[int, Any]:
    """(status, decoded JSON or text); status 0 when nothing answered."""
    return await asyncio.to_thread(_call, url, "GET", timeout_s, context)


async def post(
    url: str, timeout_s: float = 10.0, context: ssl.SSLContext | None = None
) -> tuple[int, Any]:
    return await asyncio.to_thread(_call, url, "POST", timeout_s, context)
