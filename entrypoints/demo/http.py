"""A tiny JSON-over-HTTP client for the demo (the local API, the simulator's records).
urllib runs in a thread: the event loop never waits on a socket."""

import asyncio
import json
import urllib.error
import urllib.request
from typing import Any

TIMEOUT_S = 10.0


def _call(method: str, url: str, body: Any) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    # Every command says JSON, a bodyless STOP too: the local API refuses others (415).
    headers = {"Content-Type": "application/json"}
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, raw.decode(errors="replace")


async def call(method: str, url: str, body: Any = None) -> tuple[int, Any]:
    """(status, decoded JSON body). Raises OSError (urllib.error.URLError) if unreachable."""
    return await asyncio.to_thread(_call, method, url, body)
