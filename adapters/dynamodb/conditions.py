"""The domain's preconditions (`domain.decide`) as DynamoDB condition expressions, one named
part per rule, combined per command.

Every ownership-changing write is conditioned twice: on the domain's rule, and on the version
the adapter read and decided on (optimistic concurrency). The version alone would make the
write exact; the rule is stated as well so that the database itself refuses what the domain
refuses, even if a writer ever got the version wrong, and so that the table's invariant is
readable in one place. A failed condition is a normal outcome, never an error.
"""

from adapters.dynamodb import schema
from adapters.dynamodb.expressions import Expression, name
from adapters.dynamodb.items import n, s
from domain import (
    NO_OWNER,
    Acquire,
    Command,
    Connection,
    DesiredState,
    EndStream,
    InvalidCommand,
    Release,
    Renew,
    ReportUpstreamFailure,
    Start,
    Stop,
)


def _attr(attribute: str, template: str, **values: str | int) -> Expression:
    """`template` with `{a}` for the attribute's placeholder and `:x` value placeholders."""
    placeholder, names = name(attribute)
    encoded = {f":{k}": s(v) if isinstance(v, str) else n(v) for k, v in values.items()}
    return Expression(template.format(a=placeholder), names, encoded)


def item_absent() -> Expression:
    """A new connection: nobody created it in the meantime."""
    return _attr(schema.PK, "attribute_not_exists({a})")


def version_is(version: int) -> Expression:
    """Optimistic concurrency: the item is still the one we read and decided on."""
    return _attr(schema.VERSION, "{a} = :expected_version", expected_version=version)


def desired_state_is(state: DesiredState) -> Expression:
    return _attr(schema.DESIRED_STATE, "{a} = :desired_state", desired_state=state.value)


def lease_free(now_ms: int) -> Expression:
    """Never leased or released (no owner), or expired: `LeaseStatus` is not HELD."""
    owner, names = name(schema.LEASE_OWNER)
    expires = _attr(schema.LEASE_EXPIRES_AT_MS, "{a} < :now", now=now_ms)
    return Expression(
        f"({owner} = :no_owner OR {expires.text})",
        {**names, **expires.names},
        {":no_owner": s(NO_OWNER), **expires.values},
    )


def not_backing_off(now_ms: int) -> Expression:
    """The upstream back-off is over (`not_before_ms < now`)."""
    return _attr(schema.NOT_BEFORE_MS, "{a} < :now", now=now_ms)


def owned_by(worker_id: str, token: int) -> Expression:
    """Fencing: the caller's lease is the latest one granted (release is allowed after expiry
    while nobody took over)."""
    return _attr(schema.LEASE_OWNER, "{a} = :worker", worker=worker_id) & _attr(
        schema.LEASE_TOKEN, "{a} = :token", token=token
    )


def held_by(worker_id: str, token: int, now_ms: int) -> Expression:
    """`Connection.is_held_by`: owned, actually leased (an owner, so never the empty one) and
    not expired."""
    return (
        owned_by(worker_id, token)
        & _attr(schema.LEASE_OWNER, "{a} <> :no_owner", no_owner=NO_OWNER)
        & _attr(schema.LEASE_EXPIRES_AT_MS, "{a} >= :now", now=now_ms)
    )


def checkpoint_not_behind(seq: int) -> Expression:
    """A checkpoint never regresses (`CheckpointRegressed`)."""
    return _attr(schema.LAST_SEQ, "{a} <= :seq", seq=seq)


def checkpoint_is(seq: int) -> Expression:
    return _attr(schema.LAST_SEQ, "{a} = :stored_seq", stored_seq=seq)


def expiry_at_most(expires_at_ms: int) -> Expression:
    return _attr(schema.LEASE_EXPIRES_AT_MS, "{a} <= :expires", expires=expires_at_ms)


def back_off_at_most(expires_at_ms: int) -> Expression:
    return _attr(schema.NOT_BEFORE_MS, "{a} <= :expires", expires=expires_at_ms)


def precondition(command: Command, state: Connection | None, now_ms: int) -> Expression:
    """The condition of the write that applies `decide(state, command, now_ms)`'s events."""
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
                & lease_free(now_ms)
                & not_backing_off(now_ms)
            )
        case Renew(worker_id=worker, token=token, checkpoint_seq=seq):
            rule = held_by(worker, token, now_ms) & checkpoint_not_behind(seq)
        case (
            Release(worker_id=worker, token=token, checkpoint_seq=seq)
            | EndStream(worker_id=worker, token=token, checkpoint_seq=seq)
            | ReportUpstreamFailure(worker_id=worker, token=token, checkpoint_seq=seq)
        ):
            rule = owned_by(worker, token) & checkpoint_not_behind(seq)
        case _:
            raise InvalidCommand(f"no store precondition for {type(command).__name__}")
    return rule & version_is(state.version)
