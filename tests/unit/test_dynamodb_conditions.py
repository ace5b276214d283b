"""Each DynamoDB condition part is self-contained: every placeholder its text uses is bound in
the part itself, with the value it was given, so any part can be used alone or combined.
(Found by mutation testing: `expiry_at_most` without its value still worked in the renew
condition, only because `back_off_at_most` beside it binds the same `:expires`.)"""

import re

import attrs
import pytest

from adapters.dynamodb import conditions
from adapters.dynamodb.expressions import Expression
from adapters.dynamodb.items import n, s
from domain import DesiredState, InvalidCommand, Start, decide, fold

PARTS: dict[str, tuple[Expression, dict[str, object]]] = {
    "item_absent": (conditions.item_absent(), {}),
    "version_is": (conditions.version_is(3), {":expected_version": n(3)}),
    "desired_state_is": (
        conditions.desired_state_is(DesiredState.STOPPED),
        {":desired_state": s("STOPPED")},
    ),
    "lease_free": (conditions.lease_free(5), {":no_owner": s(""), ":now": n(5)}),
    "not_backing_off": (conditions.not_backing_off(5), {":now": n(5)}),
    "owned_by": (conditions.owned_by("w1", 2), {":worker": s("w1"), ":token": n(2)}),
    "held_by": (
        conditions.held_by("w1", 2, 5),
        {":worker": s("w1"), ":token": n(2), ":no_owner": s(""), ":now": n(5)},
    ),
    "checkpoint_not_behind": (conditions.checkpoint_not_behind(7), {":seq": n(7)}),
    "checkpoint_is": (conditions.checkpoint_is(7), {":stored_seq": n(7)}),
    "expiry_at_most": (conditions.expiry_at_most(9), {":expires": n(9)}),
    "back_off_at_most": (conditions.back_off_at_most(9), {":expires": n(9)}),
}


@pytest.mark.parametrize("part", list(PARTS))
def test_every_placeholder_a_condition_uses_is_bound_in_it_with_its_value(part: str) -> None:
    expression, values = PARTS[part]

    assert set(re.findall(r"#\w+", expression.text)) == set(expression.names)
    assert set(re.findall(r":\w+", expression.text)) == set(expression.values)
    assert dict(expression.values) == values


def test_a_command_without_a_store_precondition_is_refused_by_name() -> None:
    @attrs.frozen
    class Teleport:
        connection_id: str

    state = fold(decide(None, Start("c1", "wss://feeds.example.com/a"), 0), None)

    with pytest.raises(InvalidCommand, match=r"^no store precondition for Teleport$"):
        conditions.precondition(Teleport("c1"), state, 1)  # type: ignore[arg-type]
