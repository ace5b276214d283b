"""The tables as created from schema.py: keys, the three sparse indexes, the sessions table,
TTL."""

from typing import Any

from adapters.dynamodb import schema
from adapters.dynamodb.tables import create_tables, table_definitions
from entrypoints.devstack.aws import LocalAws
from tests.support.dynamodb import TABLES, dynamodb_client


async def test_create_tables_builds_the_schema_and_can_run_again(aws: LocalAws) -> None:
    async with dynamodb_client(aws) as client:
        await create_tables(client, TABLES)
        await create_tables(client, TABLES)  # existing tables are left alone

        connections = (await client.describe_table(TableName=TABLES.connections))["Table"]
        events = (await client.describe_table(TableName=TABLES.events))["Table"]
        sessions = (await client.describe_table(TableName=TABLES.sessions))["Table"]
        ttl = await client.describe_time_to_live(TableName=TABLES.messages)

    assert _keys(connections) == [("pk", "HASH")]
    indexes = {i["IndexName"]: i for i in connections["GlobalSecondaryIndexes"]}
    assert set(indexes) == {schema.ORPHAN_INDEX, schema.OWNER_INDEX, schema.STOP_INDEX}
    orphans = indexes[schema.ORPHAN_INDEX]
    assert _keys(orphans) == [("orphan_shard", "HASH"), ("not_before_ms", "RANGE")]
    assert orphans["Projection"]["ProjectionType"] == "ALL"
    assert _keys(indexes[schema.OWNER_INDEX]) == [("owned_by", "HASH")]
    assert _keys(indexes[schema.STOP_INDEX]) == [("stop_owner", "HASH")]
    for by_owner in (indexes[schema.OWNER_INDEX], indexes[schema.STOP_INDEX]):
        assert by_owner["Projection"]["ProjectionType"] == "KEYS_ONLY"
    assert connections["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    assert _keys(events) == [("pk", "HASH"), ("sk", "RANGE")]
    assert _keys(sessions) == [("pk", "HASH")]
    assert "GlobalSecondaryIndexes" not in sessions  # a heartbeat writes the item only
    assert ttl["TimeToLiveDescription"]["AttributeName"] == "expires_at"
    assert ttl["TimeToLiveDescription"]["TimeToLiveStatus"] == "ENABLED"


def test_definitions_use_the_configured_names_and_only_schema_attributes() -> None:
    names = schema.TableNames("a", "b", "c", "d")

    definitions = table_definitions(names)

    assert [d["TableName"] for d in definitions] == ["a", "b", "c", "d"]
    declared = {a["AttributeName"] for d in definitions for a in d["AttributeDefinitions"]}
    assert declared == {
        schema.PK,
        schema.SK,
        schema.ORPHAN_SHARD,
        schema.NOT_BEFORE_MS,
        schema.OWNED_BY,
        schema.STOP_OWNER,
    }


def _keys(table: dict[str, Any]) -> list[tuple[str, str]]:
    return [(k["AttributeName"], k["KeyType"]) for k in table["KeySchema"]]
