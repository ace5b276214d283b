"""The upstream connector port: open a stream of sequenced messages, resuming from a seq."""

from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol

import attrs


@attrs.frozen
class UpstreamMessage:
    """One message. `seq` is the upstream's own sequence number, or None when the upstream
    does not number its messages (then the worker numbers them and cannot resume exactly)."""

    seq: int | None
    data: str


class UpstreamStream(Protocol):
    def messages(self) -> AsyncIterator[UpstreamMessage]:
        """Messages in order. The iterator ENDS (StopAsyncIteration) only when the upstream
        finished the stream normally; a dropped or failed stream raises UpstreamUnavailable
        (retry with back-off) or UpstreamRejected (do not retry soon)."""
        ...


class UpstreamConnector(Protocol):
    def open(
        self, url: str, from_seq: int, addresses: Sequence[str]
    ) -> AbstractAsyncContextManager[UpstreamStream]:
        """Connect to `url` asking for messages from `from_seq` on (inclusive), at one of
        `addresses` (the URL policy's vetted answer for the URL's host: an adapter that
        reaches the network connects only to those, never resolving the host again). Entering
        raises UpstreamUnavailable or UpstreamRejected; leaving closes the connection."""
        ...
