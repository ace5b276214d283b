"""What `terraform test` (infra/tests/) checks the plan against, taken from the code: table and
index keys, each role's AWS actions, the scaling metric, the metric names. Written to
infra/tests/code_facts.json (`python -m tests.infra.code_facts`), so that Terraform's own tests
read the code's rules instead of a second copy typed by hand; test_terraform_tests.py fails
when the file is stale."""

import json
import sys
from pathlib import Path
from typing import Any

from adapters.cloudwatch import iam as cloudwatch_iam
from adapters.cloudwatch import schema as cloudwatch_schema
from adapters.dynamodb import iam as dynamodb_iam
from adapters.dynamodb.schema import TableNames
from adapters.dynamodb.tables import table_definitions
from adapters.sqs import iam as sqs_iam
from application.ports.metrics import CATALOGUE

FACTS = Path(__file__).resolve().parents[2] / "infra" / "tests" / "code_facts.json"
_TERRAFORM_TABLES = {"wsfleet-connections": "connections", "wsfleet-connection-events": "events",
                     "wsfleet-messages": "messages", "wsfleet-sessions": "sessions"}  # fmt: skip


def _keys(schema: list[dict[str, str]]) -> dict[str, str | None]:
    by_type = {key["KeyType"]: key["AttributeName"] for key in schema}
    return {"hash_key": by_type["HASH"], "range_key": by_type.get("RANGE")}


def facts() -> dict[str, Any]:
    tables: dict[str, Any] = {}
    for definition in table_definitions(TableNames()):
        tables[_TERRAFORM_TABLES[definition["TableName"]]] = {
            **_keys(definition["KeySchema"]),
            "indexes": {
                index["IndexName"]: _keys(index["KeySchema"])
                for index in definition.get("GlobalSecondaryIndexes", [])
            },
        }
    roles = {
        "worker": (dynamodb_iam.WORKER, sqs_iam.WORKER, cloudwatch_iam.WORKER),
        "router": (dynamodb_iam.ROUTER, sqs_iam.ROUTER, cloudwatch_iam.ROUTER),
        "deaths": (dynamodb_iam.DEATHS, sqs_iam.DEATHS, cloudwatch_iam.DEATHS),
        "operator": (dynamodb_iam.OPERATOR, sqs_iam.OPERATOR, ()),
    }
    iam = {
        role: sorted({a for actions in dynamodb.values() for a in actions} | {*sqs, *cloudwatch})
        for role, (dynamodb, sqs, cloudwatch) in roles.items()
    }
    return {
        "tables": tables,
        "iam_actions": iam,
        "metrics_namespace": cloudwatch_schema.DEFAULT_NAMESPACE,
        "metrics_dimension": cloudwatch_schema.SERVICE_DIMENSION,
        "autoscaling_metric": cloudwatch_schema.AUTOSCALING_METRIC,
        "autoscaling_statistic": cloudwatch_schema.AUTOSCALING_STATISTIC,
        "metrics": sorted(spec.name for spec in CATALOGUE),
    }


def render() -> str:
    return json.dumps(facts(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
