"""Each DynamoDB condition part is self-contained: every placeholder its text uses is bound in
the part itself, with the value it was given, so any part can be used alone or combined.
(Found by mutation testing: a part without its value still worked in a combined condition, only
because another part beside it bound the same placeholder.)"""

import re
from collections.abc import Callable

import attrs
import pytest

from adapters.dynamodb import conditions
from adapters.dynamodb.expressions import Expression
from adapters.dynamodb.items import n, s
from domain import Checkpoint, DesiredState, InvalidCommand, Start, decide, fold

# Built inside the test, not at import: a part built at import is not what a mutation tool
# that switches a mutant on after import would check (mutmut found three bindings dropped
# that a PARTS built at import never saw).
PARTS: dict[str, tuple[Callable[[], Expression], dict[str, object]]] = {
    "item_absent": (lambda: conditions.item_absent(), {}),
    "item_exists": (lambda: conditions.item_exists(), {}),
    "version_is": (lambda: conditions.version_is(3), {":expected_version": n(3)}),
    "desired_state_is": (
        lambda: conditions.desired_state_is(DesiredState.STOPPED),
        {":desired_state": s("STOPPED")},
    ),
    "owner_is": (lambda: conditions.owner_is("s1"), {":owner": s("s1")}),
    "not_backing_off": (lambda: conditions.not_backing_off(5), {":now": n(5)}),
    "owned_by": (lambda: conditions.owned_by("s1", 2), {":session": s("s1"), ":token": n(2)}),
    "checkpoint_not_behind": (lambda: conditions.checkpoint_not_behind(7), {":seq": n(7)}),
    "checkpoint_before": (lambda: conditions.checkpoint_before(7), {":seq": n(7)}),
    "checkpoint_without_read": (
        lambda: conditions.checkpoint_without_read(Checkpoint("c1", "s1", 2, 7)),
        {":session": s("s1"), ":token": n(2), ":seq": n(7)},
    ),
    "session_live": (lambda: conditions.session_live(5), {":now": n(5)}),
    "session_dead": (lambda: conditions.session_dead(5), {":now": n(5)}),
    "expiry_at_most": (lambda: conditions.expiry_at_most(9), {":expires": n(9)}),
    "not_written_by": (lambda: conditions.not_written_by("w"), {":write_id": s("w")}),
}


@pytest.mark.parametrize("part", list(PARTS))
def test_every_placeholder_a_condition_uses_is_bound_in_it_with_its_value(part: str) -> None:
    build, values = PARTS[part]
    expression = build()

    assert set(re.findall(r"#\w+", expression.text)) == set(expression.names)
    assert set(re.findall(r":\w+", expression.text)) == set(expression.values)
    assert dict(expression.values) == values


def test_a_command_without_a_store_precondition_is_refused_by_name() -> None:
    @attrs.frozen
    class Teleport:
        connection_id: str

    state = fold(decide(None, Start("c1", "wss://feeds.example.com/a"), 0), None)

    with pytest.raises(InvalidCommand, match=r"^no store precondition for Teleport$"):
        conditions.connection_precondition(Teleport("c1"), state, 1)  # type: ignore[arg-type]
