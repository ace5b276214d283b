"""The upstream port on WebSockets (websockets' asyncio client), with URL-credential redaction
and the hook through which teams adapt it to their upstream. The names below are imported
when first used (adapters/lazy.py)."""

from typing import TYPE_CHECKING

from adapters.lazy import exports

if TYPE_CHECKING:
    from adapters.websocket.connector import WebSocketConnector, WebSocketStream
    from adapters.websocket.hooks import DefaultUpstreamHook, Send, UpstreamHook
    from adapters.websocket.options import WebSocketOptions
    from adapters.websocket.parsing import parse_json_message, with_resume
    from adapters.websocket.redact import redact_url

__all__ = [
    "DefaultUpstreamHook",
    "Send",
    "UpstreamHook",
    "WebSocketConnector",
    "WebSocketOptions",
    "WebSocketStream",
    "parse_json_message",
    "redact_url",
    "with_resume",
]

if not TYPE_CHECKING:  # mypy reads the imports above, and refuses any other name
    __getattr__ = exports(
        __name__,
        {
            "DefaultUpstreamHook": "hooks",
            "Send": "hooks",
            "UpstreamHook": "hooks",
            "WebSocketConnector": "connector",
            "WebSocketOptions": "options",
            "WebSocketStream": "connector",
            "parse_json_message": "parsing",
            "redact_url": "redact",
            "with_resume": "parsing",
        },
    )
