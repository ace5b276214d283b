"""Small asyncio helpers that keep task ownership explicit (nothing is left running)."""

import asyncio
from collections.abc import Coroutine
from typing import Any

from application.ports import Clock


async def first_completed(*coroutines: Coroutine[Any, Any, Any]) -> None:
    """Run the coroutines until any one returns or raises; cancel and await the rest.
    The first one's exception, if any, is re-raised."""
    tasks = [asyncio.ensure_future(c) for c in coroutines]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    for task in done:
        if not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]


async def wait_or_timeout(event: asyncio.Event, clock: Clock, timeout_s: float) -> bool:
    """Wait for `event` up to `timeout_s` on the injected clock; True if it was set."""
    if event.is_set():
        return True
    if timeout_s <= 0:
        return False
    await first_completed(event.wait(), clock.sleep(timeout_s))
    return event.is_set()
