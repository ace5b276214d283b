"""An upstream hook of your own: authenticate, subscribe after connecting, read your format.

    WSFLEET_UPSTREAM_HOOK=examples.subscribe_hook:SubscribeHook
    UPSTREAM_TOKEN=...            (read here, sent as a header; never put tokens in URLs)

This upstream wants a bearer token on the handshake, a subscribe frame naming the seq to
resume from, and sends `{"seq": n, "data": ...}` messages mixed with `{"type": "heartbeat"}`
frames that carry no data. Subclass DefaultUpstreamHook and override only what differs.
"""

import json
import os
from collections.abc import Mapping

from adapters.websocket import DefaultUpstreamHook, Send
from application.ports import UpstreamMessage


class SubscribeHook(DefaultUpstreamHook):
    def headers(self, url: str) -> Mapping[str, str]:
        # Called on every connect, so a rotated token is picked up without a restart.
        token = os.environ.get("UPSTREAM_TOKEN")
        return {"Authorization": f"Bearer {token}"} if token else {}

    async def on_open(self, send: Send, from_seq: int) -> None:
        await send(json.dumps({"action": "subscribe", "from_seq": from_seq}))

    def parse(self, raw: str) -> UpstreamMessage | None:
        document = json.loads(raw)  # a ValueError here marks the frame malformed
        if not isinstance(document, dict):
            raise ValueError("expected a JSON object")
        if document.get("type") == "heartbeat":
            return None  # skipped: not a message
        try:
            return UpstreamMessage(seq=int(document["seq"]), data=str(document["data"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a message: missing or bad {exc}") from exc
