"""One function maps a row to a domain value, one maps back: connections, sessions, events."""

import json
import sqlite3
from typing import Any

from domain import Connection, DesiredState, Event, SessionEvent, StopReason, WorkerSession
from domain.codec import (
    event_from_dict,
    event_to_dict,
    for_the_log,
    session_event_from_dict,
)

CONNECTION_COLUMNS = (
    "connection_id",
    "version",
    "desired_state",
    "ws_url",
    "owner",
    "token",
    "checkpoint_seq",
    "failures",
    "not_before_ms",
    "stop_reason",
    "updated_at_ms",
)

SESSION_COLUMNS = (
    "session_id",
    "version",
    "expires_at_ms",
    "held",
    "capacity",
    "rate_milli",
    "ended_reason",
    "opened_at_ms",
    "updated_at_ms",
)


def connection_to_row(conn: Connection) -> dict[str, Any]:
    return {
        "connection_id": conn.connection_id,
        "version": conn.version,
        "desired_state": conn.desired_state.value,
        "ws_url": conn.ws_url,
        "owner": conn.owner,
        "token": conn.token,
        "checkpoint_seq": conn.checkpoint_seq,
        "failures": conn.failures,
        "not_before_ms": conn.not_before_ms,
        "stop_reason": conn.stop_reason.value if conn.stop_reason else None,
        "updated_at_ms": conn.updated_at_ms,
    }


def connection_from_row(row: sqlite3.Row) -> Connection:
    return Connection(
        connection_id=row["connection_id"],
        version=row["version"],
        desired_state=DesiredState(row["desired_state"]),
        ws_url=row["ws_url"],
        owner=row["owner"],
        token=row["token"],
        checkpoint_seq=row["checkpoint_seq"],
        failures=row["failures"],
        not_before_ms=row["not_before_ms"],
        stop_reason=StopReason(row["stop_reason"]) if row["stop_reason"] else None,
        updated_at_ms=row["updated_at_ms"],
    )


def session_to_row(session: WorkerSession) -> dict[str, Any]:
    return {
        "session_id": session.session_id,
        "version": session.version,
        "expires_at_ms": session.expires_at_ms,
        "held": session.held,
        "capacity": session.capacity,
        "rate_milli": session.rate_milli,
        "ended_reason": session.ended_reason,
        "opened_at_ms": session.opened_at_ms,
        "updated_at_ms": session.updated_at_ms,
    }


def session_from_row(row: sqlite3.Row) -> WorkerSession:
    return WorkerSession(
        session_id=row["session_id"],
        version=row["version"],
        expires_at_ms=row["expires_at_ms"],
        held=row["held"],
        capacity=row["capacity"],
        rate_milli=row["rate_milli"],
        ended_reason=row["ended_reason"],
        opened_at_ms=row["opened_at_ms"],
        updated_at_ms=row["updated_at_ms"],
    )


def event_to_row(event: Event) -> dict[str, Any]:
    return {"connection_id": event.connection_id, **_log_row(event)}


def event_from_row(row: sqlite3.Row) -> Event:
    return event_from_dict(json.loads(row["body"]))


def session_event_to_row(event: SessionEvent) -> dict[str, Any]:
    return {"session_id": event.session_id, **_log_row(event)}


def _log_row(event: Event | SessionEvent) -> dict[str, Any]:
    """The columns both ownership logs share; the body is the domain codec's JSON."""
    return {
        "version": event.version,
        "event_type": type(event).__name__,
        "at_ms": event.at_ms,
        "body": json.dumps(event_to_dict(for_the_log(event)), separators=(",", ":")),
    }


def session_event_from_row(row: sqlite3.Row) -> SessionEvent:
    return session_event_from_dict(json.loads(row["body"]))
