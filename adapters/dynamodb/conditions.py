"""The domain's preconditions (`domain.decide`, `domain.decide_session`) as DynamoDB condition
expressions, one named part per rule, combined per command.

Every ownership-changing write is conditioned twice: on the domain's rule, and on the version
the adapter read and decided on (optimistic concurrency). The version alone would make the
write exact; the rule is stated as well so that the database itself refuses what the domain
refuses, even if a writer ever got the version wrong, and so that the table's invariant is
readable in one place. A failed condition is a normal outcome, never an error.

A lease's rule spans two items (`Connection.lease_status`: held while the owner's session is
live), so an acquire is a transaction whose parts each state their half: the connection's
update (`connection_precondition`: wanted, not backing off, still owned by whom we read), a
ConditionCheck that the acquirer's session is live (`session_live`) and, for a takeover, one
that the previous owner's session is dead (`session_dead`).
"""

from adapters.dynamodb import schema
from adapters.dynamodb.expressions import Expression, name
from adapters.dynamodb.items import n, s
from domain import (
    Acquire,
    Checkpoint,
    Command,
    Connection,
    DesiredState,
    EndStream,
    InvalidCommand,
    Release,
    ReportUpstreamFailure,
    Start,
    Stop,
)


def _attr(attribute: str, template: str, **values: str | int) -> Expression:
    """`template` with `{a}` for the attribute's placeholder and `:x` value placeholders."""
    placeholder, names = name(attribute)
    encoded = {f":{k}": s(v) if isinstance(v, str) else n(v) for k, v in values.items()}
    return Expression(template.format(a=placeholder), names, encoded)


# --- connection items ----------------------------------------------------------------------------


def item_absent() -> Expression:
    """A new item (a connection, a session): nobody created it in the meantime."""
    return _attr(schema.PK, "attribute_not_exists({a})")


def item_exists() -> Expression:
    return _attr(schema.PK, "attribute_exists({a})")


def version_is(version: int) -> Expression:
    """Optimistic concurrency: the item is still the one we read and decided on."""
    return _attr(schema.VERSION, "{a} = :expected_version", expected_version=version)


def desired_state_is(state: DesiredState) -> Expression:
    return _attr(schema.DESIRED_STATE, "{a} = :desired_state", desired_state=state.value)


def owner_is(owner: str) -> Expression:
    """The connection is still owned by `owner` (NO_OWNER: by nobody). An acquire's half of the
    lease rule on the connection; the sessions' half is in the transaction's ConditionChecks."""
    return _attr(schema.LEASE_OWNER, "{a} = :owner", owner=owner)


def not_backing_off(now_ms: int) -> Expression:
    """The upstream back-off is over (`not_before_ms < now`)."""
    return _attr(schema.NOT_BEFORE_MS, "{a} < :now", now=now_ms)


def owned_by(session_id: str, token: int) -> Expression:
    """Fencing: the caller's lease is the latest one granted. Whether its session is still live
    does not matter to release or checkpoint (`decide._owned`)."""
    return _attr(schema.LEASE_OWNER, "{a} = :session", session=session_id) & _attr(
        schema.LEASE_TOKEN, "{a} = :token", token=token
    )


def checkpoint_not_behind(seq: int) -> Expression:
    """A checkpoint never regresses (`CheckpointRegressed`)."""
    return _attr(schema.LAST_SEQ, "{a} <= :seq", seq=seq)


def checkpoint_before(seq: int) -> Expression:
    """The checkpoint moves forward: a write-without-read checkpoint only writes when it does
    (`Checkpointed` is decided only then; an equal one changes nothing)."""
    return _attr(schema.LAST_SEQ, "{a} < :seq", seq=seq)


def connection_precondition(command: Command, state: Connection | None, now_ms: int) -> Expression:
    """The condition of the connection write that applies `decide(state, command, ...)`'s events."""
    if state is None:  # only a first START writes without a prior state
        return item_absent()
    rule: Expression
    match command:
        case Start():
            rule = desired_state_is(DesiredState.STOPPED)  # a restart; a no-op START never writes
        case Stop():
            rule = desired_state_is(DesiredState.STARTED)
        case Acquire():
            rule = (
                desired_state_is(DesiredState.STARTED)
                & not_backing_off(now_ms)
                & owner_is(state.owner)
            )
        case (
            Checkpoint(session_id=session, token=token, checkpoint_seq=seq)
            | Release(session_id=session, token=token, checkpoint_seq=seq)
            | EndStream(session_id=session, token=token, checkpoint_seq=seq)
            | ReportUpstreamFailure(session_id=session, token=token, checkpoint_seq=seq)
        ):
            rule = owned_by(session, token) & checkpoint_not_behind(seq)
        case _:
            raise InvalidCommand(f"no store precondition for {type(command).__name__}")
    return rule & version_is(state.version)


def checkpoint_without_read(command: Checkpoint) -> Expression:
    """`execute(Checkpoint)` in one UpdateItem: owner and token match and the checkpoint moves
    forward. When it fails, the refusing item (ALL_OLD) is decided on: LeaseLost,
    CheckpointRegressed, ConnectionNotFound, or an equal checkpoint that changes nothing."""
    return (
        item_exists()
        & owned_by(command.session_id, command.token)
        & checkpoint_before(command.checkpoint_seq)
    )


# --- session items -------------------------------------------------------------------------------


def session_live(now_ms: int) -> Expression:
    """`WorkerSession.is_live`: the item exists, has not ended and has not expired."""
    return (
        item_exists()
        & _attr(schema.ENDED_REASON, "attribute_not_exists({a})")
        & _attr(schema.EXPIRES_AT_MS, "{a} >= :now", now=now_ms)
    )


def session_dead(now_ms: int) -> Expression:
    """The negation of `session_live`: gone (cleaned up, or never written), ended, or expired.
    A dead session never lives again (a renew requires `session_live`), so once this held it
    holds for good, whatever arrives late."""
    pk, pk_names = name(schema.PK)
    ended, ended_names = name(schema.ENDED_REASON)
    expires = _attr(schema.EXPIRES_AT_MS, "{a} < :now", now=now_ms)
    return Expression(
        f"(attribute_not_exists({pk}) OR attribute_exists({ended}) OR {expires.text})",
        {**pk_names, **ended_names, **expires.names},
        dict(expires.values),
    )


def expiry_at_most(expires_at_ms: int) -> Expression:
    """A renew's write without a read sets the expiry to now + lease; this makes that the
    domain's max(current, now + lease): a renew never shortens a session."""
    return _attr(schema.EXPIRES_AT_MS, "{a} <= :expires", expires=expires_at_ms)


def not_written_by(write_id: str) -> Expression:
    """This exact write has not landed yet: a retry of a heartbeat whose response was lost fails
    here instead of stepping the version twice, and the refusing item carries our write id."""
    write, names = name(schema.WRITE_ID)
    return Expression(
        f"(attribute_not_exists({write}) OR {write} <> :write_id)",
        names,
        {":write_id": s(write_id)},
    )
