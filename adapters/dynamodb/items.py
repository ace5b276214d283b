"""The one mapping between DynamoDB items (the low-level client's {"S": ...}/{"N": "..."}
attribute values) and domain values, each way. Nothing else in the adapters builds items."""

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from adapters.dynamodb import schema
from application.ports.sink import StoredMessage
from domain import (
    NO_OWNER,
    Connection,
    DesiredState,
    Event,
    SessionEvent,
    StopReason,
    WorkerSession,
)
from domain.codec import (
    event_from_dict,
    event_to_dict,
    for_the_log,
    session_event_from_dict,
)

AttributeValue = dict[str, Any]
Item = dict[str, AttributeValue]
StoredItem = Mapping[str, Mapping[str, Any]]  # an item as a response returns it


def s(value: str) -> AttributeValue:
    return {"S": value}


def n(value: int) -> AttributeValue:
    return {"N": str(value)}


def key(connection_id: str) -> Item:
    return {schema.PK: s(schema.connection_key(connection_id))}


def session_key(session_id: str) -> Item:
    return {schema.PK: s(session_id)}


def connection_to_item(conn: Connection, shards: int) -> Item:
    """Every attribute of the state item. The three index keys exist only while their index
    should list the item (see schema.py): `owned_by` while owned, `stop_owner` while STOPPED and
    owned (`Connection.stop_pending`), `orphan_shard` while STARTED and unowned. `stop_reason`
    only when there is one."""
    item: Item = {
        schema.PK: s(schema.connection_key(conn.connection_id)),
        schema.VERSION: n(conn.version),
        schema.DESIRED_STATE: s(conn.desired_state.value),
        schema.WS_URL: s(conn.ws_url),
        schema.LEASE_OWNER: s(conn.owner),
        schema.LEASE_TOKEN: n(conn.token),
        schema.LAST_SEQ: n(conn.checkpoint_seq),
        schema.FAILURES: n(conn.failures),
        schema.NOT_BEFORE_MS: n(conn.not_before_ms),
        schema.UPDATED_AT_MS: n(conn.updated_at_ms),
    }
    if conn.stop_reason is not None:
        item[schema.STOP_REASON] = s(conn.stop_reason.value)
    if conn.owner != NO_OWNER:
        item[schema.OWNED_BY] = s(conn.owner)
    if conn.stop_pending:
        item[schema.STOP_OWNER] = s(conn.owner)
    if conn.desired_state is DesiredState.STARTED and conn.owner == NO_OWNER:
        item[schema.ORPHAN_SHARD] = s(schema.orphan_shard(conn.connection_id, shards))
    return item


# The attributes `connection_to_item` may leave out; an update REMOVEs them when absent.
OPTIONAL_STATE_ATTRIBUTES = (
    schema.STOP_REASON,
    schema.OWNED_BY,
    schema.STOP_OWNER,
    schema.ORPHAN_SHARD,
)


def connection_from_item(item: StoredItem) -> Connection:
    stop_reason = item.get(schema.STOP_REASON)
    return Connection(
        connection_id=schema.connection_id_of(item[schema.PK]["S"]),
        version=_int(item, schema.VERSION),
        desired_state=DesiredState(item[schema.DESIRED_STATE]["S"]),
        ws_url=item[schema.WS_URL]["S"],
        owner=item.get(schema.LEASE_OWNER, {}).get("S", NO_OWNER),
        token=_int(item, schema.LEASE_TOKEN),
        checkpoint_seq=_int(item, schema.LAST_SEQ),
        failures=_int(item, schema.FAILURES),
        not_before_ms=_int(item, schema.NOT_BEFORE_MS),
        stop_reason=StopReason(stop_reason["S"]) if stop_reason else None,
        updated_at_ms=_int(item, schema.UPDATED_AT_MS),
    )


def session_to_item(session: WorkerSession) -> Item:
    item: Item = {
        schema.PK: s(session.session_id),
        schema.VERSION: n(session.version),
        schema.EXPIRES_AT_MS: n(session.expires_at_ms),
        schema.HELD: n(session.held),
        schema.CAPACITY: n(session.capacity),
        schema.RATE_MILLI: n(session.rate_milli),
        schema.OPENED_AT_MS: n(session.opened_at_ms),
        schema.UPDATED_AT_MS: n(session.updated_at_ms),
    }
    if session.ended_reason is not None:
        item[schema.ENDED_REASON] = s(session.ended_reason)
    return item


def session_from_item(item: StoredItem) -> WorkerSession:
    ended = item.get(schema.ENDED_REASON)
    return WorkerSession(
        session_id=item[schema.PK]["S"],
        version=_int(item, schema.VERSION),
        expires_at_ms=_int(item, schema.EXPIRES_AT_MS),
        held=_int(item, schema.HELD),
        capacity=_int(item, schema.CAPACITY),
        rate_milli=_int(item, schema.RATE_MILLI),
        ended_reason=ended["S"] if ended else None,
        opened_at_ms=_int(item, schema.OPENED_AT_MS),
        updated_at_ms=_int(item, schema.UPDATED_AT_MS),
    )


def session_event_to_item(event: SessionEvent) -> Item:
    return _log_item(schema.session_events_key(event.session_id), event)


def session_event_from_item(item: StoredItem) -> SessionEvent:
    return session_event_from_dict(json.loads(item[schema.EVENT_BODY]["S"]))


def event_to_item(event: Event) -> Item:
    """One ownership-log entry, keyed by connection and version. The body is the domain codec's
    JSON, so the log decodes with the same code in every store."""
    return _log_item(schema.connection_key(event.connection_id), event)


def _log_item(key: str, event: Event | SessionEvent) -> Item:
    body = event_to_dict(for_the_log(event))
    return {
        schema.PK: s(key),
        schema.SK: n(event.version),
        schema.EVENT_TYPE: s(body["type"]),
        schema.EVENT_BODY: s(json.dumps(body, separators=(",", ":"), sort_keys=True)),
    }


def event_from_item(item: StoredItem) -> Event:
    return event_from_dict(json.loads(item[schema.EVENT_BODY]["S"]))


def message_to_item(message: StoredMessage, expires_at_s: int | None) -> Item:
    item: Item = {
        schema.PK: s(schema.connection_key(message.connection_id)),
        schema.SK: n(schema.message_key(message.seq, message.token)),
        schema.MESSAGE_DATA: s(message.data),
        schema.TIMESTAMP_MS: n(message.received_at_ms),
        schema.WORKER_ID: s(message.worker_id),
        schema.FENCING_TOKEN: n(message.token),
        schema.MESSAGE_PREV: n(message.prev_seq),
    }
    if expires_at_s is not None:
        item[schema.EXPIRES_AT] = n(expires_at_s)
    return item


def message_from_item(item: StoredItem) -> StoredMessage:
    return StoredMessage(
        connection_id=schema.connection_id_of(item[schema.PK]["S"]),
        seq=schema.seq_and_token(_int(item, schema.SK))[0],
        data=item[schema.MESSAGE_DATA]["S"],
        received_at_ms=_int(item, schema.TIMESTAMP_MS),
        worker_id=item[schema.WORKER_ID]["S"],
        token=schema.seq_and_token(_int(item, schema.SK))[1],
        prev_seq=_int(item, schema.MESSAGE_PREV),
    )


def _int(item: StoredItem, name: str) -> int:
    value = item.get(name)
    return int(value["N"]) if value else 0


def latest_versions(items: Iterable[StoredItem]) -> Iterator[StoredItem]:
    """The one read rule of the messages table: of a seq's items (one per token that wrote
    it, adjacent and in token order in a Query ascending by sort key), the highest token's.
    Lazy, so a caller paging a Query feeds it page by page."""
    pending: StoredItem | None = None
    pending_seq = -1
    for item in items:
        seq = schema.seq_and_token(int(item[schema.SK]["N"]))[0]
        if pending is not None and seq != pending_seq:
            yield pending
        pending, pending_seq = item, seq
    if pending is not None:
        yield pending
