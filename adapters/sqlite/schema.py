"""The SQLite schema, defined once. Every statement is idempotent (IF NOT EXISTS), so any
number of processes may open a database file at once and each ensures the tables it needs.

connections: one row per connection, the current state (the fold of its events).
  available_at_ms = max(lease expiry, back-off) is stored so the orphan query is one range
  scan of the index (desired_state, available_at_ms, connection_id); connection_id is the
  tiebreak that makes keyset pagination exact.
connection_events: the ownership log (domain.OWNERSHIP_EVENTS), one row per event, keyed by
  (connection_id, version); renewals and checkpoints are not logged (as in DynamoDB).
notifications: the hint queue. visible_at_ms is wall-clock epoch ms (comparable across
  processes); a received row carries the receipt of its latest delivery.
messages: the message sink, keyed (connection_id, seq) so a rewrite overwrites; `writes`
  counts how often a seq was written (above 1: re-received after a takeover, or a retried
  batch), which the demo reports.
"""

CONNECTIONS = "connections"
EVENTS = "connection_events"
NOTIFICATIONS = "notifications"
MESSAGES = "messages"

# WITHOUT ROWID: the text primary key is the table's own key, so the secondary index carries
# connection_id and a lookup by id is one B-tree search.
STORE_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {CONNECTIONS} (
    connection_id   TEXT PRIMARY KEY,
    version         INTEGER NOT NULL,
    desired_state   TEXT NOT NULL,
    ws_url          TEXT NOT NULL,
    owner           TEXT NOT NULL,
    token           INTEGER NOT NULL,
    expires_at_ms   INTEGER NOT NULL,
    checkpoint_seq  INTEGER NOT NULL,
    failures        INTEGER NOT NULL,
    not_before_ms   INTEGER NOT NULL,
    stop_reason     TEXT,
    updated_at_ms   INTEGER NOT NULL,
    available_at_ms INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS {CONNECTIONS}_by_availability
    ON {CONNECTIONS} (desired_state, available_at_ms, connection_id);
CREATE TABLE IF NOT EXISTS {EVENTS} (
    connection_id TEXT NOT NULL,
    version       INTEGER NOT NULL,
    event_type    TEXT NOT NULL,
    at_ms         INTEGER NOT NULL,
    body          TEXT NOT NULL,
    PRIMARY KEY (connection_id, version)
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
