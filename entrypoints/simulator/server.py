"""UpstreamSimulator: a real WebSocket server that plays live upstream streams and keeps the
records tests and benchmarks judge by (who subscribed when, how many at once, what was sent).

Usable in-process (`async with UpstreamSimulator() as sim: sim.url("a")`) or on its own
(`python -m entrypoints.simulator`). Plain HTTP on the same port (see `control.py`) reads the
records and drives the chaos knobs.
"""

import asyncio
import logging
import ssl
import time
from contextlib import suppress
from typing import Any
from urllib.parse import urlencode

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from entrypoints.simulator import control, hostile
from entrypoints.simulator.routes import BadRequest, Subscription, parse_subscription, split
from entrypoints.simulator.streams import ConnectionRecord, SimulatedStream, StreamLimitReached

_log = logging.getLogger(__name__)
CLOSE_GONE = 4410  # the requested resume point left the replay window: do not retry as is
_YIELD_EVERY = 256  # messages sent back to back before letting other subscribers run


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


class UpstreamSimulator:
    def __init__(
        self,
        *,
        rate: float = 5.0,
        buffer_size: int = 10_000,
        auto_create: bool = True,
        max_streams: int = 100_000,
        max_records_per_stream: int = 1_000,
        flaky_drop_after_s: float = 2.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        if rate <= 0 or buffer_size < 1 or max_streams < 1 or flaky_drop_after_s <= 0:
            raise ValueError("rate, buffer_size, max_streams and flaky_drop_after_s must be > 0")
        self.rate = rate
        self.buffer_size = buffer_size
        self.auto_create = auto_create
        self.max_streams = max_streams
        self.max_records_per_stream = max_records_per_stream
        self.flaky_drop_after_s = flaky_drop_after_s
        self._ssl = ssl_context
        self._streams: dict[str, SimulatedStream] = {}
        self._live: dict[str, dict[ServerConnection, ConnectionRecord]] = {}
        self._changed = asyncio.Event()
        self._server: Server | None = None
        # /hostile/<kind>/<id> streams (hostile.py): connections opened, per stream id.
        self.hostile_connects: dict[str, int] = {}
        self.host = ""
        self.port = 0

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._server = await serve(
            self._subscriber,
            host,
            port,
            process_request=self._handshake,
            compression=None,
            max_size=2**16,  # subscribers send little or nothing
            ssl=self._ssl,
        )
        self.host, self.port = self._server.sockets[0].getsockname()[:2]
        _log.debug("upstream simulator listening on %s", self.base_url)

    async def stop(self) -> None:
        """Closes every subscriber with 1001 (going away) and stops listening."""
        if self._server is None:
            return
        for live in self._live.values():
            for record in live.values():
                record.server_action = record.server_action or "shutdown"
        self._server.close()
        await self._server.wait_closed()
        self._server = None

    async def __aenter__(self) -> "UpstreamSimulator":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def base_url(self) -> str:
        return f"{'wss' if self._ssl else 'ws'}://{self.host}:{self.port}"

    def url(self, stream_id: str, path: str = "stream", **query: Any) -> str:
        """ws://host:port/<path>/<id>?<query>; path is "stream", "flaky" or "refuse"."""
        suffix = f"?{urlencode(query)}" if query else ""
        return f"{self.base_url}/{path}/{stream_id}{suffix}"

    # -- streams ------------------------------------------------------------------------------

    def create_stream(
        self, stream_id: str, rate: float | None = None, total: int | None = None
    ) -> bool:
        """Creates the stream (seq 1 is due now) unless it exists; True if it was created.
        Raises StreamLimitReached past max_streams."""
        if stream_id in self._streams:
            return False
        if len(self._streams) >= self.max_streams:
            raise StreamLimitReached(f"the simulator holds {self.max_streams} streams already")
        self._streams[stream_id] = SimulatedStream(
            stream_id=stream_id,
            rate=float(rate or self.rate),
            total=total,
            buffer_size=self.buffer_size,
            started_at=time.monotonic(),
            started_at_ms=_wall_ms(),
            max_records=self.max_records_per_stream,
        )
        return True

    def end_stream(self, stream_id: str) -> None:
        """The meeting ends: nothing more is emitted; subscribers get what was due, then 1000.
        Raises KeyError for an unknown stream."""
        self._streams[stream_id].end(time.monotonic())

    def drop_subscribers(self, stream_id: str) -> int:
        """Aborts every subscriber's TCP connection (no close frame); returns how many."""
        live = self._live.get(stream_id, {})
        for ws, record in live.items():
            record.server_action = "drop"
            ws.transport.abort()
        return len(live)

    async def wait_for_subscribers(
        self, stream_id: str, count: int, timeout_s: float = 5.0
    ) -> None:
        """Returns once `stream_id` has exactly `count` subscribers whose connect (or
        disconnect, with its close code) is recorded; raises TimeoutError after `timeout_s`."""
        async with asyncio.timeout(timeout_s):
            while self.subscribers(stream_id) != count:
                await self._changed.wait()

    def subscribers(self, stream_id: str) -> int:
        live = self._live.get(stream_id)
        return len(live) if live else 0

    def emitted(self, stream_id: str) -> int:
        """The highest seq due on `stream_id` (0 if unknown)."""
        stream = self._streams.get(stream_id)
        return stream.due(time.monotonic()) if stream else 0

    def record(self, stream_id: str) -> dict[str, Any]:
        """The stream's record (JSON-ready; shape in the README of this package).
        Raises KeyError for an unknown stream."""
        return self._streams[stream_id].to_json(time.monotonic())

    def records(self) -> dict[str, dict[str, Any]]:
        now = time.monotonic()
        return {sid: s.to_json(now) for sid, s in self._streams.items()}

    # -- handshake ----------------------------------------------------------------------------

    async def _handshake(self, ws: ServerConnection, request: Request) -> Response | None:
        segments, _ = split(request.path)
        if len(segments) == 3 and segments[0] == "hostile":
            if segments[1] not in hostile.KINDS:
                return ws.respond(404, "unknown hostile kind\n")
            if segments[1] == "slow-handshake":
                self.hostile_connects[segments[2]] = self.hostile_connects.get(segments[2], 0) + 1
                await asyncio.sleep(hostile.SLOW_HANDSHAKE_S)
            return None
        return self._process_request(ws, request)

    def _process_request(self, ws: ServerConnection, request: Request) -> Response | None:
        segments, query = split(request.path)
        try:
            if len(segments) == 2 and segments[0] in ("stream", "flaky"):
                sub = parse_subscription(segments, query)
                if sub.stream_id not in self._streams and not self.auto_create:
                    return ws.respond(404, "unknown stream\n")
                if sub.stream_id not in self._streams:
                    self.create_stream(sub.stream_id, sub.rate, sub.total)
                return None  # accept: `_subscriber` takes over
            if len(segments) == 2 and segments[0] == "refuse":
                return ws.respond(403, "refused by the simulator\n")
        except BadRequest as exc:
            return ws.respond(400, f"{exc}\n")
        except StreamLimitReached as exc:
            return ws.respond(503, f"{exc}\n")
        return control.respond(self, ws, request.method, segments, query)

    # -- subscribers --------------------------------------------------------------------------

    async def _subscriber(self, ws: ServerConnection) -> None:
        segments, query = split(ws.request.path if ws.request else "")
        if segments[0] == "hostile":
            await self._hostile(ws, segments[1], segments[2], query)
            return
        sub = parse_subscription(segments, query)  # validated by _process_request
        stream = self._streams[sub.stream_id]
        now = time.monotonic()
        first = max(sub.from_seq, 1) if sub.from_seq is not None else stream.due(now) + 1
        host, port = ws.remote_address[:2]
        record = ConnectionRecord(
            number=stream.connects + 1,
            remote=f"{host}:{port}",
            from_seq=sub.from_seq,
            connected_at_ms=_wall_ms(),
            next_seq=first,
        )
        stream.subscribe(record)
        live = self._live.setdefault(stream.stream_id, {})
        live[ws] = record
        sender = asyncio.create_task(self._send(ws, stream, record, sub))
        self._notify()
        disconnected_at_ms = None
        try:
            try:
                # Reading drains whatever subscribers send (subscribe frames, ignored) and
                # returns the moment the connection closes: that is the disconnect time.
                with suppress(ConnectionClosed):
                    async for _ in ws:
                        record.received += 1
            finally:
                disconnected_at_ms = _wall_ms()
                sender.cancel()
                await asyncio.wait([sender])
                if not sender.cancelled() and sender.exception() is not None:
                    _log.error("sender of %s failed", stream.stream_id, exc_info=sender.exception())
            await ws.wait_closed()
            record.close_code = ws.close_code
        finally:
            stream.unsubscribe(record, disconnected_at_ms or _wall_ms())
            del live[ws]
            if not live:
                del self._live[stream.stream_id]
            self._notify()

    async def _hostile(
        self, ws: ServerConnection, kind: str, sid: str, query: dict[str, str]
    ) -> None:
        self.hostile_connects[sid] = self.hostile_connects.get(sid, 0) + 1
        from_seq = int(query.get("from_seq", "1"))
        sender = asyncio.create_task(hostile.play(ws, kind, sid, from_seq, self.rate))
        try:
            with suppress(ConnectionClosed):
                async for _ in ws:
                    pass
        finally:
            sender.cancel()
            await asyncio.gather(sender, return_exceptions=True)

    def _notify(self) -> None:
        """Wakes `wait_for_subscribers` callers (each waits on the event current when it
        looked; a fresh one replaces it)."""
        self._changed.set()
        self._changed = asyncio.Event()

    async def _send(
        self,
        ws: ServerConnection,
        stream: SimulatedStream,
        record: ConnectionRecord,
        sub: Subscription,
    ) -> None:
        now = time.monotonic()
        if sub.from_seq is not None and record.next_seq < stream.oldest_retained(now):
            record.server_action = "gone"
            oldest = stream.oldest_retained(now)
            await ws.close(CLOSE_GONE, f"seq {record.next_seq} is gone; oldest retained {oldest}")
            return
        drop_at = now + (sub.drop_after_s or self.flaky_drop_after_s) if sub.flaky else None
        with suppress(ConnectionClosed):
            while True:
                now = time.monotonic()
                if drop_at is not None and now >= drop_at:
                    record.server_action = "flaky"
                    ws.transport.abort()
                    return
                due = stream.due(now)
                if record.next_seq <= due:
                    await self._send_due(ws, stream, record, due, sub.pad)
                    continue  # look at the clock again: more may be due, or the stream ended
                if stream.finished(now):  # everything due at `now` was sent and no more will be
                    record.server_action = "end"
                    await ws.close(1000, "stream ended")
                    return
                wake = stream.due_at(record.next_seq)
                if drop_at is not None:
                    wake = min(wake, drop_at)
                # A little past the due time, so that float rounding never wakes us too early.
                with suppress(TimeoutError):
                    async with asyncio.timeout(max(0.0, wake - time.monotonic()) + 1e-4):
                        await stream.ended.wait()

    @staticmethod
    async def _send_due(
        ws: ServerConnection, stream: SimulatedStream, record: ConnectionRecord, due: int, pad: int
    ) -> None:
        while record.next_seq <= due:
            await ws.send(stream.message(record.next_seq, pad))
            if record.first_seq is None:
                record.first_seq = record.next_seq
            record.last_seq = record.next_seq
            record.next_seq += 1
            record.sent += 1
            stream.sent += 1
            if record.sent % _YIELD_EVERY == 0:
                await asyncio.sleep(0)  # a long replay must not starve other subscribers
