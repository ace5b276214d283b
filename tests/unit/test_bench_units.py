"""bench/units.py charges index writes by the tables' real definitions: a KEYS_ONLY index only
when an item enters, leaves or moves in it; an ALL index also when a projected attribute
changes; a move costs a delete and a put."""

from adapters.dynamodb import schema
from adapters.dynamodb.schema import TableNames
from bench.units import Item, Meter

TABLES = TableNames()


def item(**attributes: str) -> Item:
    return {schema.PK: {"S": "CONN#c1"}, **{k: {"S": v} for k, v in attributes.items()}}


def index_writes(before: Item | None, after: Item | None) -> dict[str, float]:
    meter = Meter(TABLES)
    meter.write("update_item", TABLES.connections, before, after, 1)
    prefix = f"update_item {TABLES.connections} "
    return {k.removeprefix(prefix): v for k, v in meter.wcu.items() if k.startswith(prefix)}


def test_a_keys_only_index_is_written_when_an_item_enters_leaves_or_moves_in_it() -> None:
    unowned = item(ws_url="a")
    owned = item(ws_url="a", owned_by="s1")
    checkpointed = item(ws_url="a", owned_by="s1", last_seq="5")
    taken = item(ws_url="a", owned_by="s2")

    assert index_writes(unowned, owned) == {schema.OWNER_INDEX: 1}
    assert index_writes(owned, checkpointed) == {}  # nothing it projects changed
    assert index_writes(checkpointed, taken) == {schema.OWNER_INDEX: 2}  # delete + put
    assert index_writes(taken, unowned) == {schema.OWNER_INDEX: 1}


def test_an_all_index_is_also_written_when_another_attribute_of_a_listed_item_changes() -> None:
    listed = item(orphan_shard="STARTED#01", not_before_ms="0")
    backed_off = {**listed, schema.NOT_BEFORE_MS: {"N": "9"}, schema.FAILURES: {"N": "1"}}
    renamed = {**listed, schema.WS_URL: {"S": "b"}}

    assert index_writes(listed, renamed) == {schema.ORPHAN_INDEX: 1}
    assert index_writes(listed, backed_off) == {schema.ORPHAN_INDEX: 2}  # the sort key moved
    assert index_writes(None, listed) == {schema.ORPHAN_INDEX: 1}
    assert index_writes(listed, listed) == {}


def test_a_write_to_the_sessions_table_writes_no_index() -> None:
    meter = Meter(TABLES)
    session = {schema.PK: {"S": "s1"}, schema.EXPIRES_AT_MS: {"N": "1"}}

    meter.write("update_item", TABLES.sessions, session, {**session, "held": {"N": "3"}}, 1)

    assert dict(meter.wcu) == {f"update_item {TABLES.sessions}": 1}
