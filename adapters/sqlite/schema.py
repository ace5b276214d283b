"""The SQLite schema, defined once. Every statement is idempotent (IF NOT EXISTS), so any
number of processes may open a database file at once and each ensures the tables it needs.

connections: one row per connection, the current state (the fold of its events). A lease has
  no expiry of its own: it is held while its owner's session is live, so nothing
  here moves on a heartbeat. Three indexes, each for one question:
  - connections_unowned: STARTED with no owner, by (not_before_ms, connection_id) — the orphans
    whose back-off is over are one range scan, and the earliest back-off end one seek;
    connection_id is the tiebreak that makes keyset pagination exact;
  - connections_by_owner: owned ones by (owner, connection_id) — a dead session's
    connections, whether a session still owns anything (forget), and the distinct owners
    (a loose index scan: one seek per owner);
  - connections_stops: STOPPED and still owned, by owner — what `stop_requested` reads, a few
    rows whatever the session holds.
sessions: one row per worker session, the current state; the heartbeat updates only this row.
connection_events: the ownership log (domain.OWNERSHIP_EVENTS), keyed (connection_id, version);
  checkpoints are not logged (as in DynamoDB).
session_events: SessionOpened, SessionEnded, SessionExpired (domain.SESSION_LOG_EVENTS), keyed
  (session_id, version); renewals are not logged. Kept after the session row is forgotten.
notifications: the hint queue. visible_at_ms is wall-clock epoch ms (comparable across
  processes); a received row carries the receipt of its latest delivery.
messages: the message sink, keyed (connection_id, seq) so a rewrite overwrites; `writes`
  counts how often a seq was written (above 1: re-received after a takeover, or a retried
  batch), which the demo reports.

A query that should use a partial index repeats the index's WHERE terms literally: SQLite
uses a partial index only when it can prove the query implies them.
"""

CONNECTIONS = "connections"
SESSIONS = "sessions"
EVENTS = "connection_events"
SESSION_EVENTS = "session_events"
NOTIFICATIONS = "notifications"
MESSAGES = "messages"

# WITHOUT ROWID: the text primary key is the table's own key, so a secondary index carries
# connection_id and a lookup by id is one B-tree search.
STORE_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {CONNECTIONS} (
    connection_id   TEXT PRIMARY KEY,
    version         INTEGER NOT NULL,
    desired_state   TEXT NOT NULL,
    ws_url          TEXT NOT NULL,
    owner           TEXT NOT NULL,
    token           INTEGER NOT NULL,
    checkpoint_seq  INTEGER NOT NULL,
    failures        INTEGER NOT NULL,
    not_before_ms   INTEGER NOT NULL,
    stop_reason     TEXT,
    updated_at_ms   INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS {CONNECTIONS}_unowned
    ON {CONNECTIONS} (not_before_ms, connection_id)
    WHERE desired_state = 'STARTED' AND owner = '';
CREATE INDEX IF NOT EXISTS {CONNECTIONS}_by_owner
    ON {CONNECTIONS} (owner, connection_id) WHERE owner != '';
CREATE INDEX IF NOT EXISTS {CONNECTIONS}_stops
    ON {CONNECTIONS} (owner, connection_id)
    WHERE desired_state = 'STOPPED' AND owner != '';
CREATE TABLE IF NOT EXISTS {SESSIONS} (
    session_id    TEXT PRIMARY KEY,
    version       INTEGER NOT NULL,
    expires_at_ms INTEGER NOT NULL,
    held          INTEGER NOT NULL,
    capacity      INTEGER NOT NULL,
    rate_milli    INTEGER NOT NULL DEFAULT 0,
    ended_reason  TEXT,
    opened_at_ms  INTEGER NOT NULL,
    updated_at_ms INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS {EVENTS} (
    connection_id TEXT NOT NULL,
    version       INTEGER NOT NULL,
    event_type    TEXT NOT NULL,
    at_ms         INTEGER NOT NULL,
    body          TEXT NOT NULL,
    PRIMARY KEY (connection_id, version)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS {SESSION_EVENTS} (
    session_id TEXT NOT NULL,
    version    INTEGER NOT NULL,
    event_type TEXT NOT NULL,
    at_ms      INTEGER NOT NULL,
    body       TEXT NOT NULL,
    PRIMARY KEY (session_id, version)
) WITHOUT ROWID;
"""

# AUTOINCREMENT: ids are never reused, so a receipt naming a deleted row's id cannot match a
# newer message.
QUEUE_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {NOTIFICATIONS} (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    body          TEXT NOT NULL,
    sent_at_ms    INTEGER NOT NULL,
    visible_at_ms INTEGER NOT NULL,
    receipt       TEXT,
    receive_count INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS {NOTIFICATIONS}_by_visibility ON {NOTIFICATIONS} (visible_at_ms);
"""

# prev_seq (the message sink port's prev link) sits before data: the resume-point query reads
# (seq, prev_seq) from each row's start and never the data's overflow pages. The column came
# with the resume point; nothing was deployed before it, so no migration adds it.
MESSAGES_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {MESSAGES} (
    connection_id  TEXT NOT NULL,
    seq            INTEGER NOT NULL,
    prev_seq       INTEGER NOT NULL,
    data           TEXT NOT NULL,
    received_at_ms INTEGER NOT NULL,
    worker_id      TEXT NOT NULL,
    token          INTEGER NOT NULL,
    writes         INTEGER NOT NULL DEFAULT 1,
    PRIMARY KEY (connection_id, seq)
) WITHOUT ROWID;
"""
