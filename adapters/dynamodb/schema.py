"""The DynamoDB schema, defined once: the adapters use it, the table fixtures create it from it,
and infra/ Terraform is checked against it by tests/infra.

Connections table: one item per connection, written only when its state changes (never on a
  heartbeat). pk = "CONN#<connection_id>"; desired_state, ws_url, last_seq, updated_at_ms;
  lease_owner = the owner's worker session id ("" when none), lease_token (the
  fencing token), version, failures, not_before_ms, stop_reason, write_id; and three attributes
  that exist only to key sparse indexes:
  - owned_by = lease_owner, present only while owned: `connections-by-owner` (KEYS_ONLY), how
    the connections of a dead session are found;
  - stop_owner = lease_owner, present only while STOPPED and still owned: `stops-by-owner`
    (KEYS_ONLY), so a worker learns of its STOPs with one Query whatever it holds;
  - orphan_shard = "STARTED#<nn>", present only while STARTED and unowned, with sort key
    not_before_ms (the back-off): `orphans-by-shard` (ALL), never-owned and released ones.
    Sharded so that no partition takes every STARTED connection's index writes.
Sessions table: one item per worker session, pk = session id; version, expires_at_ms, held,
  capacity, ended_reason (present once ended), opened_at_ms, updated_at_ms, write_id. The only
  item a heartbeat writes.
Events table: the ownership log, pk = "CONN#<id>", sk = version (number); a session's opened and
  ended events under pk = "SESSION#<id>".
Messages table: pk = "CONN#<id>", sk = seq * SEQ_SCALE + token (number): one item per
  (connection, seq, fencing token), so each owner writes only keys of its own and no write of a
  stale owner can land on a newer owner's item (docs/decisions.md, "The DynamoDB sink"). A reader
  takes, per seq, the item with the highest token (`message_key` / `seq_and_token`).
"""

import zlib

import attrs

CONNECTION_KEY_PREFIX = "CONN#"
PK = "pk"
SK = "sk"

# Connections table attributes.
DESIRED_STATE = "desired_state"
WS_URL = "ws_url"
LAST_SEQ = "last_seq"
LEASE_OWNER = "lease_owner"
LEASE_TOKEN = "lease_token"
UPDATED_AT_MS = "updated_at_ms"
VERSION = "version"
FAILURES = "failures"
NOT_BEFORE_MS = "not_before_ms"
STOP_REASON = "stop_reason"
# A random id per ownership-changing write: proves "the write that beat me was my own" after
# a lost response, even for START/STOP, whose resulting states carry nothing of the caller.
WRITE_ID = "write_id"
ORPHAN_SHARD = "orphan_shard"
OWNED_BY = "owned_by"
STOP_OWNER = "stop_owner"

ORPHAN_INDEX = "orphans-by-shard"
OWNER_INDEX = "connections-by-owner"
STOP_INDEX = "stops-by-owner"
DEFAULT_ORPHAN_SHARDS = 16

# Sessions table attributes (VERSION, UPDATED_AT_MS and WRITE_ID as above).
EXPIRES_AT_MS = "expires_at_ms"
HELD = "held"
CAPACITY = "capacity"
RATE_MILLI = "rate_milli"  # absent on an item written before it: 0
ENDED_REASON = "ended_reason"
OPENED_AT_MS = "opened_at_ms"

# Default table names (each is configurable; see the settings table in the README).
DEFAULT_CONNECTIONS_TABLE = "wsfleet-connections"
DEFAULT_EVENTS_TABLE = "wsfleet-connection-events"
DEFAULT_MESSAGES_TABLE = "wsfleet-messages"
DEFAULT_SESSIONS_TABLE = "wsfleet-sessions"


@attrs.frozen
class TableNames:
    """The four table names of one deployment (each configurable)."""

    connections: str = DEFAULT_CONNECTIONS_TABLE
    events: str = DEFAULT_EVENTS_TABLE
    messages: str = DEFAULT_MESSAGES_TABLE
    sessions: str = DEFAULT_SESSIONS_TABLE


# Events and messages tables.
EVENT_TYPE = "event_type"
EVENT_BODY = "event"
MESSAGE_DATA = "message_data"
TIMESTAMP_MS = "timestamp_ms"
WORKER_ID = "worker_id"
FENCING_TOKEN = "lease_token"
# A message's prev link (StoredMessage.prev_seq), read by the sink's resume point. Not a key:
# no table or index declares it, and items written before it existed need no migration
# (nothing was deployed before it).
MESSAGE_PREV = "prev"
# The messages table's sort key packs (seq, token) into one number: seq * SEQ_SCALE + token.
# Tokens are below 2^63 < SEQ_SCALE, and the largest key, (2^63 - 1) * 10^19 + 10^19 - 1, has
# 38 digits: the most a DynamoDB number holds exactly. Decimal, so that the key reads as the
# seq followed by the token zero-padded to 19 digits in the console and in any SDK.
SEQ_SCALE = 10**19


def message_key(seq: int, token: int) -> int:
    return seq * SEQ_SCALE + token


def seq_and_token(sort_key: int) -> tuple[int, int]:
    return divmod(sort_key, SEQ_SCALE)


# Epoch seconds, the messages table's TTL attribute. Connection items never expire: deleting a
# stopped one would restart its fencing token at 0 on the next START, and tokens must never repeat.
EXPIRES_AT = "expires_at"


SESSION_EVENT_KEY_PREFIX = "SESSION#"


def session_events_key(session_id: str) -> str:
    """The events table's partition of one session's log (connection keys start with CONN#)."""
    return f"{SESSION_EVENT_KEY_PREFIX}{session_id}"


def connection_key(connection_id: str) -> str:
    return f"{CONNECTION_KEY_PREFIX}{connection_id}"


def connection_id_of(key: str) -> str:
    return key.removeprefix(CONNECTION_KEY_PREFIX)


def orphan_shard(connection_id: str, shards: int) -> str:
    """A stable shard (crc32, not Python's salted hash) so every process agrees."""
    return f"STARTED#{zlib.crc32(connection_id.encode()) % shards:02d}"


def all_orphan_shards(shards: int) -> list[str]:
    return [f"STARTED#{i:02d}" for i in range(shards)]
