"""One function maps a row to a domain value, one maps back: connections, sessions, events.
The same columns as SQLite's (adapters/sqlite/rows.py); asyncpg takes them positionally, in
the order of CONNECTION_COLUMNS / SESSION_COLUMNS."""

import json
from typing import Any

import asyncpg

from domain import Connection, DesiredState, Event, SessionEvent, StopReason, WorkerSession
from domain.codec import event_from_dict, event_to_dict, for_the_log, session_event_from_dict

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
LOG_COLUMNS = ("version", "event_type", "at_ms", "body")


def connection_to_row(conn: Connection) -> tuple[Any, ...]:
    return (
        conn.connection_id,
        conn.version,
        conn.desired_state.value,
        conn.ws_url,
        conn.owner,
        conn.token,
        conn.checkpoint_seq,
        conn.failures,
        conn.not_before_ms,
        conn.stop_reason.value if conn.stop_reason else None,
        conn.updated_at_ms,
    )


def connection_from_row(row: asyncpg.Record) -> Connection:
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


def session_to_row(session: WorkerSession) -> tuple[Any, ...]:
    return (
        session.session_id,
        session.version,
        session.expires_at_ms,
        session.held,
        session.capacity,
        session.rate_milli,
        session.ended_reason,
        session.opened_at_ms,
        session.updated_at_ms,
    )


def session_from_row(row: asyncpg.Record) -> WorkerSession:
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


def log_row(key: str, event: Event | SessionEvent) -> tuple[Any, ...]:
    """(id, version, event_type, at_ms, body): the body is the domain codec's JSON."""
    body = json.dumps(event_to_dict(for_the_log(event)), separators=(",", ":"))
    return (key, event.version, type(event).__name__, event.at_ms, body)


def event_from_row(row: asyncpg.Record) -> Event:
    return event_from_dict(json.loads(row["body"]))


def session_event_from_row(row: asyncpg.Record) -> SessionEvent:
    return session_event_from_dict(json.loads(row["body"]))
