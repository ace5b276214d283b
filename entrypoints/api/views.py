"""What the API shows of a connection and of its history. URLs are shown redacted: callers
often put credentials in them, and readers of GET are not necessarily who sent the START."""

from typing import Any

from adapters.websocket import redact_url
from domain import NO_OWNER, Connection, Event, LeaseStatus, SessionLookup, WorkerSession
from domain.codec import event_to_dict


def connection_view(conn: Connection, now_ms: int, sessions: SessionLookup) -> dict[str, Any]:
    """`sessions` holds at least the owner's session (if it is still known): the lease is
    held while that session is live, and expires with it."""
    status = conn.lease_status(now_ms, sessions)
    owner = sessions.get(conn.owner)
    held = status is LeaseStatus.HELD and owner is not None
    return {
        "connection_id": conn.connection_id,
        "desired_state": conn.desired_state.value,
        "ws_url": redact_url(conn.ws_url),
        "lease_status": status.value,
        "owner": None if conn.owner == NO_OWNER else conn.owner,
        "token": conn.token,
        "lease_remaining_ms": owner.expires_at_ms - now_ms if held and owner else 0,
        "lease_expires_at_ms": owner.expires_at_ms if owner else None,
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


def session_view(session: WorkerSession, now_ms: int) -> dict[str, Any]:
    return {
        "session_id": session.session_id,
        "status": session.status(now_ms).value,
        "expires_in_ms": session.expires_at_ms - now_ms,
        "held": session.held,
        "capacity": session.capacity,
        "ended_reason": session.ended_reason,
        "opened_at_ms": session.opened_at_ms,
        "version": session.version,
    }
