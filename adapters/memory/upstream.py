"""FakeUpstream: streams that advance on the injected clock whether or not anyone listens,
replay from any seq, and record every subscriber — the judge of "exactly one subscriber" and
"no message lost" in tests that run on virtual time."""

import contextlib
from collections.abc import AsyncIterator, Sequence

import attrs

from application.errors import UpstreamRejected, UpstreamUnavailable
from application.ports import Clock
from application.ports.upstream import UpstreamMessage


@attrs.define
class FakeStream:
    url: str
    started_at_s: float  # monotonic time of seq 1
    rate_per_s: float
    total: int | None = None  # ends normally after this many messages
    fail_opens: int = 0  # the next N opens fail with UpstreamUnavailable
    drop_after: int | None = None  # drop (abnormally) each subscriber after N messages
    rejected: bool = False
    lost: set[int] = attrs.Factory(set)  # seqs the upstream never delivers (lost upstream)
    # Extra messages sent just before seq N (each time N is sent): a hostile or broken upstream.
    inject: dict[int, list[UpstreamMessage]] = attrs.Factory(dict)
    numbered: bool = True  # False: messages carry no seq (the worker numbers them)
    subscribers: int = 0
    peak_subscribers: int = 0
    opens: int = 0
    log: list[tuple[float, str, int]] = attrs.Factory(list)  # (time, "open"/"close", from_seq)
    addresses: list[tuple[str, ...]] = attrs.Factory(list)  # the vetted addresses, per open

    def opened_from(self) -> list[int]:
        """The seq each subscription asked to start from, in order (where each owner resumed)."""
        return [from_seq for _, what, from_seq in self.log if what == "open"]

    def due(self, now_s: float) -> int:
        """The highest seq emitted by `now_s`."""
        emitted = int((now_s - self.started_at_s) * self.rate_per_s)
        return min(emitted, self.total) if self.total is not None else emitted


class FakeUpstream:
    def __init__(self, clock: Clock, rate_per_s: float = 10.0) -> None:
        self._clock = clock
        self._rate = rate_per_s
        self.streams: dict[str, FakeStream] = {}

    def stream(self, url: str) -> FakeStream:
        """The stream at `url`, created (and starting to emit) on first mention."""
        if url not in self.streams:
            self.streams[url] = FakeStream(url, self._clock.monotonic(), self._rate)
        return self.streams[url]

    @contextlib.asynccontextmanager
    async def open(
        self, url: str, from_seq: int, addresses: Sequence[str] = ()
    ) -> AsyncIterator["_Subscription"]:
        stream = self.stream(url)
        stream.opens += 1
        stream.addresses.append(tuple(addresses))
        if stream.rejected:
            raise UpstreamRejected(f"{url} refused the subscription (403)")
        if stream.fail_opens > 0:
            stream.fail_opens -= 1
            raise UpstreamUnavailable(f"{url} connection refused")
        stream.subscribers += 1
        stream.peak_subscribers = max(stream.peak_subscribers, stream.subscribers)
        stream.log.append((self._clock.monotonic(), "open", from_seq))
        try:
            yield _Subscription(self._clock, stream, from_seq)
        finally:
            stream.subscribers -= 1
            stream.log.append((self._clock.monotonic(), "close", from_seq))


class _Subscription:
    def __init__(self, clock: Clock, stream: FakeStream, from_seq: int) -> None:
        self._clock = clock
        self._stream = stream
        self._next = max(1, from_seq)

    async def messages(self) -> AsyncIterator[UpstreamMessage]:
        stream, sent = self._stream, 0
        while True:
            if stream.total is not None and self._next > stream.total:
                return  # the stream ended normally
            if stream.drop_after is not None and sent >= stream.drop_after:
                raise UpstreamUnavailable(f"{stream.url} dropped the connection")
            if self._next <= stream.due(self._clock.monotonic()):
                seq = self._next
                self._next += 1
                for extra in stream.inject.get(seq, []):
                    yield extra
                if seq in stream.lost:
                    continue
                sent += 1
                yield UpstreamMessage(seq if stream.numbered else None, f"{stream.url}#{seq}")
            else:
                await self._clock.sleep(1 / stream.rate_per_s)
