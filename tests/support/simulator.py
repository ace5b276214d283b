"""The upstream simulator for tests: started on 127.0.0.1 (free port) per test, plus a tiny
HTTP client for its control endpoints (urllib in a thread, so the loop never blocks)."""

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from typing import Any

import pytest

from entrypoints.simulator import UpstreamSimulator


@pytest.fixture
async def simulator() -> AsyncIterator[UpstreamSimulator]:
    """A simulator at 100 messages/s per stream."""
    async with UpstreamSimulator(rate=100.0) as sim:
        yield sim


def _call(url: str, method: str) -> tuple[int, Any]:
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            status, body = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, body = exc.code, exc.read()
    try:
        return status, json.loads(body)
    except ValueError:
        return status, body.decode()


async def http(sim: UpstreamSimulator, method: str, path: str) -> tuple[int, Any]:
    """(status, decoded JSON body or text) of `method path` on the simulator's port."""
    base = f"http://{sim.host}:{sim.port}"
    return await asyncio.to_thread(_call, base + path, method)
