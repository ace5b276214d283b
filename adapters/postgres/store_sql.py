"""The SQL of the PostgreSQL store, written once. Which index serves which statement is in
schema.py (the queries repeat the partial indexes' predicates, as the planner needs)."""

from collections.abc import Sequence

from adapters.postgres.rows import CONNECTION_COLUMNS, LOG_COLUMNS, SESSION_COLUMNS
from adapters.postgres.schema import CONNECTIONS, EVENTS, SESSION_EVENTS, SESSIONS


def _insert(table: str, columns: Sequence[str]) -> str:
    places = ", ".join(f"${i}" for i in range(1, len(columns) + 1))
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({places})"


def _update(table: str, columns: Sequence[str]) -> str:
    # The version condition always holds under the row lock; it is checked anyway so that a
    # broken locking assumption fails loudly instead of silently granting a lease twice.
    key, *rest = columns
    sets = ", ".join(f"{c} = ${i}" for i, c in enumerate(rest, start=2))
    return f"UPDATE {table} SET {sets} WHERE {key} = $1 AND version = ${len(columns) + 1}"


SELECT = f"SELECT * FROM {CONNECTIONS} WHERE connection_id = $1"
# The row lock every connection command takes first: commands on one connection queue here.
SELECT_FOR_UPDATE = SELECT + " FOR UPDATE"
INSERT = _insert(CONNECTIONS, CONNECTION_COLUMNS)
UPDATE = _update(CONNECTIONS, CONNECTION_COLUMNS)
APPEND = _insert(EVENTS, ("connection_id", *LOG_COLUMNS))
SELECT_SESSION = f"SELECT * FROM {SESSIONS} WHERE session_id = $1"
SELECT_SESSION_FOR_UPDATE = SELECT_SESSION + " FOR UPDATE"
# An Acquire's sessions (the acquirer's and the owner's), locked shared in id order: neither
# can be renewed, ended or forgotten until the acquire commits, so the takeover judged on a
# dead owner and a live acquirer cannot race them; acquires of other connections share them.
SESSIONS_FOR_SHARE = (
    f"SELECT * FROM {SESSIONS} WHERE session_id = ANY($1::text[]) ORDER BY session_id FOR SHARE"
)
INSERT_SESSION = _insert(SESSIONS, SESSION_COLUMNS)
UPDATE_SESSION = _update(SESSIONS, SESSION_COLUMNS)
APPEND_SESSION = _insert(SESSION_EVENTS, ("session_id", *LOG_COLUMNS))
OPENED = f"SELECT body FROM {SESSION_EVENTS} WHERE session_id = $1 AND version = 1"

# Unowned orphans: keyset pagination on the partial index connections_unowned.
UNOWNED_PAGE = (
    f"SELECT * FROM {CONNECTIONS} WHERE desired_state = 'STARTED' AND owner = '' "
    "AND not_before_ms < $1 AND (not_before_ms, connection_id) > ($2, $3) "
    "ORDER BY not_before_ms, connection_id LIMIT $4"
)
# Every distinct owner by a loose index scan of connections_by_owner (one seek per owner, not
# one row per connection), then the dead ones: no session row, ended, or expired at `now` (the
# rule of WorkerSession.is_live, in SQL).
DEAD_OWNERS = f"""
WITH RECURSIVE owners(owner) AS (
    SELECT MIN(owner) FROM {CONNECTIONS} WHERE owner <> ''
    UNION ALL
    SELECT (SELECT MIN(owner) FROM {CONNECTIONS} WHERE owner <> '' AND owner > owners.owner)
    FROM owners WHERE owners.owner IS NOT NULL
)
SELECT owners.owner FROM owners LEFT JOIN {SESSIONS} AS s ON s.session_id = owners.owner
WHERE owners.owner IS NOT NULL
  AND (s.session_id IS NULL OR s.ended_reason IS NOT NULL OR s.expires_at_ms < $1)
"""
OWNED_PAGE = (
    f"SELECT * FROM {CONNECTIONS} WHERE owner <> '' AND owner = $1 AND connection_id > $2 "
    "AND desired_state = 'STARTED' AND not_before_ms < $3 ORDER BY connection_id LIMIT $4"
)
NEXT_BACKOFF_END = (
    f"SELECT MIN(not_before_ms) FROM {CONNECTIONS} "
    "WHERE desired_state = 'STARTED' AND owner = '' AND not_before_ms >= $1"
)
STOPS = (
    f"SELECT connection_id FROM {CONNECTIONS} "
    "WHERE desired_state = 'STOPPED' AND owner <> '' AND owner = $1 ORDER BY connection_id"
)
OWNED = (
    f"SELECT connection_id FROM {CONNECTIONS} WHERE owner <> '' AND owner = $1 "
    "ORDER BY connection_id"
)
OWNS_ANY = f"SELECT 1 FROM {CONNECTIONS} WHERE owner <> '' AND owner = $1 LIMIT 1"
DELETE_SESSION = f"DELETE FROM {SESSIONS} WHERE session_id = $1"
LIST_SESSIONS = f"SELECT * FROM {SESSIONS} ORDER BY session_id"
HISTORY = f"SELECT body FROM {EVENTS} WHERE connection_id = $1 ORDER BY version"
SESSION_HISTORY = f"SELECT body FROM {SESSION_EVENTS} WHERE session_id = $1 ORDER BY version"
LIST_CONNECTIONS = f"SELECT * FROM {CONNECTIONS} ORDER BY connection_id LIMIT $1"
