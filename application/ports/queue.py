"""The notification queue port: fast hints that a connection may need an owner.

A hint is never a guarantee (the store decides ownership); losing one only delays pickup until
reconciliation. Delivery is at-least-once with a visibility timeout, like SQS.
"""

from collections.abc import Sequence
from typing import Protocol

import attrs


@attrs.frozen
class Delivery:
    """One received message. `connection_id` is None when the body could not be parsed;
    `problem` then says why, and the consumer logs, counts and deletes it. `copy`: it was
    sent as a copy of hints sent before (application/hints.py), so the consumer reads the
    connection before it acts on it."""

    receipt: str
    connection_id: str | None
    problem: str | None = None
    copy: bool = False


# The longest delay a hint may be sent with (SQS's own limit, in whole seconds).
MAX_DELAY_S = 900


def check_delay(delay_s: int) -> None:
    """The one rule every queue applies to `send`'s delay."""
    if not 0 <= delay_s <= MAX_DELAY_S:
        raise ValueError(f"a hint's delay must be 0-{MAX_DELAY_S} whole seconds, got {delay_s}")


class NotificationQueue(Protocol):
    async def send(
        self, connection_ids: Sequence[str], *, delay_s: int = 0, copy: bool = False
    ) -> None:
        """Enqueue one hint per id (batched where the queue allows), received by nobody until
        `delay_s` whole seconds have passed (see check_delay), and then with `copy` as given.
        Raises QueueUnavailable."""
        ...

    async def receive(self, max_messages: int, wait_s: float) -> Sequence[Delivery]:
        """Long-poll up to `wait_s` seconds for up to `max_messages` (1-10). Received messages
        are invisible to other consumers until deleted or the visibility timeout passes.
        Raises QueueUnavailable."""
        ...

    async def release(self, receipts: Sequence[str]) -> None:
        """Make delivered messages visible to every consumer again at once (this consumer will
        not handle them: it is shutting down). Unknown or stale receipts are ignored.
        Raises QueueUnavailable."""
        ...

    async def delete(self, receipts: Sequence[str]) -> None:
        """Delete delivered messages (batched). Unknown or stale receipts are ignored.
        Raises QueueUnavailable."""
        ...
