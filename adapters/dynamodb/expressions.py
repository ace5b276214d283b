"""Expression fragments that carry their own placeholders, so conditions and updates can be
built from small named parts and combined without clashing or leaving a placeholder unused
(DynamoDB rejects both)."""

from collections.abc import Mapping
from typing import Any

import attrs

from adapters.dynamodb.items import (
    OPTIONAL_STATE_ATTRIBUTES,
    AttributeValue,
    connection_to_item,
    n,
    session_to_item,
)
from adapters.dynamodb.schema import (
    CAPACITY,
    EXPIRES_AT_MS,
    FAILURES,
    HELD,
    LAST_SEQ,
    PK,
    RATE_MILLI,
    UPDATED_AT_MS,
    VERSION,
    WRITE_ID,
)
from domain import Connection, WorkerSession


@attrs.frozen
class Expression:
    text: str
    names: Mapping[str, str] = attrs.field(factory=dict)
    values: Mapping[str, AttributeValue] = attrs.field(factory=dict)

    def __and__(self, other: "Expression") -> "Expression":
        return Expression(
            f"{self.text} AND {other.text}",
            _merge(self.names, other.names),
            _merge(self.values, other.values),
        )


def name(attribute: str) -> tuple[str, dict[str, str]]:
    """`#attribute` and its mapping: every attribute goes through a placeholder, so no
    attribute name can collide with DynamoDB's reserved words."""
    return f"#{attribute}", {f"#{attribute}": attribute}


def request_args(*, condition: Expression, update: Expression | None = None) -> dict[str, Any]:
    """The ConditionExpression/UpdateExpression keyword arguments of one request."""
    args: dict[str, Any] = {"ConditionExpression": condition.text}
    names = dict(condition.names)
    values = dict(condition.values)
    if update is not None:
        args["UpdateExpression"] = update.text
        names = _merge(names, update.names)
        values = _merge(values, update.values)
    args["ExpressionAttributeNames"] = names
    if values:
        args["ExpressionAttributeValues"] = values
    return args


def set_state(
    new: Connection, shards: int, old: Connection | None, write_id: str | None = None
) -> Expression:
    """The update that turns item `old` (None: no item yet) into item `new`: SET what differs,
    REMOVE optional attributes `new` lacks. Writing only the difference is exact because every
    such update is conditioned on `old`'s version, and it keeps requests small (a write costs by
    item size either way)."""
    target = connection_to_item(new, shards)
    current = connection_to_item(old, shards) if old is not None else {}
    names: dict[str, str] = {}
    values: dict[str, AttributeValue] = {}
    sets = []
    for attribute, value in target.items():
        if attribute == PK or current.get(attribute) == value:
            continue
        placeholder, mapping = name(attribute)
        names.update(mapping)
        values[f":new_{attribute}"] = value
        sets.append(f"{placeholder} = :new_{attribute}")
    if write_id is not None:
        placeholder, mapping = name(WRITE_ID)
        names.update(mapping)
        values[":new_write_id"] = {"S": write_id}
        sets.append(f"{placeholder} = :new_write_id")
    removes = []
    for attribute in OPTIONAL_STATE_ATTRIBUTES:
        if attribute in current and attribute not in target:
            placeholder, mapping = name(attribute)
            names.update(mapping)
            removes.append(placeholder)
    clauses = [f"SET {', '.join(sets)}"] if sets else []
    if removes:
        clauses.append(f"REMOVE {', '.join(removes)}")
    return Expression(" ".join(clauses), names, values)


def checkpoint_update(seq: int, now_ms: int) -> Expression:
    """Checkpointed without a read: the checkpoint, the failure count cleared, and the version
    stepped in place (+1), exactly `evolve`'s change when the condition holds."""
    return _sets(
        {LAST_SEQ: ":seq", FAILURES: ":zero", UPDATED_AT_MS: ":now"},
        {":seq": n(seq), ":zero": n(0), ":now": n(now_ms)},
    )


def session_renew_update(
    expires_at_ms: int, held: int, capacity: int, now_ms: int, write_id: str, rate_milli: int = 0
) -> Expression:
    """SessionRenewed without a read (+1 version in place). The caller's condition makes
    `expires_at_ms` the domain's max(current, now + lease)."""
    return _sets(
        {
            EXPIRES_AT_MS: ":expires",
            HELD: ":held",
            CAPACITY: ":capacity",
            RATE_MILLI: ":rate",
            UPDATED_AT_MS: ":now",
            WRITE_ID: ":write_id",
        },
        {
            ":expires": n(expires_at_ms),
            ":held": n(held),
            ":capacity": n(capacity),
            ":rate": n(rate_milli),
            ":now": n(now_ms),
            ":write_id": {"S": write_id},
        },
    )


def session_state(new: WorkerSession, write_id: str) -> Expression:
    """The update that writes every attribute of session `new` (a session item is small and
    conditioned on the version it was decided on)."""
    item = session_to_item(new)
    return _sets(
        {attribute: f":new_{attribute}" for attribute in item if attribute != PK}
        | {WRITE_ID: ":new_write_id"},
        {f":new_{attribute}": value for attribute, value in item.items() if attribute != PK}
        | {":new_write_id": {"S": write_id}},
    )


def _sets(parts: Mapping[str, str], values: Mapping[str, AttributeValue]) -> Expression:
    """SET each attribute to its placeholder, and step the version by one in place."""
    names: dict[str, str] = {}
    sets = []
    for attribute, value in parts.items():
        placeholder, mapping = name(attribute)
        names |= mapping
        sets.append(f"{placeholder} = {value}")
    version, mapping = name(VERSION)
    names |= mapping
    if VERSION not in parts:
        sets.append(f"{version} = {version} + :one")
        values = {**values, ":one": n(1)}
    return Expression("SET " + ", ".join(sets), names, dict(values))


def _merge(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    clash = [k for k in a.keys() & b.keys() if a[k] != b[k]]
    if clash:
        raise ValueError(f"expression placeholders {sorted(clash)} bound to different values")
    return {**a, **b}
