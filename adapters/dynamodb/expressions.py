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
)
from adapters.dynamodb.schema import (
    AVAILABLE_AT_MS,
    FAILURES,
    LAST_SEQ,
    LEASE_EXPIRES_AT_MS,
    PK,
    UPDATED_AT_MS,
    VERSION,
    WRITE_ID,
)
from domain import Connection


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


def renew_update(expires_at_ms: int, now_ms: int, new_seq: int | None) -> Expression:
    """A heartbeat's update: LeaseRenewed (+1 version), plus Checkpointed (+1, failures
    cleared) when `new_seq`. The version is incremented in place, so this needs no read."""
    parts = {
        LEASE_EXPIRES_AT_MS: ":expires",
        AVAILABLE_AT_MS: ":expires",
        UPDATED_AT_MS: ":now",
    }
    values = {":expires": n(expires_at_ms), ":now": n(now_ms), ":steps": n(1)}
    if new_seq is not None:
        parts |= {LAST_SEQ: ":seq", FAILURES: ":zero"}
        values |= {":seq": n(new_seq), ":zero": n(0), ":steps": n(2)}
    names: dict[str, str] = {}
    sets = []
    for attribute, value in parts.items():
        placeholder, mapping = name(attribute)
        names |= mapping
        sets.append(f"{placeholder} = {value}")
    version, mapping = name(VERSION)
    names |= mapping
    sets.append(f"{version} = {version} + :steps")
    return Expression("SET " + ", ".join(sets), names, values)


def _merge(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    clash = [k for k in a.keys() & b.keys() if a[k] != b[k]]
    if clash:
        raise ValueError(f"expression placeholders {sorted(clash)} bound to different values")
    return {**a, **b}
