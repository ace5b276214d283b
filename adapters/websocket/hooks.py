"""The upstream hook: how a team adapts the connector to its upstream without forking.

A hook can add headers to the handshake (auth tokens), send frames right after connecting
(a subscribe message) and turn each received text into a message (its own seq format).
Subclass `DefaultUpstreamHook` and override only what differs.
"""

from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

from adapters.websocket.parsing import parse_json_message
from application.ports import UpstreamMessage

Send = Callable[[str], Awaitable[None]]


class UpstreamHook(Protocol):
    def headers(self, url: str) -> Mapping[str, str]:
        """Extra handshake headers for `url` (called on every connect: tokens may rotate)."""
        ...

    async def on_open(self, send: Send, from_seq: int) -> None:
        """Runs once the connection is open, before any message is read; `send` sends a text
        frame. A closed connection here surfaces as the connector's usual errors."""
        ...

    def parse(self, raw: str) -> UpstreamMessage | None:
        """The message in `raw`, or None to skip the frame (acks, heartbeats). Raise
        ValueError for a malformed frame: the connector reports UpstreamRejected (so it does
        for any other exception, named by its type)."""
        ...


class DefaultUpstreamHook:
    """No extra headers, nothing sent on open, JSON messages with a seq field."""

    def __init__(self, seq_field: str = "seq", data_field: str | None = None) -> None:
        self.seq_field = seq_field
        self.data_field = data_field

    def headers(self, url: str) -> Mapping[str, str]:
        return {}

    async def on_open(self, send: Send, from_seq: int) -> None:
        return None

    def parse(self, raw: str) -> UpstreamMessage | None:
        return parse_json_message(raw, self.seq_field, self.data_field)
