"""Small asyncio helpers that keep task ownership explicit (nothing is left running)."""

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from application.ports import Clock

T = TypeVar("T")


async def first_completed(*awaitables: Awaitable[T]) -> T:
    """Run the awaitables (coroutines or futures) until any one returns or raises; cancel and
    await all the others. Returns the first one's result (the earliest given, if several finish
    together) or re-raises its exception. If the caller is cancelled, all are cancelled too."""
    tasks = [asyncio.ensure_future(a) for a in awaitables]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    first = next(t for t in tasks if t.done() and not t.cancelled())
    return first.result()


async def gather_all(*awaitables: Awaitable[T]) -> list[T]:
    """Run the awaitables together until every one has ended, then return their results in
    order, or raise the first error (in the order given). Unlike a plain gather, a failure
    never leaves the others running unawaited; cancelling the call cancels and awaits all."""
    outcomes = await asyncio.gather(*awaitables, return_exceptions=True)
    results: list[T] = []
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
        results.append(outcome)
    return results


async def wait_or_timeout(event: asyncio.Event, clock: Clock, timeout_s: float) -> bool:
    """Wait for `event` up to `timeout_s` on the injected clock; True if it was set."""
    if event.is_set():
        return True
    if timeout_s <= 0:
        return False

    async def wait_event() -> None:
        await event.wait()

    await first_completed(wait_event(), clock.sleep(timeout_s))
    return event.is_set()
