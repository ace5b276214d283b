"""What the API shows of a connection and of its history. URLs are shown redacted: callers
often put credentials in them, and readers of GET are not necessarily who sent the START."""

from typing import Any

from adapters.websocket import redact_url
from domain import NO_OWNER, Connection, Event
from domain.codec import event_to_dict


def connection_view(conn: Connection, now_ms: int) -> dict[str, Any]:
    return {
        "connection_id": conn.connection_id,
        "desired_state": conn.desired_state.value,
        "ws_url": redact_url(conn.ws_url),
        "lease_status": conn.lease_status(now_ms).value,
        "owner": None if conn.owner == NO_OWNER else conn.owner,
        "token": conn.token,
        "lease_remaining_ms": conn.lease_remaining_ms(now_ms),
        "lease_expires_at_ms": conn.expires_at_ms,
        "checkpoint_seq": conn.checkpoint_seq,
        "failures": conn.failures,
        "not_before_ms": conn.not_before_ms,
        "stop_reason": None if conn.stop_reason is None else conn.stop_reason.value,
        "version": conn.version,
        "updated_at_ms": conn.updated_at_ms,
    }


def event_view(event: Event) -> dict[str, Any]:
    view = event_to_dict(event)
    if "ws_url" in view:
        view["ws_url"] = redact_url(view["ws_url"])
    return view
