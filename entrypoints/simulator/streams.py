"""A simulated upstream stream: what is due when, and who listened.

No task runs per stream and no message is stored: message n is `{"seq": n, "data": "<id>:<n>"}`,
due at `start + (n - 1) / rate`, so what is due (and what a replay needs) is computed from the
clock. The replay "buffer" is therefore a window of the last `buffer_size` seqs, and a stream
costs a few hundred bytes plus its bounded connection records, however long it runs.
"""

import asyncio
import json
from collections import deque
from typing import Any

import attrs


def is_message(stored: str, stream_id: str, seq: int) -> bool:
    """Whether a payload a sink stored is message `seq` of the stream: the whole frame (what a
    worker stores by default) or its data field alone (WSFLEET_UPSTREAM_DATA_FIELD=data)."""
    expected = f"{stream_id}:{seq}"
    if stored == expected:
        return True
    try:
        body = json.loads(stored)
    except ValueError:
        return False
    return isinstance(body, dict) and body.get("seq") == seq and body.get("data") == expected


class StreamLimitReached(RuntimeError):
    """The simulator holds its maximum number of streams (it stays bounded in memory)."""


@attrs.define
class ConnectionRecord:
    number: int
    remote: str
    from_seq: int | None
    connected_at_ms: int
    next_seq: int
    first_seq: int | None = None
    last_seq: int | None = None
    sent: int = 0  # frames handed to the socket (not necessarily read by the subscriber)
    received: int = 0  # frames the subscriber sent (subscribe frames; otherwise ignored)
    disconnected_at_ms: int | None = None
    close_code: int | None = None
    # Why the simulator closed it ("end", "gone", "drop", "flaky", "shutdown"), None otherwise.
    server_action: str | None = None

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.define
class SimulatedStream:
    stream_id: str
    rate: float
    total: int | None
    buffer_size: int
    started_at: float  # monotonic seconds
    started_at_ms: int  # the same instant on the wall clock, for the records
    max_records: int
    ended_at: float | None = None
    subscribers: int = 0
    peak_subscribers: int = 0
    connects: int = 0
    sent: int = 0
    connections: deque[ConnectionRecord] = attrs.field(init=False)
    # Set once when the stream is ended by hand: wakes subscribers waiting for the next seq.
    ended: asyncio.Event = attrs.field(init=False, factory=asyncio.Event)

    def __attrs_post_init__(self) -> None:
        # Bounded: a chaos run reconnecting for hours keeps only the latest records.
        self.connections = deque(maxlen=self.max_records)

    def end(self, now: float) -> None:
        if not self.finished(now):
            self.ended_at = now
        self.ended.set()

    def due(self, now: float) -> int:
        """The highest seq emitted by `now` (0 before the first)."""
        at = now if self.ended_at is None else min(now, self.ended_at)
        if at < self.started_at:
            return 0
        seq = int((at - self.started_at) * self.rate) + 1
        return seq if self.total is None else min(seq, self.total)

    def due_at(self, seq: int) -> float:
        return self.started_at + (seq - 1) / self.rate

    def finished(self, now: float) -> bool:
        """No seq will ever be emitted after due(now)."""
        return self.ended_at is not None or (self.total is not None and self.due(now) >= self.total)

    def oldest_retained(self, now: float) -> int:
        return max(1, self.due(now) - self.buffer_size + 1)

    def message(self, seq: int, pad: int = 0) -> str:
        body: dict[str, Any] = {"seq": seq, "data": f"{self.stream_id}:{seq}"}
        if pad:
            body["pad"] = "x" * pad
        return json.dumps(body, separators=(",", ":"))

    def subscribe(self, record: ConnectionRecord) -> None:
        self.connects += 1
        self.subscribers += 1
        self.peak_subscribers = max(self.peak_subscribers, self.subscribers)
        self.connections.append(record)

    def unsubscribe(self, record: ConnectionRecord, at_ms: int) -> None:
        self.subscribers -= 1
        record.disconnected_at_ms = at_ms

    def ended_at_ms(self, now: float) -> int | None:
        if self.ended_at is not None:
            end = self.ended_at
        elif self.total is not None and self.due(now) >= self.total:
            end = self.due_at(self.total)
        else:
            return None
        return self.started_at_ms + round((end - self.started_at) * 1000)

    def to_json(self, now: float) -> dict[str, Any]:
        return {
            "stream_id": self.stream_id,
            "rate": self.rate,
            "total": self.total,
            "started_at_ms": self.started_at_ms,
            "ended": self.finished(now),
            "ended_at_ms": self.ended_at_ms(now),
            "emitted": self.due(now),
            "oldest_retained": self.oldest_retained(now),
            "sent": self.sent,
            "subscribers": self.subscribers,
            "peak_subscribers": self.peak_subscribers,
            "connects": self.connects,
            "connections": [c.to_json() for c in self.connections],
        }
