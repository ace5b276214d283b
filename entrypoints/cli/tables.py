"""How the operator commands show connections and histories in a terminal (rich tables; plain
text when the output is not a terminal). URLs are shown redacted, as the API shows them."""

import datetime
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from adapters.websocket import redact_url
from domain import (
    NO_OWNER,
    Connection,
    DesiredState,
    Event,
    LeaseStatus,
    SessionEvent,
    SessionExpired,
    SessionLookup,
    WorkerSession,
)
from domain.codec import event_to_dict
from entrypoints.api.views import event_view


def console() -> Console:
    """The terminal's width on a terminal; wide lines for pipes and files (scripts grep them)."""
    terminal = Console()
    return terminal if terminal.is_terminal else Console(width=200)


def lease_text(conn: Connection, now_ms: int, sessions: SessionLookup) -> str:
    status = conn.lease_status(now_ms, sessions)
    owner = sessions.get(conn.owner)
    if status is LeaseStatus.HELD and owner is not None:
        return f"{(owner.expires_at_ms - now_ms) / 1000:.1f}s"
    if status is LeaseStatus.EXPIRED:
        if owner is None:
            return "owner gone"
        if owner.ended_reason is not None:
            return f"owner ended ({owner.ended_reason})"
        return f"expired {(now_ms - owner.expires_at_ms) / 1000:.1f}s ago"
    return str(status.value).lower().replace("_", " ")


def owner_text(conn: Connection) -> str:
    return "-" if conn.owner == NO_OWNER else conn.owner


def status_table(connections: Sequence[Connection], now_ms: int, sessions: SessionLookup) -> Table:
    table = Table(show_edge=False, pad_edge=False)
    for name, justify in (
        ("connection", "left"),
        ("desired", "left"),
        ("owner", "left"),
        ("lease", "right"),
        ("token", "right"),
        ("checkpoint", "right"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for conn in connections:
        desired = conn.desired_state.value
        if conn.stop_reason is not None:
            desired += f" ({conn.stop_reason.value.lower().replace('_', ' ')})"
        table.add_row(
            conn.connection_id,
            desired,
            owner_text(conn),
            lease_text(conn, now_ms, sessions),
            str(conn.token),
            str(conn.checkpoint_seq),
        )
    return table


def sessions_table(
    sessions: Sequence[WorkerSession], now_ms: int, owned: Mapping[str, int]
) -> Table:
    """`owned`: session id -> connections it owns now (the session's own `held` is what it
    reported at its last renew, stale once it has released them)."""
    table = Table(show_edge=False, pad_edge=False)
    for name, justify in (
        ("worker session", "left"),
        ("status", "left"),
        ("expires", "right"),
        ("owns", "right"),
        ("capacity", "right"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for session in sessions:
        status = session.status(now_ms).value.lower()
        left_s = (session.expires_at_ms - now_ms) / 1000
        if session.ended_reason is not None:
            status += f" ({session.ended_reason})"
            expires = "-"
        elif left_s < 0:
            expires = f"{-left_s:.1f}s ago"
        else:
            expires = f"in {left_s:.1f}s"
            if session.leaving:
                status += " (leaving)"  # shutting down: handing its connections over
        table.add_row(
            session.session_id,
            status,
            expires,
            str(owned.get(session.session_id, 0)),
            str(session.capacity),
        )
    return table


def print_status(
    console: Console,
    connections: Sequence[Connection],
    sessions: Sequence[WorkerSession],
    now_ms: int,
    *,
    limited: bool,
) -> None:
    lookup = {s.session_id: s for s in sessions}
    if sessions:
        console.print(sessions_table(sessions, now_ms, Counter(c.owner for c in connections)))
        live = sum(s.is_live(now_ms) for s in sessions)
        console.print(f"{len(sessions)} worker sessions: {live} live")
    if not connections:
        console.print("no connections")
        return
    console.print(status_table(connections, now_ms, lookup))
    # The store's checkpoint is written rarely by design (WSFLEET_CHECKPOINT_INTERVAL_S):
    # without this line a low number reads as "nothing stored".
    console.print(
        "checkpoint: the last seq recorded in the store, at every release and every "
        "WSFLEET_CHECKPOINT_INTERVAL_S while streaming; the messages store holds more "
        "(`wsfleet messages <connection>`)"
    )
    started = sum(c.desired_state is DesiredState.STARTED for c in connections)
    held = Counter(
        c.owner for c in connections if c.lease_status(now_ms, lookup) is LeaseStatus.HELD
    )
    more = " (limit reached: --limit shows more)" if limited else ""
    console.print(
        f"{len(connections)} connections{more}: {started} started, "
        f"{sum(held.values())} held by {len(held)} workers"
    )


def print_outcome(
    console: Console, result: str, conn: Connection, now_ms: int, sessions: SessionLookup
) -> None:
    console.print(
        f"{conn.connection_id}: {result} - {conn.desired_state.value}, "
        f"owner {owner_text(conn)}, lease {lease_text(conn, now_ms, sessions)}, "
        f"token {conn.token}, "
        f"checkpoint {conn.checkpoint_seq}, url {redact_url(conn.ws_url)}",
        highlight=False,
        soft_wrap=True,
    )


def print_history(console: Console, connection_id: str, events: Sequence[Event]) -> None:
    _print_log(console, f"history of {connection_id}", [(e, event_view(e)) for e in events])
    missing = versions_not_logged(events)
    if missing:
        shown = ", ".join(str(v) for v in missing[:20]) + (" ..." if len(missing) > 20 else "")
        console.print(
            f"versions {shown}: checkpoints (the connection keeps the latest; the log keeps "
            "ownership changes, and each release says the checkpoint it left)",
            highlight=False,
        )


def versions_not_logged(events: Sequence[Event]) -> list[int]:
    """The versions between the first and last logged event that the log does not hold: the
    checkpoints, which change the connection but are not ownership changes."""
    logged = {e.version for e in events}
    if not logged:
        return []
    return [v for v in range(min(logged), max(logged) + 1) if v not in logged]


def print_session_history(
    console: Console, session_id: str, events: Sequence[SessionEvent]
) -> None:
    rows = [(e, _session_event_view(e)) for e in events]
    _print_log(console, f"history of worker session {session_id}", rows)


def _session_event_view(event: SessionEvent) -> dict[str, Any]:
    view = event_to_dict(event)
    if isinstance(event, SessionExpired):
        # The row's time is when it was found dead; when it died is its last renew's expiry.
        for field in ("expired_at_ms", "found_by"):
            del view[field]
        view = {**view, "expired_at": utc(event.expired_at_ms), "found_by": event.found_by}
    return view


_LOG_FIELDS = ("type", "connection_id", "session_id", "version", "at_ms")


def _print_log(
    console: Console, title: str, rows: Sequence[tuple[Event | SessionEvent, dict[str, Any]]]
) -> None:
    table = Table(title=title, show_edge=False, pad_edge=False)
    table.add_column("version", justify="right")
    table.add_column("at (UTC)")
    table.add_column("event")
    table.add_column("details", overflow="fold")
    for event, view in rows:
        details = ", ".join(f"{k}={v}" for k, v in view.items() if k not in _LOG_FIELDS)
        table.add_row(str(event.version), utc(event.at_ms), view["type"], details)
    console.print(table)


def utc(at_ms: int) -> str:
    moment = datetime.datetime.fromtimestamp(at_ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{at_ms % 1000:03d}"
