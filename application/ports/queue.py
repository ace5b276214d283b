"""The notification queue port: fast hints that a connection may need an owner.

A hint is never a guarantee (the store decides ownership); losing one only delays pickup until
reconciliation. Delivery is at-least-once with a visibility timeout, like SQS.
"""

from collections.abc import Mapping, Sequence
from typing import Protocol

import attrs

from domain import DomainError, validate_session_id


@attrs.frozen
class HintOrigin:
    """Who freed the hinted connection: the live worker session that held it and handed it
    back (to balance, or after its upstream failed), or the dead session a reported death
    ended (application/deaths.py). A taker's view of the fleet still counts the connection in
    that session's last reported load; with the origin it counts it once, and a dead
    session's connections are placed by share (application/worker/balance.py). A
    shutting-down worker's hints carry its session with `leaving`: a taker leaves that session
    out of the split, so that its connections go where the fleet is short (a rolling deploy's
    newcomer) in one move (docs/decisions.md). Only a hint; the store decides ownership."""

    session_id: str
    leaving: bool = False
    # Balancing by load: the session the releaser meant it for (domain/balance.py
    # `pick_hand_offs` chose both the connection and where it fits). That one takes it by
    # capacity; to the others it is any hint (application/worker/balance.py `meant_for_me`),
    # unless it is heavy: then they leave it to that one for a grace (`left_for_another`).
    to: str | None = None
    # Balancing by load: the connection's smoothed messages a second as its releaser measured
    # it (None: not said), what tells a taker whether it is heavy (domain/balance.py `heavy`).
    rate: float | None = None


@attrs.frozen
class Delivery:
    """One received message. `connection_id` is None when the body could not be parsed;
    `problem` then says why, and the consumer logs, counts and deletes it. `copy`: it was
    sent as a copy of hints sent before (application/hints.py), so the consumer reads the
    connection before it acts on it. `origin`: as sent (None: a START)."""

    receipt: str
    connection_id: str | None
    problem: str | None = None
    copy: bool = False
    origin: HintOrigin | None = None


# A hint's origin in a JSON body, for every queue whose bodies are JSON (SQS, SQLite, PostgreSQL):
# the releasing session's id. Absent from a START's hint, and from hints sent before origins
# were: a rolling deploy's old workers send none, and old workers ignore the field.
ORIGIN_FIELD = "from"
# Present (true) only on a shutting-down worker's hints; absent means false, so hints of
# workers that predate it mean what they meant.
LEAVING_FIELD = "leaving"
# The session a balancing hand-off was meant for (HintOrigin.to); absent: anyone's.
TO_FIELD = "to"
# The connection's messages a second as its releaser measured it (HintOrigin.rate).
RATE_FIELD = "rate"
# A rate above this is no measurement (no upstream delivers a billion messages a second):
# the hint is malformed, not a connection that outweighs the fleet.
MAX_RATE = 1e9


def origin_fields(origin: HintOrigin | None) -> dict[str, object]:
    if origin is None:
        return {}
    fields: dict[str, object] = {ORIGIN_FIELD: origin.session_id}
    if origin.leaving:
        fields[LEAVING_FIELD] = True
    if origin.to is not None:
        fields[TO_FIELD] = origin.to
    if origin.rate is not None:
        fields[RATE_FIELD] = origin.rate
    return fields


def origin_of(document: Mapping[str, object]) -> HintOrigin | None:
    """The origin a hint's JSON document carries. Raises ValueError, naming the field, for one
    that is not a valid session id: the hint is then malformed as a whole (dropped and
    counted, like a body naming no connection), never half believed."""
    session_id = document.get(ORIGIN_FIELD)
    leaving = document.get(LEAVING_FIELD, False)
    to = document.get(TO_FIELD)
    rate = document.get(RATE_FIELD)
    if not isinstance(leaving, bool):
        raise ValueError(f"{LEAVING_FIELD!r} must be true or false")
    if session_id is None:
        if leaving:
            raise ValueError(f"{LEAVING_FIELD!r} without {ORIGIN_FIELD!r}: who is leaving?")
        if to is not None or rate is not None:
            field = TO_FIELD if to is not None else RATE_FIELD
            raise ValueError(f"{field!r} without {ORIGIN_FIELD!r}: who handed it off?")
        return None
    return HintOrigin(
        _session_id(ORIGIN_FIELD, session_id),
        leaving,
        None if to is None else _session_id(TO_FIELD, to),
        None if rate is None else _rate(rate),
    )


def _rate(value: object) -> float:
    # bool is an int to Python, and NaN compares false to every bound: both refused.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{RATE_FIELD!r} must be a number of messages a second")
    if not 0 <= value <= MAX_RATE:
        raise ValueError(f"{RATE_FIELD!r} must be 0-{MAX_RATE:g} messages a second, got {value}")
    return float(value)


def _session_id(field: str, value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{field!r} must be a worker session id (a string)")
    try:
        validate_session_id(value)
    except DomainError as exc:
        raise ValueError(f"{field!r}: {exc}") from None
    return value


# The longest delay a hint may be sent with (SQS's own limit, in whole seconds).
MAX_DELAY_S = 900


def check_delay(delay_s: int) -> None:
    """The one rule every queue applies to `send`'s delay."""
    if not 0 <= delay_s <= MAX_DELAY_S:
        raise ValueError(f"a hint's delay must be 0-{MAX_DELAY_S} whole seconds, got {delay_s}")


class NotificationQueue(Protocol):
    async def send(
        self,
        connection_ids: Sequence[str],
        *,
        delay_s: int = 0,
        copy: bool = False,
        origin: HintOrigin | None = None,
    ) -> None:
        """Enqueue one hint per id (batched where the queue allows), received by nobody until
        `delay_s` whole seconds have passed (see check_delay), and then with `copy` and
        `origin` as given. Raises QueueUnavailable."""
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
