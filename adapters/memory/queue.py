"""InMemoryNotificationQueue: at-least-once delivery with a visibility timeout, like SQS,
timed by the injected clock so tests can use virtual time."""

import asyncio
import itertools
from collections.abc import Sequence

import attrs

from application.aio import wait_or_timeout
from application.ports import Clock
from application.ports.queue import Delivery, HintOrigin, check_delay
from domain import DomainError, validate_connection_id


@attrs.define
class _Message:
    body: str
    visible_at: float = 0.0  # monotonic seconds
    receipt: str | None = None
    copy: bool = False
    origin: HintOrigin | None = None


class InMemoryNotificationQueue:
    """Bodies are connection ids; `inject_raw` adds a malformed body for tests."""

    def __init__(self, clock: Clock, visibility_timeout_s: float = 30.0) -> None:
        self._clock = clock
        self._visibility_timeout_s = visibility_timeout_s
        self._messages: list[_Message] = []
        self._receipts = itertools.count(1)
        self._arrived = asyncio.Event()
        self.sent = 0

    async def send(
        self,
        connection_ids: Sequence[str],
        *,
        delay_s: int = 0,
        copy: bool = False,
        origin: HintOrigin | None = None,
    ) -> None:
        check_delay(delay_s)
        visible_at = self._clock.monotonic() + delay_s if delay_s else 0.0
        for cid in connection_ids:
            message = _Message(body=cid, visible_at=visible_at, copy=copy, origin=origin)
            self._messages.append(message)
            self.sent += 1
        self._arrived.set()

    def inject_raw(self, body: str) -> None:
        self._messages.append(_Message(body=body))
        self._arrived.set()

    async def receive(self, max_messages: int, wait_s: float) -> Sequence[Delivery]:
        deadline = self._clock.monotonic() + wait_s
        while True:
            taken = self._take(max_messages)
            now = self._clock.monotonic()
            if taken or now >= deadline:
                return taken
            self._arrived.clear()
            # Wake for a new message, or when an in-flight one becomes visible again (SQS hands
            # a redelivered message to a long poll that is already waiting).
            wake_at = min([deadline, *(m.visible_at for m in self._messages if m.visible_at > now)])
            await wait_or_timeout(self._arrived, self._clock, wake_at - now)

    def _take(self, max_messages: int) -> list[Delivery]:
        now = self._clock.monotonic()
        out: list[Delivery] = []
        for message in self._messages:
            if len(out) >= max_messages:
                break
            if message.visible_at <= now:
                message.receipt = f"r{next(self._receipts)}"
                message.visible_at = now + self._visibility_timeout_s
                out.append(_delivery(message.body, message.receipt, message.copy, message.origin))
        return out

    async def release(self, receipts: Sequence[str]) -> None:
        back = set(receipts)
        now = self._clock.monotonic()
        for message in self._messages:
            if message.receipt in back:
                message.receipt = None
                message.visible_at = now
        self._arrived.set()

    async def delete(self, receipts: Sequence[str]) -> None:
        gone = set(receipts)
        self._messages = [m for m in self._messages if m.receipt not in gone]

    def __len__(self) -> int:
        return len(self._messages)


def _delivery(body: str, receipt: str, copy: bool, origin: HintOrigin | None) -> Delivery:
    try:
        return Delivery(receipt, validate_connection_id(body), copy=copy, origin=origin)
    except DomainError as exc:
        return Delivery(receipt=receipt, connection_id=None, problem=str(exc))
