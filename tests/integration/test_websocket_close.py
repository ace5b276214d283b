"""Leaving an upstream stream disconnects at once, however the stream is left (found by the
chaos suite: a fenced worker's subscriber stayed connected for close_timeout, or until the
upstream's own timeout when its close was cancelled).

The close timeout is set far above what the assertions allow, so passing means the close did
not wait for it."""

import asyncio

from adapters.websocket import WebSocketConnector, WebSocketOptions
from entrypoints.simulator import UpstreamSimulator
from tests.support.simulator import simulator

__all__ = ["simulator"]

PATIENT = WebSocketOptions(close_timeout=30.0)


async def test_leaving_with_unread_messages_queued_disconnects_at_once(
    simulator: UpstreamSimulator,
) -> None:
    """GIVEN a stream read once, then left unread until the receive queue is full, WHEN the
    context is left, THEN the upstream sees the subscriber leave, with a clean close."""
    async with asyncio.timeout(5):
        async with WebSocketConnector(PATIENT).open(simulator.url("a"), 1, ["127.0.0.1"]) as stream:
            await anext(stream.messages())
            await asyncio.sleep(0.3)  # 100 messages/s: far more than the 4-frame queue
        await simulator.wait_for_subscribers("a", 0)
    assert simulator.record("a")["connections"][0]["close_code"] == 1000


async def test_a_close_interrupted_by_cancellation_still_disconnects_at_once(
    simulator: UpstreamSimulator,
) -> None:
    """GIVEN a session whose stream is closing (its queue full, so the handshake waits), WHEN
    the session is cancelled meanwhile, THEN the TCP connection is torn down at once rather
    than left for the upstream to time out."""
    leaving = asyncio.Event()

    async def session() -> None:
        async with WebSocketConnector(PATIENT).open(simulator.url("b"), 1, ["127.0.0.1"]) as stream:
            await anext(stream.messages())
            await asyncio.sleep(0.3)
            leaving.set()
            raise RuntimeError("lease lost")

    task = asyncio.create_task(session())
    await leaving.wait()
    await asyncio.sleep(0)  # the task is now inside its close
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await simulator.wait_for_subscribers("b", 0, timeout_s=1.0)
