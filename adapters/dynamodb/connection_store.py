"""DynamoDbConnectionStore: the lease store port on DynamoDB, over an injected aioboto3
low-level client (opened and closed by the composition root, one per process).

Ownership is `(owner session, token)` on the connection item, held while the owner's session
item is live (docs/decisions.md, "Session leases"). The heartbeat writes the session item only;
a connection item is written when its ownership or desired state changes, and when a
checkpoint is recorded.

What each operation costs, in on-demand units. Items are small (a connection item ~250 bytes
unless its URL is long, a session item ~150, an event ~300), so one write = 1 WRU, one strongly
consistent read = 1 RRU, one eventually consistent read (every index) = 0.5 RRU, and a
transaction counts every item twice, its ConditionChecks included (AWS bills them as
transactional writes: assumed here, as in bench/units.py). An index write is 1 WRU, 2 when the
write moves the item's key in that index.

| operation                      | requests                                   | RRU | WRU (+idx) |
|--------------------------------|--------------------------------------------|-----|------------|
| renew_session (the heartbeat)  | 1 UpdateItem, no read                      | 0   | 1          |
| checkpoint                     | 1 UpdateItem, no read                      | 0   | 1          |
| stop_requested                 | 1 Query on stops-by-owner                  | 0.5 | 0          |
| owned_by (a death's hints)     | Query on connections-by-owner, all pages   | 0.5 | 0          |
| iter_orphans                   | sessions Scan + 16 orphan-index Queries    | 9   | 0          |
|   per dead session, also       | by-owner Query + BatchGetItem per 100      | 0.5 | 0          |
|                                |   (+ 1 RRU per connection read)            |     |            |
| next_available_at              | 16 orphan-index Queries (Limit 1)          | 8   | 0          |
| open_session                   | TransactWriteItems (item, event)           | 0   | 4          |
| end_session                    | GetItem + TransactWriteItems (item, event) | 1   | 4          |
| note_expiry (once per death)   | GetItem + TransactWriteItems (item, event) | 1   | 4          |
|   already noted                | GetItem                                    | 1   | 0          |
| start (new) / stop / restart   | GetItem + TransactWriteItems (item, event) | 1   | 4 + 1      |
| start (repeated)               | GetItem                                    | 1   | 0          |
| try_acquire (orphan)           | 2 GetItem + TransactWriteItems (update,    | 2   | 6 + 2      |
|                                |   acquirer's session check, event)         |     |            |
| try_acquire (takeover)         | 3 GetItem + TransactWriteItems (+ the dead | 3   | 8 + 2      |
|                                |   owner's session check)                   |     |            |
| try_acquire refused            | 2-3 GetItem                                | 2-3 | 0          |
| release (+ final checkpoint)   | GetItem + TransactWriteItems (update, ev.) | 1   | 4 + 2      |
| end_stream                     | GetItem + TransactWriteItems (update, 2)   | 1   | 6 + 1      |
| forget_session                 | by-owner Query (Limit 1) + DeleteItem      | 0.5 | 1          |
| get / get_session              | GetItem, consistent                        | 1   | 0          |

(Measured by bench/store_cost.py with bench/units.py's rules; 16 orphan shards.)

Per worker-hour at the defaults (lease 4 s, heartbeat 1 s, STOP check 2 s): 3,600 WRU for the
heartbeat (3,600 / interval in seconds, whatever the worker holds) + 900 RRU of STOP checks + 19
RRU per reconciliation pass (sessions Scans and orphan-shard Queries; the worker's loop runs one
about every lease: 17,100 RRU), measured the same with 10, 100 and 10,000 connections held.
Per connection-hour in steady state: no write with a sink that knows its resume point; with
checkpoint writes, 1 WRU per checkpoint. Ownership changes cost as above, once each.
docs/deploy.md has the tables.

Consistency: the GSIs are eventually consistent (they lag by up to about a second on the
service; DynamoDB Local and moto update them synchronously). An orphan may be listed after
someone took it, or a little late, and a STOP may be seen a little late; correctness never rests
on an index: every acquire re-reads the items and its transaction re-checks everything.
`forget_session` does rest on the by-owner index being caught up: a session must have been
dead for longer than the index lag before it is forgotten (a dead session never acquires, so
the index can only be behind on what it acquired before it died).

Time comes from the caller (`now_ms`): session expiries compare the callers' clocks.
Concurrency: iter_orphans and next_available_at send one request per shard at once; the
client's `max_pool_connections` (botocore's default is 10) must leave room for that beside the
heartbeat, or calls queue behind each other.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
from botocore.exceptions import ClientError

from adapters import backoff
from adapters.dynamodb import conditions, schema
from adapters.dynamodb.connection_queries import ConnectionQueries
from adapters.dynamodb.errors import (
    CONDITION_FAILED,
    REASON_CONDITION_FAILED,
    REASON_CONFLICT,
    REASON_NONE,
    REASON_THROTTLED,
    TRANSACTION_CANCELED,
    TRANSACTION_CONFLICT,
    cancellation_reasons,
    error_code,
    failed_item,
    unavailable_as,
)
from adapters.dynamodb.expressions import (
    Expression,
    checkpoint_update,
    name,
    request_args,
    session_renew_update,
    session_state,
    set_state,
)
from adapters.dynamodb.items import (
    connection_from_item,
    event_to_item,
    key,
    session_event_to_item,
    session_from_item,
    session_key,
    session_to_item,
)
from adapters.dynamodb.schema import TableNames
from application.errors import ConfigurationError, StoreUnavailable
from application.ports.store import CommandResult, SessionResult
from application.ports.store_step import (
    Change,
    SessionChange,
    SteppedStore,
    StoreStep,
    run_session_command,
)
from domain import (
    NO_OWNER,
    Acquire,
    Checkpoint,
    Command,
    Connection,
    DomainError,
    Event,
    InvalidCommand,
    InvalidTransition,
    OpenSession,
    RenewSession,
    SessionCommand,
    SessionEvent,
    WorkerSession,
    decide,
    decide_session,
    fold_session,
    validate_connection_id,
    validate_session_id,
)

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb.client import DynamoDBClient

log = logging.getLogger(__name__)
T = TypeVar("T")

# Attempts botocore makes of a session renewal: the heartbeat's client (`heartbeat_client`) is
# made with this many, the session keeper retrying instead (read by the composition root and
# by the simulation's model of DynamoDB).
HEARTBEAT_ATTEMPTS = 1


@attrs.frozen
class _Raced:
    """The transaction lost: `item` is the first item that refused it, if the response had it."""

    item: Mapping[str, Any] | None
    known: bool  # True: `item` is the refusing item as it is now (None: it does not exist)
    conflict: bool  # TransactionConflict: another transaction was in flight on an item
    write_id: str | None = None  # the refusing item's last write id


class DynamoDbConnectionStore(SteppedStore):
    """See the module docstring. `shards` must be equal in every process of a deployment."""

    def __init__(
        self,
        client: DynamoDBClient,
        *,
        tables: TableNames | None = None,
        shards: int = schema.DEFAULT_ORPHAN_SHARDS,
        max_attempts: int = 8,
        retry_base_s: float = 0.02,
        retry_cap_s: float = 1.0,
        heartbeat_client: DynamoDBClient | None = None,
    ) -> None:
        """`heartbeat_client`: the client the session renewals go through, if not `client`.
        The composition root gives it one made without botocore's retries: a throttled renewal
        then returns at once, and the session keeper tries again after a short back-off within
        the trust it has left, its next heartbeats hedging meanwhile. Through botocore's
        standard mode a renewal throttled twice waits up to 3 s of back-off inside the call
        (random up to 1 s, then 2 s), most of a 4-s lease's trust: in the simulation's
        brown-out at 1,000 workers a worker fenced itself with its last two renewals still in
        that back-off (docs/decisions.md)."""
        if not 1 <= shards <= 100:
            raise ConfigurationError(f"orphan index shards must be 1-100, got {shards}")
        if max_attempts < 1:
            raise ConfigurationError(f"max_attempts must be at least 1, got {max_attempts}")
        self._client = client
        self._heartbeat_client = heartbeat_client or client
        self._tables = tables or TableNames()
        self._shards = shards
        self._max_attempts = max_attempts
        self._retry_base_s = retry_base_s
        self._retry_cap_s = retry_cap_s
        self.operations: dict[str, int] = {}  # port operation -> count (as the memory store)
        self.requests: dict[str, int] = {}  # DynamoDB API call -> count (the bill's driver)
        self._queries = ConnectionQueries(
            client,
            self._tables,
            shards,
            max_attempts=max_attempts,
            retry_base_s=retry_base_s,
            retry_cap_s=retry_cap_s,
            on_request=self._request,
        )

    # --- commands: the port's template on a conditional write, retried on a lost race --------

    async def execute(self, command: Command, now_ms: int) -> CommandResult:
        self._count(type(command).__name__)
        validate_connection_id(command.connection_id)  # before it becomes a key
        match command:
            case Checkpoint():  # one conditional update, no read: the streaming hot path
                return await self._checkpoint(command, now_ms)
        return await super().execute(command, now_ms)

    async def execute_session(self, command: SessionCommand, now_ms: int) -> SessionResult:
        self._count(type(command).__name__)
        validate_session_id(command.session_id)
        match command:
            case OpenSession():  # a conditional Put, no read
                return await self._open_session(command, now_ms)
            case RenewSession():  # the heartbeat: one conditional update, no read
                return await self._renew_session(command, now_ms)
        return await super().execute_session(command, now_ms)

    async def _atomically(
        self,
        command: Command | SessionCommand,
        run: Callable[[StoreStep], Coroutine[Any, Any, T]],
        refused: _Raced | None = None,
    ) -> T:
        """Run the template until its write lands: a write that lost a race (`_Lost`) is
        decided again on what won (the refusing item when the refusal returned it, else read
        again), after a pause when it was a transaction conflict. One write id for all the
        attempts: an earlier attempt that landed with its answer lost is recognised as ours."""
        op = type(command).__name__
        subject = (
            command.session_id if isinstance(command, SessionCommand) else command.connection_id
        )
        write_id = uuid.uuid4().hex
        for attempt in range(self._max_attempts):
            try:
                return await run(_Step(self, op, write_id, refused))
            except _Lost as lost:
                refused = lost.raced
            log.debug(
                "%s of %r lost a race (attempt %d%s); deciding again",
                op,
                subject,
                attempt + 1,
                ", transaction conflict" if refused.conflict else "",
            )
            if refused.conflict:
                await backoff.pause(attempt, self._retry_base_s, self._retry_cap_s)
        raise StoreUnavailable(
            f"{op} of {subject!r} gave up after {self._max_attempts} attempts: "
            "the item kept changing under it"
        )

    async def _read_for(
        self, command: Command, op: str, known: Connection | _Unknown | None
    ) -> tuple[Connection | None, Mapping[str, WorkerSession]]:
        """The connection (unless `known` from a refusal) and, for Acquire, the acquirer's
        session read at the same time, then the owner's if another session owns it. Each read is
        consistent; they need not be one snapshot, because the transaction re-checks each."""
        if not isinstance(command, Acquire):
            if not isinstance(known, _Unknown):
                return known, {}
            return await self._queries.read(command.connection_id, op), {}
        validate_session_id(command.session_id)
        if isinstance(known, _Unknown):
            state, acquirer = await asyncio.gather(
                self._queries.read(command.connection_id, op),
                self._queries.read_session(command.session_id, op),
            )
        else:
            state, acquirer = known, await self._queries.read_session(command.session_id, op)
        sessions = {acquirer.session_id: acquirer} if acquirer else {}
        if state is not None and state.owner not in (NO_OWNER, command.session_id):
            owner = await self._queries.read_session(state.owner, op)
            if owner is not None:
                sessions[owner.session_id] = owner
        return state, sessions

    async def _commit(self, change: Change, op: str, write_id: str) -> _Raced | None:
        """One TransactWriteItems: the connection's update; for an acquire, the sessions'
        ConditionChecks; the ownership events' puts."""
        command, state, now_ms = change.command, change.before, change.now_ms
        update = {
            "TableName": self._tables.connections,
            "Key": key(command.connection_id),
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            **request_args(
                condition=conditions.connection_precondition(command, state, now_ms),
                update=set_state(change.after, self._shards, state, write_id),
            ),
        }
        transact_items: list[Any] = [{"Update": update}]
        if isinstance(command, Acquire):
            transact_items.append(self._session_check(command.session_id, live=True, now=now_ms))
            if state is not None and state.owner != NO_OWNER:
                transact_items.append(self._session_check(state.owner, live=False, now=now_ms))
        transact_items += [self._log_put(event_to_item(event)) for event in change.logged]
        return await self._transact(transact_items, op, command.connection_id)

    async def _write_session(self, change: SessionChange, op: str, write_id: str) -> _Raced | None:
        """The decided session item written on the version it was decided on: an UpdateItem,
        or a transaction with the log's Put when the events include a logged one."""
        assert change.before is not None  # only an open creates one (its own path)
        condition = conditions.version_is(change.before.version)
        update = session_state(change.after, write_id)
        if change.logged:
            return await self._transact(
                [
                    {"Update": self._session_update(change.after, condition, update)},
                    *(self._log_put(session_event_to_item(e)) for e in change.logged),
                ],
                op,
                change.command.session_id,
            )
        try:
            await self._update(
                self._tables.sessions, session_key(change.after.session_id), condition, update, op
            )
        except _ConditionFailed as refused:
            written_by = refused.item.get(schema.WRITE_ID, {}).get("S") if refused.item else None
            return _Raced(refused.item, True, False, written_by)
        except _Conflict:
            return _Raced(None, known=False, conflict=True)
        return None

    def _session_check(self, session_id: str, *, live: bool, now: int) -> dict[str, Any]:
        condition = conditions.session_live(now) if live else conditions.session_dead(now)
        return {
            "ConditionCheck": {
                "TableName": self._tables.sessions,
                "Key": session_key(session_id),
                **request_args(condition=condition),
            }
        }

    def _log_put(self, item: dict[str, Any]) -> dict[str, Any]:
        pk_name, pk_names = name(schema.PK)
        return {
            "Put": {
                "TableName": self._tables.events,
                "Item": item,
                # The log is append-only: a version is written once.
                "ConditionExpression": f"attribute_not_exists({pk_name})",
                "ExpressionAttributeNames": pk_names,
            }
        }

    async def _transact(self, transact_items: list[Any], op: str, subject: str) -> _Raced | None:
        self._request("TransactWriteItems")
        try:
            with unavailable_as(StoreUnavailable, op):
                await self._client.transact_write_items(TransactItems=transact_items)
        except ClientError as exc:
            if error_code(exc) == TRANSACTION_CONFLICT:
                return _Raced(None, known=False, conflict=True)
            if error_code(exc) != TRANSACTION_CANCELED:
                raise
            return self._raced(exc, transact_items, subject)
        return None

    def _raced(self, exc: ClientError, transact_items: list[Any], subject: str) -> _Raced:
        reasons = [reason.get("Code", REASON_NONE) for reason in cancellation_reasons(exc)]
        if any(code in REASON_THROTTLED for code in reasons):
            raise StoreUnavailable(f"DynamoDB write of {subject!r} throttled: {reasons}") from exc
        if reasons and reasons[0] == REASON_CONDITION_FAILED:
            item = cancellation_reasons(exc)[0].get("Item")
            written_by = item.get(schema.WRITE_ID, {}).get("S") if item else None
            return _Raced(item or None, True, False, written_by)
        if REASON_CONFLICT in reasons:
            return _Raced(None, known=False, conflict=True)
        checks = [i for i, entry in enumerate(transact_items) if "ConditionCheck" in entry]
        if any(reasons[i] == REASON_CONDITION_FAILED for i in checks if i < len(reasons)):
            # A session is not what we read (the acquirer's died, or the owner's was renewed
            # in time): read everything again and decide on that.
            return _Raced(None, known=False, conflict=False)
        if REASON_CONDITION_FAILED in reasons[1:]:
            # The state item passed its version check yet an event of that version is already
            # logged: the log is ahead of the state (edited by hand, or restored from a backup).
            raise InvalidTransition(
                f"the event log of {subject!r} already holds a version the state item has not "
                f"reached ({reasons}); repair the tables before retrying"
            ) from exc
        raise exc

    # --- checkpoint: one conditional UpdateItem, no read ---------------------------------------

    async def _checkpoint(self, command: Checkpoint, now_ms: int) -> CommandResult:
        """Owner, token and a forward checkpoint are the condition; when it refuses, the refusing
        item (ALL_OLD, free) is decided on, so a refusal is the domain's exactly: LeaseLost,
        CheckpointRegressed, ConnectionNotFound, or an equal checkpoint (no change)."""
        update = checkpoint_update(command.checkpoint_seq, now_ms)
        for attempt in range(self._max_attempts):
            try:
                item = await self._update(
                    self._tables.connections,
                    key(command.connection_id),
                    conditions.checkpoint_without_read(command),
                    update,
                    "Checkpoint",
                )
            except _ConditionFailed as refused:
                state = connection_from_item(refused.item) if refused.item else None
                if not decide(state, command, now_ms):  # raises the domain's refusal
                    assert state is not None
                    return CommandResult(state, False)
                continue  # the item moved between the check and its answer: write again
            except _Conflict:
                await backoff.pause(attempt, self._retry_base_s, self._retry_cap_s)
                continue
            return CommandResult(connection_from_item(item), True)
        raise StoreUnavailable(
            f"Checkpoint of {command.connection_id!r} gave up after {self._max_attempts} attempts"
        )

    async def _update(
        self,
        table: str,
        item_key: dict[str, Any],
        condition: Expression,
        update: Expression,
        op: str,
        client: DynamoDBClient | None = None,
    ) -> Mapping[str, Any]:
        """One conditional UpdateItem returning the new item; a refusal raises _ConditionFailed
        with the refusing item (ReturnValuesOnConditionCheckFailure, no extra read)."""
        self._request("UpdateItem")
        try:
            with unavailable_as(StoreUnavailable, op):
                response = await (client or self._client).update_item(
                    TableName=table,
                    Key=item_key,
                    ReturnValues="ALL_NEW",
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                    **request_args(condition=condition, update=update),
                )
        except ClientError as exc:
            if error_code(exc) == CONDITION_FAILED:
                raise _ConditionFailed(failed_item(exc)) from None
            if error_code(exc) == TRANSACTION_CONFLICT:
                raise _Conflict from None
            raise
        return response.get("Attributes", {})

    # --- session commands ----------------------------------------------------------------------

    async def _open_session(self, command: OpenSession, now_ms: int) -> SessionResult:
        """A conditional Put of the new item and a Put of SessionOpened, in one transaction, no
        read: an id used before fails the item's condition (it exists) or, once forgotten, the
        log's (its SessionOpened is kept), and is then refused as the domain refuses it."""
        events = decide_session(None, command, now_ms)
        session = fold_session(events)
        assert session is not None
        write_id = uuid.uuid4().hex
        put = {
            "TableName": self._tables.sessions,
            "Item": session_to_item(session) | {schema.WRITE_ID: {"S": write_id}},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            **request_args(condition=conditions.item_absent()),
        }
        logged = [self._log_put(session_event_to_item(event)) for event in events]
        for attempt in range(self._max_attempts):
            try:
                raced = await self._transact(
                    [{"Put": put}, *logged], "OpenSession", command.session_id
                )
            except InvalidTransition:
                # No item, yet its SessionOpened is logged: the id was used, and forgotten.
                raise InvalidCommand(
                    f"worker session id {command.session_id!r} was used before"
                ) from None
            if raced is None:
                return SessionResult(session, True)
            if raced.known and raced.write_id == write_id:
                return SessionResult(session, True)  # ours; only the response was lost
            if raced.conflict:
                await backoff.pause(attempt, self._retry_base_s, self._retry_cap_s)
                continue
            existing = session_from_item(raced.item) if raced.item else None
            decide_session(existing, command, now_ms)  # raises InvalidCommand if it exists
            raise AssertionError("OpenSession refused by a session the domain did not refuse")
        raise StoreUnavailable(f"OpenSession of {command.session_id!r}: conflicts persisted")

    async def _renew_session(self, command: RenewSession, now_ms: int) -> SessionResult:
        """The heartbeat: ONE conditional UpdateItem, no read. The condition is `session_live`
        and `expires_at_ms <= now + lease`, so the write's expiry is the domain's max(current,
        now + lease): a renew never shortens a session. A renew asking for less than remains
        (a lease shortened by configuration) fails that part only and is redone exactly from the
        refusing item, at one more write; so is anything else the condition refuses, which then
        raises the domain's refusal (SessionNotLive) at no further cost."""
        # The domain's argument checks (lease positive, load not negative), on a probe state
        # that is live at now_ms: liveness itself is the write's condition.
        probe = WorkerSession(command.session_id, version=0, expires_at_ms=now_ms)
        decide_session(probe, command, now_ms)
        write_id = uuid.uuid4().hex
        expires = now_ms + command.lease_ms
        condition = (
            conditions.session_live(now_ms)
            & conditions.expiry_at_most(expires)
            & conditions.not_written_by(write_id)
        )
        update = session_renew_update(
            expires, command.held, command.capacity, now_ms, write_id, command.rate_milli
        )
        for attempt in range(self._max_attempts):
            try:
                item = await self._update(
                    self._tables.sessions,
                    session_key(command.session_id),
                    condition,
                    update,
                    "RenewSession",
                    self._heartbeat_client,
                )
            except _ConditionFailed as refused:
                if refused.item and refused.item.get(schema.WRITE_ID, {}).get("S") == write_id:
                    return SessionResult(session_from_item(refused.item), True)  # ours, retried
                # Decided exactly on the refusing item: a refusal, or a write of the domain's.
                return await self._atomically(
                    command,
                    lambda step: run_session_command(step, command, now_ms),
                    _Raced(refused.item, known=True, conflict=False),
                )
            except _Conflict:
                await backoff.pause(attempt, self._retry_base_s, self._retry_cap_s)
                continue
            return SessionResult(session_from_item(item), True)
        raise StoreUnavailable(f"RenewSession of {command.session_id!r}: conflicts persisted")

    def _session_update(
        self, new: WorkerSession, condition: Expression, update: Expression
    ) -> dict[str, Any]:
        return {
            "TableName": self._tables.sessions,
            "Key": session_key(new.session_id),
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            **request_args(condition=condition, update=update),
        }

    async def forget_session(self, session_id: str, now_ms: int) -> bool:
        """One Query on connections-by-owner (Limit 1: is anything still owned?), then a
        DeleteItem conditioned on the session being dead. A dead session acquires nothing, so
        the set it owns only shrinks; the index must have caught up with its last acquisitions
        (see the module docstring)."""
        self._count("forget_session")
        try:
            validate_session_id(session_id)
        except DomainError:
            return False
        if await self._queries.owned_ids(session_id, "forget_session", limit=1):
            return False
        self._request("DeleteItem")
        try:
            with unavailable_as(StoreUnavailable, "forget_session"):
                await self._client.delete_item(
                    TableName=self._tables.sessions,
                    Key=session_key(session_id),
                    **request_args(
                        condition=conditions.item_exists() & conditions.session_dead(now_ms)
                    ),
                )
        except ClientError as exc:
            if error_code(exc) == CONDITION_FAILED:
                return False  # live, or already gone
            raise
        return True

    # --- reads ---------------------------------------------------------------------------------

    async def get(self, connection_id: str) -> Connection | None:
        self._count("get")
        try:
            validate_connection_id(connection_id)
        except DomainError:
            return None
        return await self._queries.read(connection_id, "get")

    async def get_session(self, session_id: str) -> WorkerSession | None:
        self._count("get_session")
        try:
            validate_session_id(session_id)
        except DomainError:
            return None
        return await self._queries.read_session(session_id, "get_session")

    async def list_sessions(self) -> Sequence[WorkerSession]:
        self._count("list_sessions")
        return await self._queries.list_sessions()

    def iter_orphans(self, now_ms: int, page_size: int) -> AsyncIterator[Sequence[Connection]]:
        self._count("iter_orphans")
        return self._queries.iter_orphans(now_ms, page_size)

    async def next_available_at(self, now_ms: int) -> int | None:
        self._count("next_available_at")
        return await self._queries.next_available_at(now_ms)

    async def stop_requested(self, session_id: str) -> Sequence[str]:
        """One Query on the sparse stops-by-owner index: it lists only STOPPED connections that
        are still owned, so the cost does not grow with what the session holds."""
        self._count("stop_requested")
        try:
            validate_session_id(session_id)
        except DomainError:
            return []
        ids = await self._queries.owned_ids(session_id, "stop_requested", index=schema.STOP_INDEX)
        return sorted(ids)

    async def owned_by(self, session_id: str) -> Sequence[str]:
        """Every page of the KEYS_ONLY connections-by-owner index for `session_id`."""
        self._count("owned_by")
        try:
            validate_session_id(session_id)
        except DomainError:
            return []
        return sorted(await self._queries.owned_ids(session_id, "owned_by"))

    async def history(self, connection_id: str) -> Sequence[Event]:
        self._count("history")
        return await self._queries.history(connection_id)

    async def session_history(self, session_id: str) -> Sequence[SessionEvent]:
        self._count("session_history")
        try:
            validate_session_id(session_id)
        except DomainError:
            return []
        return await self._queries.session_history(session_id)

    async def list_connections(self, limit: int = 1000) -> Sequence[Connection]:
        return await self._queries.list_connections(limit)

    # --- accounting ----------------------------------------------------------------------------

    def _count(self, op: str) -> None:
        self.operations[op] = self.operations.get(op, 0) + 1

    def _request(self, api: str) -> None:
        self.requests[api] = self.requests.get(api, 0) + 1


class _Unknown:
    """Marks a state that must be read again (a refusal that did not return it)."""


_UNKNOWN = _Unknown()


class _Lost(Exception):
    """A step's write lost a race (not to an earlier attempt of its own): decide again."""

    def __init__(self, raced: _Raced) -> None:
        super().__init__("lost a race")
        self.raced = raced


class _Step(StoreStep):
    """The DynamoDB primitives: consistent GetItems (or the item a refusal returned), and one
    conditional write of the decided item. A lost answer to a write that landed (the refusing
    item carries this step's write id) counts as written; any other refusal raises _Lost."""

    def __init__(
        self, store: DynamoDbConnectionStore, op: str, write_id: str, refused: _Raced | None
    ) -> None:
        self._store = store
        self._op = op
        self._write_id = write_id
        self._refused = refused

    def _known(self, parse: Callable[[Mapping[str, Any]], T]) -> T | _Unknown | None:
        if self._refused is None or not self._refused.known:
            return _UNKNOWN
        return parse(self._refused.item) if self._refused.item else None

    def _check(self, raced: _Raced | None) -> None:
        if raced is not None and not (raced.known and raced.write_id == self._write_id):
            raise _Lost(raced)
        # else written; or an earlier attempt of ours was, and only its response was lost (an
        # SDK retry after a timeout). Comparing states would not do: racing identical STOPs
        # produce identical states.

    async def load(self, command: Command) -> tuple[Connection | None, Mapping[str, WorkerSession]]:
        return await self._store._read_for(command, self._op, self._known(connection_from_item))

    async def save(self, change: Change) -> None:
        self._check(await self._store._commit(change, self._op, self._write_id))

    async def load_session(self, command: SessionCommand) -> WorkerSession | None:
        known = self._known(session_from_item)
        if isinstance(known, _Unknown):
            return await self._store._queries.read_session(command.session_id, self._op)
        return known

    async def opened(self, session_id: str) -> Sequence[SessionEvent]:
        raise AssertionError("an OpenSession takes its own conditional Put, never this step")

    async def save_session(self, change: SessionChange) -> None:
        self._check(await self._store._write_session(change, self._op, self._write_id))


class _ConditionFailed(Exception):
    """An UpdateItem's condition refused it; `item` is the refusing item (ALL_OLD), or None."""

    def __init__(self, item: Mapping[str, Any] | None) -> None:
        super().__init__("conditional check failed")
        self.item = item


class _Conflict(Exception):
    """A transaction was in flight on the item (TransactionConflictException)."""
