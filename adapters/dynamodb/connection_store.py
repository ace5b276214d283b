"""DynamoDbConnectionStore: the connection store port on DynamoDB, over an injected aioboto3
low-level client (opened and closed by the composition root, one per process).

How each operation maps to DynamoDB, and what it costs (on-demand units; a connection item is
under 1 KB unless its URL is long, so one write = 1 WCU, one strongly consistent read = 1 RCU,
one eventually consistent read = 0.5 RCU; transactional writes cost 2x; every write that
changes an indexed attribute also writes the orphan index, whose ALL projection doubles the
item's storage):

- start / stop / try_acquire / release / end_stream / report_upstream_failure: read the item
  (GetItem, consistent: 1 RCU), run `domain.decide` (so the events, versions and refusals are
  exactly the domain's), then ONE TransactWriteItems: an Update of the state item conditioned on
  the domain's precondition and the version read, plus a Put of each ownership event into the
  events table (2 x 2 WCU = 4 WCU, 6 with three events). Losing a race cancels the transaction;
  the cancellation carries the current item (ALL_OLD), so the adapter re-decides without
  another read, within `max_attempts`. A refusal of try_acquire costs only the read.
- renew (the heartbeat, by far the most frequent write): ONE conditional UpdateItem, no read
  and no event-log write: 1 WCU on the table, plus 2 on the orphan index, whose sort key
  (available_at_ms) moves with the expiry (the index deletes and re-puts the entry; the
  article's index keyed on the expiry costs the same). About 3 WCU per heartbeat: at one per
  5 s, ~2,200 WCU per connection-hour. Logging each renewal would add a transaction (2 items x
  2 WCU) per heartbeat to tell nobody anything the state item does not: who holds the lease
  and until when. Checkpoints ride on renewals for the same reason. A refusal returns the
  refusing item for free (ReturnValuesOnConditionCheckFailure=ALL_OLD).
- get: GetItem, consistent, 1 RCU. history: Query on the events table, consistent.
- iter_orphans / next_available_at: Queries on the sharded orphan index, one per shard
  (0.5 RCU each at least). GSIs are eventually consistent: moto updates them synchronously, real
  GSIs lag by up to about a second, so an orphan may be listed after someone took it, or show up
  a little late. Correctness never rests on the index: the acquire re-reads the item and its
  condition re-checks everything.
- desired_states: BatchGetItem, 100 keys per call, projection of the key and desired state,
  eventually consistent (0.5 RCU per key; a STOP is honoured up to a second later).
- list_connections: a Scan (operators only; reads the whole table's items up to `limit`).

Time comes from the caller (`now_ms`): leases compare the callers' clocks, as in the article.
Concurrency: iter_orphans and next_available_at send one request per shard at once, and
desired_states up to 4 batches; the client's `max_pool_connections` (botocore's default is 10)
must leave room for that beside the heartbeats, or calls queue behind each other.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import attrs
from botocore.exceptions import ClientError

from adapters.dynamodb import backoff, conditions, schema
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
    name,
    renew_update,
    request_args,
    set_state,
)
from adapters.dynamodb.items import (
    connection_from_item,
    event_to_item,
    key,
)
from adapters.dynamodb.schema import TableNames
from application.errors import ConfigurationError, StoreUnavailable
from application.ports.store import CommandResult, RenewResult
from domain import (
    Acquire,
    Command,
    Connection,
    DesiredState,
    DomainError,
    EndStream,
    Event,
    InvalidTransition,
    Release,
    Renew,
    ReportUpstreamFailure,
    Start,
    Stop,
    decide,
    fold,
    is_ownership_event,
    validate_connection_id,
)

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb.client import DynamoDBClient

log = logging.getLogger(__name__)

_CHECKPOINT_CACHE_LIMIT = 100_000


@attrs.frozen
class _Raced:
    """The transaction lost: `current` is the item that refused it, if the response had it."""

    current: Connection | None
    known: bool  # False: re-read the item
    conflict: bool  # TransactionConflict: another transaction was in flight on the item
    write_id: str | None = None  # the refusing item's last write id


class DynamoDbConnectionStore:
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
    ) -> None:
        if not 1 <= shards <= 100:
            raise ConfigurationError(f"orphan index shards must be 1-100, got {shards}")
        if max_attempts < 1:
            raise ConfigurationError(f"max_attempts must be at least 1, got {max_attempts}")
        self._client = client
        self._tables = tables or TableNames()
        self._shards = shards
        self._max_attempts = max_attempts
        self._retry_base_s = retry_base_s
        self._retry_cap_s = retry_cap_s
        # (connection id, token) -> the checkpoint this process last stored under that token.
        # Only the token's holder writes checkpoints while the token is current, so this is the
        # stored value unless the lease was lost, in which case the condition fails anyway.
        self._checkpoints: dict[tuple[str, int], int] = {}
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

    # --- ownership-changing operations: read, decide, one transaction -------------------------

    async def start(self, connection_id: str, ws_url: str, now_ms: int) -> CommandResult:
        conn, changed = await self._apply(Start(connection_id, ws_url), now_ms, "start")
        return CommandResult(conn, changed)

    async def stop(self, connection_id: str, now_ms: int) -> CommandResult:
        conn, changed = await self._apply(Stop(connection_id), now_ms, "stop")
        return CommandResult(conn, changed)

    async def try_acquire(
        self, connection_id: str, worker_id: str, lease_ms: int, now_ms: int
    ) -> Connection | None:
        try:
            conn, _ = await self._apply(
                Acquire(connection_id, worker_id, lease_ms), now_ms, "try_acquire"
            )
        except DomainError:
            return None  # unknown, stopped, held or backing off: not ours to take
        self._remember_checkpoint(conn)
        return conn

    async def release(
        self, connection_id: str, worker_id: str, token: int, checkpoint_seq: int, now_ms: int
    ) -> Connection:
        cmd = Release(connection_id, worker_id, token, checkpoint_seq)
        return await self._end_lease(cmd, now_ms, "release")

    async def end_stream(
        self, connection_id: str, worker_id: str, token: int, checkpoint_seq: int, now_ms: int
    ) -> Connection:
        cmd = EndStream(connection_id, worker_id, token, checkpoint_seq)
        return await self._end_lease(cmd, now_ms, "end_stream")

    async def report_upstream_failure(
        self,
        connection_id: str,
        worker_id: str,
        token: int,
        checkpoint_seq: int,
        not_before_ms: int,
        reason: str,
        now_ms: int,
    ) -> Connection:
        cmd = ReportUpstreamFailure(
            connection_id, worker_id, token, checkpoint_seq, not_before_ms, reason
        )
        return await self._end_lease(cmd, now_ms, "report_upstream_failure")

    async def _end_lease(
        self, cmd: Release | EndStream | ReportUpstreamFailure, now_ms: int, op: str
    ) -> Connection:
        try:
            return (await self._apply(cmd, now_ms, op))[0]
        finally:  # released, or lost: either way this token will not checkpoint again
            self._checkpoints.pop((cmd.connection_id, cmd.token), None)

    async def _apply(self, command: Command, now_ms: int, op: str) -> tuple[Connection, bool]:
        """Read, decide, write conditionally; on a lost race decide again on what won."""
        self._count(op)
        validate_connection_id(command.connection_id)  # before it becomes a key
        state = await self._queries.read(command.connection_id, op)
        write_id = uuid.uuid4().hex
        for attempt in range(self._max_attempts):
            events = decide(state, command, now_ms)  # refusals propagate as DomainErrors
            if not events:
                assert state is not None  # decide only returns no events for existing ones
                return state, False
            new_state = fold(events, state)
            assert new_state is not None
            raced = await self._commit(command, state, new_state, events, now_ms, op, write_id)
            if raced is None:
                return new_state, True
            if raced.known and raced.write_id == write_id:
                # What refused us carries our own write id: an earlier attempt of ours landed
                # and only its response was lost (an SDK retry after a timeout). Comparing
                # states would not do: racing identical STOPs produce identical states.
                return new_state, True
            log.debug(
                "%s of %r lost a race (attempt %d%s); deciding again",
                op,
                command.connection_id,
                attempt + 1,
                ", transaction conflict" if raced.conflict else "",
            )
            if raced.conflict:
                await backoff.pause(attempt, self._retry_base_s, self._retry_cap_s)
            if raced.known:
                state = raced.current
            else:
                state = await self._queries.read(command.connection_id, op)
        raise StoreUnavailable(
            f"{op} of {command.connection_id!r} gave up after {self._max_attempts} attempts: "
            "the item kept changing under it"
        )

    async def _commit(
        self,
        command: Command,
        state: Connection | None,
        new_state: Connection,
        events: Sequence[Event],
        now_ms: int,
        op: str,
        write_id: str,
    ) -> _Raced | None:
        """One TransactWriteItems: the state item's update and the ownership events' puts."""
        update = {
            "TableName": self._tables.connections,
            "Key": key(command.connection_id),
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            **request_args(
                condition=conditions.precondition(command, state, now_ms),
                update=set_state(new_state, self._shards, state, write_id),
            ),
        }
        pk_name, pk_names = name(schema.PK)
        puts = [
            {
                "Put": {
                    "TableName": self._tables.events,
                    "Item": event_to_item(event),
                    # The log is append-only: a version is written once.
                    "ConditionExpression": f"attribute_not_exists({pk_name})",
                    "ExpressionAttributeNames": pk_names,
                }
            }
            for event in events
            if is_ownership_event(event)
        ]
        transact_items: list[Any] = [{"Update": update}, *puts]
        self._request("TransactWriteItems")
        try:
            with unavailable_as(StoreUnavailable, op):
                await self._client.transact_write_items(TransactItems=transact_items)
        except ClientError as exc:
            if error_code(exc) == TRANSACTION_CONFLICT:
                return _Raced(None, known=False, conflict=True)
            if error_code(exc) != TRANSACTION_CANCELED:
                raise
            return self._raced(exc, command, op)
        return None

    def _raced(self, exc: ClientError, command: Command, op: str) -> _Raced:
        reasons = [reason.get("Code", REASON_NONE) for reason in cancellation_reasons(exc)]
        if any(code in REASON_THROTTLED for code in reasons):
            raise StoreUnavailable(f"DynamoDB {op} throttled: {reasons}") from exc
        if reasons and reasons[0] == REASON_CONDITION_FAILED:
            item = cancellation_reasons(exc)[0].get("Item")
            if item:
                written_by = item.get(schema.WRITE_ID, {}).get("S")
                return _Raced(connection_from_item(item), True, False, written_by)
            return _Raced(None, known=False, conflict=False)
        if REASON_CONFLICT in reasons:
            return _Raced(None, known=False, conflict=True)
        if REASON_CONDITION_FAILED in reasons[1:]:
            # The state item passed its version check yet an event of that version is already
            # logged: the log is ahead of the state (edited by hand, or restored from a backup).
            raise InvalidTransition(
                f"the event log of {command.connection_id!r} already holds a version the state "
                f"item has not reached ({reasons}); repair the tables before retrying"
            ) from exc
        raise exc

    # --- renew: one conditional UpdateItem -----------------------------------------------------

    async def renew(
        self,
        connection_id: str,
        worker_id: str,
        token: int,
        lease_ms: int,
        checkpoint_seq: int,
        now_ms: int,
    ) -> RenewResult:
        self._count("renew")
        cmd = Renew(connection_id, worker_id, token, lease_ms, checkpoint_seq)
        try:
            validate_connection_id(connection_id)
        except DomainError:
            return RenewResult(False, None)  # such an item cannot exist
        stored_seq = self._checkpoints.get((connection_id, token))
        if lease_ms <= 0 or stored_seq is None or checkpoint_seq < stored_seq:
            # Unknown checkpoint (another process acquired, or this one restarted), or a request
            # the domain will refuse anyway: decide on a fresh read.
            return await self._renew_exact(
                cmd, await self._queries.read(connection_id, "renew"), now_ms
            )
        return await self._renew_fast(cmd, stored_seq, now_ms)

    async def _renew_fast(self, cmd: Renew, stored_seq: int, now_ms: int) -> RenewResult:
        """The heartbeat: no read, one write. The domain's renew sets the expiry to
        max(current, now + lease); an update expression has no max, so the write sets
        now + lease on condition that the current expiry is not later (then the max IS
        now + lease). A renew asking for less than remains (a shorter lease_ms than before)
        fails that part only, and is redone exactly below from the refusing item.
        `available_at_ms` = max(expiry, not_before) = the new expiry, because a held lease was
        acquired after its back-off ended (`not_before < acquire time <= expiry`); the
        condition states it rather than trusting it.
        The checkpoint part pins the stored checkpoint to the cached one, so the version step
        (+1 LeaseRenewed, +2 with Checkpointed) and the failure reset are the domain's exactly."""
        expires = now_ms + cmd.lease_ms
        advanced = cmd.checkpoint_seq > stored_seq
        condition = (
            conditions.held_by(cmd.worker_id, cmd.token, now_ms)
            & conditions.checkpoint_is(stored_seq)
            & conditions.expiry_at_most(expires)
            & conditions.back_off_at_most(expires)
        )
        update = renew_update(expires, now_ms, cmd.checkpoint_seq if advanced else None)
        for attempt in range(self._max_attempts):
            try:
                response = await self._update(cmd.connection_id, condition, update, "ALL_NEW")
            except _ConditionFailed as refused:
                return await self._renew_exact(cmd, refused.current, now_ms)
            except _Conflict:
                await backoff.pause(attempt, self._retry_base_s, self._retry_cap_s)
                continue
            conn = connection_from_item(response)
            self._remember_checkpoint(conn)
            return RenewResult(True, conn)
        raise StoreUnavailable(f"renew of {cmd.connection_id!r}: transaction conflicts persisted")

    async def _renew_exact(self, cmd: Renew, state: Connection | None, now_ms: int) -> RenewResult:
        """Decide on a known state and write its result conditioned on its version."""
        for attempt in range(self._max_attempts):
            try:
                events = decide(state, cmd, now_ms)
            except DomainError:
                self._checkpoints.pop((cmd.connection_id, cmd.token), None)
                return RenewResult(False, state)
            new_state = fold(events, state)
            assert new_state is not None
            condition = conditions.precondition(cmd, state, now_ms)
            try:
                await self._update(
                    cmd.connection_id, condition, set_state(new_state, self._shards, state), "NONE"
                )
            except _ConditionFailed as refused:
                if refused.current == new_state:  # our own write, whose response was lost
                    self._remember_checkpoint(new_state)
                    return RenewResult(True, new_state)
                state = refused.current
                continue
            except _Conflict:
                await backoff.pause(attempt, self._retry_base_s, self._retry_cap_s)
                state = await self._queries.read(cmd.connection_id, "renew")
                continue
            self._remember_checkpoint(new_state)
            return RenewResult(True, new_state)
        raise StoreUnavailable(
            f"renew of {cmd.connection_id!r} gave up after {self._max_attempts} attempts"
        )

    async def _update(
        self,
        connection_id: str,
        condition: Expression,
        update: Expression,
        returns: Literal["ALL_NEW", "NONE"],
    ) -> Mapping[str, Any]:
        self._request("UpdateItem")
        try:
            with unavailable_as(StoreUnavailable, "renew"):
                response = await self._client.update_item(
                    TableName=self._tables.connections,
                    Key=key(connection_id),
                    ReturnValues=returns,
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                    **request_args(condition=condition, update=update),
                )
        except ClientError as exc:
            if error_code(exc) == CONDITION_FAILED:
                item = failed_item(exc)
                raise _ConditionFailed(connection_from_item(item) if item else None) from None
            if error_code(exc) == TRANSACTION_CONFLICT:
                raise _Conflict from None
            raise
        return response.get("Attributes", {})

    def _remember_checkpoint(self, conn: Connection) -> None:
        if len(self._checkpoints) >= _CHECKPOINT_CACHE_LIMIT:
            # Entries leave on release and on refusal; this only bounds leaks from leases that
            # were abandoned without either (the oldest go first, and cost one read if needed).
            del self._checkpoints[next(iter(self._checkpoints))]
        self._checkpoints[(conn.connection_id, conn.token)] = conn.checkpoint_seq

    # --- reads ---------------------------------------------------------------------------------

    async def get(self, connection_id: str) -> Connection | None:
        self._count("get")
        try:
            validate_connection_id(connection_id)
        except DomainError:
            return None
        return await self._queries.read(connection_id, "get")

    def iter_orphans(self, now_ms: int, page_size: int) -> AsyncIterator[Sequence[Connection]]:
        self._count("iter_orphans")
        return self._queries.iter_orphans(now_ms, page_size)

    async def next_available_at(self, now_ms: int) -> int | None:
        self._count("next_available_at")
        return await self._queries.next_available_at(now_ms)

    async def desired_states(self, connection_ids: Sequence[str]) -> Mapping[str, DesiredState]:
        self._count("desired_states")
        return await self._queries.desired_states(connection_ids)

    async def history(self, connection_id: str) -> Sequence[Event]:
        self._count("history")
        return await self._queries.history(connection_id)

    async def list_connections(self, limit: int = 1000) -> Sequence[Connection]:
        return await self._queries.list_connections(limit)

    # --- accounting ----------------------------------------------------------------------------

    def _count(self, op: str) -> None:
        self.operations[op] = self.operations.get(op, 0) + 1

    def _request(self, api: str) -> None:
        self.requests[api] = self.requests.get(api, 0) + 1


class _ConditionFailed(Exception):
    """An UpdateItem's condition refused it; `current` is the refusing item (ALL_OLD)."""

    def __init__(self, current: Connection | None) -> None:
        super().__init__("conditional check failed")
        self.current = current


class _Conflict(Exception):
    """A transaction was in flight on the item (TransactionConflictException)."""
