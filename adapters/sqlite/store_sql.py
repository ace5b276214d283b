"""The SQL of the SQLite store, written once. Which index serves which statement is in
schema.py; tests/integration/test_sqlite_adapters.py checks each plan."""

from collections.abc import Sequence

from adapters.sqlite.rows import CONNECTION_COLUMNS, SESSION_COLUMNS
from adapters.sqlite.schema import CONNECTIONS, EVENTS, SESSION_EVENTS, SESSIONS


def _insert(table: str, columns: Sequence[str]) -> str:
    return (
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join(':' + c for c in columns)})"
    )


def _update(table: str, columns: Sequence[str]) -> str:
    # The version condition always holds under the write lock; it is checked anyway so that a
    # broken locking assumption fails loudly instead of silently granting a lease twice.
    key, *rest = columns
    return (
        f"UPDATE {table} SET {', '.join(f'{c} = :{c}' for c in rest)} "
        f"WHERE {key} = :{key} AND version = :expected_version"
    )


SELECT = f"SELECT * FROM {CONNECTIONS} WHERE connection_id = ?"
INSERT = _insert(CONNECTIONS, CONNECTION_COLUMNS)
UPDATE = _update(CONNECTIONS, CONNECTION_COLUMNS)
APPEND = _insert(EVENTS, ("connection_id", "version", "event_type", "at_ms", "body"))
SELECT_SESSION = f"SELECT * FROM {SESSIONS} WHERE session_id = ?"
INSERT_SESSION = _insert(SESSIONS, SESSION_COLUMNS)
UPDATE_SESSION = _update(SESSIONS, SESSION_COLUMNS)
APPEND_SESSION = _insert(SESSION_EVENTS, ("session_id", "version", "event_type", "at_ms", "body"))

# Unowned orphans: keyset pagination on the partial index connections_unowned.
UNOWNED_PAGE = (
    f"SELECT * FROM {CONNECTIONS} WHERE desired_state = 'STARTED' AND owner = '' "
    "AND not_before_ms < ? AND (not_before_ms, connection_id) > (?, ?) "
    "ORDER BY not_before_ms, connection_id LIMIT ?"
)
# Every distinct owner, by a loose index scan of connections_by_owner (one seek per owner, not
# one row per connection), then the dead ones: no session row (never written, or cleaned up),
# ended, or expired at `now` — the same rule as WorkerSession.is_live, in SQL.
DEAD_OWNERS = f"""
WITH RECURSIVE owners(owner) AS (
    SELECT MIN(owner) FROM {CONNECTIONS} WHERE owner != ''
    UNION ALL
    SELECT (SELECT MIN(owner) FROM {CONNECTIONS} WHERE owner != '' AND owner > owners.owner)
    FROM owners WHERE owners.owner IS NOT NULL
)
SELECT owners.owner FROM owners LEFT JOIN {SESSIONS} AS s ON s.session_id = owners.owner
WHERE owners.owner IS NOT NULL
  AND (s.session_id IS NULL OR s.ended_reason IS NOT NULL OR s.expires_at_ms < :now)
"""
# A dead owner's orphans: keyset pagination on connections_by_owner.
OWNED_PAGE = (
    f"SELECT * FROM {CONNECTIONS} WHERE owner != '' AND owner = ? AND connection_id > ? "
    "AND desired_state = 'STARTED' AND not_before_ms < ? ORDER BY connection_id LIMIT ?"
)
NEXT_BACKOFF_END = (
    f"SELECT MIN(not_before_ms) FROM {CONNECTIONS} "
    "WHERE desired_state = 'STARTED' AND owner = '' AND not_before_ms >= ?"
)
OPENED = f"SELECT body FROM {SESSION_EVENTS} WHERE session_id = ? AND version = 1"
STOPS = (
    f"SELECT connection_id FROM {CONNECTIONS} "
    "WHERE desired_state = 'STOPPED' AND owner != '' AND owner = ? ORDER BY connection_id"
)
OWNED = (
    f"SELECT connection_id FROM {CONNECTIONS} WHERE owner != '' AND owner = ? "
    "ORDER BY connection_id"
)
OWNS_ANY = f"SELECT 1 FROM {CONNECTIONS} WHERE owner != '' AND owner = ? LIMIT 1"
