"""The PostgreSQL schema, defined once, versioned, and applied by `migrate` (`wsfleet migrate`
when deployed; the tests call it on each fresh database). Nothing creates tables at start-up:
`check_schema` refuses a database whose version this wsfleet does not know, by name.

Store, hint queue and sink share one database and one version: their tables change together.

connections: one row per connection, the current state (the fold of its events). A lease has
  no expiry of its own: it is held while its owner's session is live, so nothing here moves on
  a heartbeat. Partial indexes, one question each (as in SQLite):
  - connections_unowned: STARTED with no owner, by (not_before_ms, connection_id): the
    orphans whose back-off is over (one range scan) and the earliest back-off end (one seek);
  - connections_by_owner: owned ones by (owner, connection_id): a dead session's
    connections, whether a session owns anything (forget), and the distinct owners (a
    recursive loose index scan: one seek per owner);
  - connections_stops: STOPPED and still owned, by owner: `stop_requested`.
sessions: one row per worker session; the heartbeat updates only this row.
connection_events / session_events: the ownership logs, keyed (id, version); kept after a
  session row is forgotten, so a forgotten id is never opened again.
hints: the notification queue. visible_at_ms is wall-clock epoch ms (comparable across hosts);
  a received row carries the receipt of its latest delivery; ids never repeat (identity).
messages: the sink, keyed (connection_id, seq); `writes` counts how often a seq was written.
  prev_seq comes before data, so the resume-point walk reads no large values (TOAST).
"""

from typing import TYPE_CHECKING, TypeAlias

import asyncpg

from application.errors import ConfigurationError

# A connection taken from a pool: what every statement of these adapters runs on (generic
# only in the stubs).
if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

    Conn: TypeAlias = PoolConnectionProxy[asyncpg.Record]
else:
    from asyncpg.pool import PoolConnectionProxy as Conn

SCHEMA_VERSION = 2
VERSION_TABLE = "schema_version"
CONNECTIONS = "connections"
SESSIONS = "sessions"
EVENTS = "connection_events"
SESSION_EVENTS = "session_events"
HINTS = "hints"
MESSAGES = "messages"
# The channel a hint send notifies; receivers LISTEN on it to wake at once.
HINTS_CHANNEL = "wsfleet_hints"

# Migrations by the version they bring the database to; each runs in one transaction.
MIGRATIONS: dict[int, str] = {
    1: f"""
CREATE TABLE {CONNECTIONS} (
    connection_id   TEXT PRIMARY KEY,
    version         BIGINT NOT NULL,
    desired_state   TEXT NOT NULL,
    ws_url          TEXT NOT NULL,
    owner           TEXT NOT NULL,
    token           BIGINT NOT NULL,
    checkpoint_seq  BIGINT NOT NULL,
    failures        INTEGER NOT NULL,
    not_before_ms   BIGINT NOT NULL,
    stop_reason     TEXT,
    updated_at_ms   BIGINT NOT NULL
);
CREATE INDEX {CONNECTIONS}_unowned ON {CONNECTIONS} (not_before_ms, connection_id)
    WHERE desired_state = 'STARTED' AND owner = '';
CREATE INDEX {CONNECTIONS}_by_owner ON {CONNECTIONS} (owner, connection_id) WHERE owner <> '';
CREATE INDEX {CONNECTIONS}_stops ON {CONNECTIONS} (owner, connection_id)
    WHERE desired_state = 'STOPPED' AND owner <> '';
CREATE TABLE {SESSIONS} (
    session_id    TEXT PRIMARY KEY,
    version       BIGINT NOT NULL,
    expires_at_ms BIGINT NOT NULL,
    held          INTEGER NOT NULL,
    capacity      INTEGER NOT NULL,
    ended_reason  TEXT,
    opened_at_ms  BIGINT NOT NULL,
    updated_at_ms BIGINT NOT NULL
);
CREATE TABLE {EVENTS} (
    connection_id TEXT NOT NULL,
    version       BIGINT NOT NULL,
    event_type    TEXT NOT NULL,
    at_ms         BIGINT NOT NULL,
    body          TEXT NOT NULL,
    PRIMARY KEY (connection_id, version)
);
CREATE TABLE {SESSION_EVENTS} (
    session_id TEXT NOT NULL,
    version    BIGINT NOT NULL,
    event_type TEXT NOT NULL,
    at_ms      BIGINT NOT NULL,
    body       TEXT NOT NULL,
    PRIMARY KEY (session_id, version)
);
CREATE TABLE {HINTS} (
    id            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    body          TEXT NOT NULL,
    sent_at_ms    BIGINT NOT NULL,
    visible_at_ms BIGINT NOT NULL,
    receipt       TEXT,
    receive_count INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX {HINTS}_by_visibility ON {HINTS} (visible_at_ms, id);
CREATE TABLE {MESSAGES} (
    connection_id  TEXT NOT NULL,
    seq            BIGINT NOT NULL,
    prev_seq       BIGINT NOT NULL,
    token          BIGINT NOT NULL,
    received_at_ms BIGINT NOT NULL,
    writes         INTEGER NOT NULL DEFAULT 1,
    worker_id      TEXT NOT NULL,
    data           TEXT NOT NULL,
    PRIMARY KEY (connection_id, seq)
);
""",
    # The sessions' message rate (issue 27: balance by load), reported with each renew.
    2: f"ALTER TABLE {SESSIONS} ADD COLUMN rate_milli BIGINT NOT NULL DEFAULT 0;",
}
assert max(MIGRATIONS) == SCHEMA_VERSION

_CREATE_VERSION_TABLE = f"""
CREATE TABLE IF NOT EXISTS {VERSION_TABLE} (
    only_row   BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (only_row),
    version    INTEGER NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
)"""
# Serialises concurrent migrations (two deploys at once). An advisory lock is right here: it
# only orders migrations, nothing is fenced by it, and the transaction ends it.
_MIGRATION_LOCK = 0x77_73_66_6C_65_65_74  # "wsfleet"


async def migrate(conn: Conn) -> tuple[int, int]:
    """Bring the database to SCHEMA_VERSION; returns (version found, version now). Refuses
    (ConfigurationError) a database at a version newer than this wsfleet knows."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _MIGRATION_LOCK)
        await conn.execute(_CREATE_VERSION_TABLE)
        found = await conn.fetchval(f"SELECT version FROM {VERSION_TABLE}") or 0
        _refuse_unknown(found, await conn.fetchval("SELECT current_database()"))
        for version in range(found + 1, SCHEMA_VERSION + 1):
            await conn.execute(MIGRATIONS[version])
        await conn.execute(
            f"INSERT INTO {VERSION_TABLE} (version) VALUES ($1) "
            "ON CONFLICT (only_row) DO UPDATE SET version = excluded.version, applied_at = now()",
            SCHEMA_VERSION,
        )
    return found, SCHEMA_VERSION


async def check_schema(conn: Conn) -> None:
    """Raises ConfigurationError unless the database is at exactly SCHEMA_VERSION, naming the
    database, the version found and what to do."""
    database = await conn.fetchval("SELECT current_database()")
    exists = await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", VERSION_TABLE)
    found = await conn.fetchval(f"SELECT version FROM {VERSION_TABLE}") if exists else None
    if found is None:
        raise ConfigurationError(
            f"PostgreSQL database {database!r} has no wsfleet schema: run `wsfleet migrate`"
        )
    _refuse_unknown(found, database)
    if found < SCHEMA_VERSION:
        raise ConfigurationError(
            f"PostgreSQL database {database!r} is at wsfleet schema version {found}, this "
            f"wsfleet needs {SCHEMA_VERSION}: run `wsfleet migrate`"
        )


def _refuse_unknown(found: int, where: str) -> None:
    if found > SCHEMA_VERSION:
        raise ConfigurationError(
            f"PostgreSQL database {where!r} is at wsfleet schema version {found}, which this "
            f"wsfleet does not know (it knows up to {SCHEMA_VERSION}): run a wsfleet that does"
        )
