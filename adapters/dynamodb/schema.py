"""The DynamoDB schema, defined once: the adapters use it, the table fixtures create it from it,
and infra/ Terraform is checked against it by tests/infra.

Connections table (compatible with the article's): one item per connection.
  pk = "CONN#<connection_id>"; desired_state, ws_url, last_seq, lease_owner,
  lease_expires_at_ms, updated_at_ms as in the article, plus lease_token (fencing token),
  version, failures, not_before_ms, stop_reason, available_at_ms and orphan_shard.
Orphan index (GSI): partition key orphan_shard = "STARTED#<nn>" (present only while STARTED,
  so the index is sparse), sort key available_at_ms = max(lease expiry, back-off). The
  article's index keyed every STARTED connection on one partition ("STARTED"), which caps
  heartbeat-driven index writes at one partition's ~1,000 writes/s; sharding spreads them.
Events table: the ownership log, pk = "CONN#<id>", sk = version (number).
Messages table: pk = "CONN#<id>", sk = seq (number), idempotent per (connection, seq).
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
LEASE_EXPIRES_AT_MS = "lease_expires_at_ms"
UPDATED_AT_MS = "updated_at_ms"
VERSION = "version"
FAILURES = "failures"
NOT_BEFORE_MS = "not_before_ms"
STOP_REASON = "stop_reason"
AVAILABLE_AT_MS = "available_at_ms"
# A random id per ownership-changing write: proves "the write that beat me was my own" after
# a lost response, even for START/STOP, whose resulting states carry nothing of the caller.
WRITE_ID = "write_id"
ORPHAN_SHARD = "orphan_shard"

ORPHAN_INDEX = "orphans-by-shard"
DEFAULT_ORPHAN_SHARDS = 16

# Default table names (each is configurable; see the settings table in the README).
DEFAULT_CONNECTIONS_TABLE = "wsfleet-connections"
DEFAULT_EVENTS_TABLE = "wsfleet-connection-events"
DEFAULT_MESSAGES_TABLE = "wsfleet-messages"


@attrs.frozen
class TableNames:
    """The three table names of one deployment (each configurable)."""

    connections: str = DEFAULT_CONNECTIONS_TABLE
    events: str = DEFAULT_EVENTS_TABLE
    messages: str = DEFAULT_MESSAGES_TABLE


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
# Epoch seconds, the messages table's TTL attribute. Connection items never expire: deleting a
# stopped one would restart its fencing token at 0 on the next START, and tokens must never repeat.
EXPIRES_AT = "expires_at"


def connection_key(connection_id: str) -> str:
    return f"{CONNECTION_KEY_PREFIX}{connection_id}"


def connection_id_of(key: str) -> str:
    return key.removeprefix(CONNECTION_KEY_PREFIX)


def orphan_shard(connection_id: str, shards: int) -> str:
    """A stable shard (crc32, not Python's salted hash) so every process agrees."""
    return f"STARTED#{zlib.crc32(connection_id.encode()) % shards:02d}"


def all_orphan_shards(shards: int) -> list[str]:
    return [f"STARTED#{i:02d}" for i in range(shards)]
