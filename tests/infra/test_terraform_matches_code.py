"""infra/ Terraform against the code it deploys: one source of truth, imported from the code.

Table keys, the orphan index and TTL come from adapters/dynamodb/tables.py; queue settings
from adapters/sqs/schema.py; metric names, namespace and dimension from application/ports/
metrics.py and adapters/cloudwatch/schema.py; environment variables from the settings table;
IAM actions from adapters/*/iam.py. Offline: python-hcl2 parses the files, nothing is applied.
"""

import importlib
import importlib.util
from collections import defaultdict
from typing import Any

import attrs
import pytest

from adapters.cloudwatch import iam as cloudwatch_iam
from adapters.cloudwatch import schema as cloudwatch_schema
from adapters.dynamodb import iam as dynamodb_iam
from adapters.dynamodb import schema as dynamodb_schema
from adapters.dynamodb.schema import TableNames
from adapters.dynamodb.tables import table_definitions, ttl_definitions
from adapters.kinesis import iam as kinesis_iam
from adapters.sqs import iam as sqs_iam
from adapters.sqs import schema as sqs_schema
from application.config import WorkerConfig
from application.ports import metrics as metric_names
from entrypoints.settings import load_settings
from entrypoints.settings.table import BY_NAME, ROUTER, WORKER
from tests.infra.terraform import Terraform, blocks, expression, load

TF_TABLES = {
    "connections": "connections",
    "events": "events",
    "messages": "messages",
    "sessions": "sessions",
}
_DYNAMODB_RESOURCES = {
    "${aws_dynamodb_table.connections.arn}": dynamodb_iam.CONNECTIONS,
    "${aws_dynamodb_table.connections.arn}/index/${local.orphan_index_name}": (
        dynamodb_iam.ORPHAN_INDEX
    ),
    "${aws_dynamodb_table.connections.arn}/index/${local.owner_index_name}": (
        dynamodb_iam.OWNER_INDEX
    ),
    "${aws_dynamodb_table.connections.arn}/index/${local.stop_index_name}": dynamodb_iam.STOP_INDEX,
    "${aws_dynamodb_table.sessions.arn}": dynamodb_iam.SESSIONS,
    "${aws_dynamodb_table.events.arn}": dynamodb_iam.EVENTS,
    "${aws_dynamodb_table.messages.arn}": dynamodb_iam.MESSAGES,
}
_QUEUE, _ANY, _KEY, _LOGS, _STREAM = "queue", "*", "kms key", "own log group", "kinesis stream"
_OTHER_RESOURCES = {
    "${local.kinesis_stream_arn}": _STREAM,
    "${aws_sqs_queue.hints.arn}": _QUEUE,
    "*": _ANY,
    "${local.kms_key_arn}": _KEY,
    "${aws_cloudwatch_log_group.router.arn}:*": _LOGS,
    "${aws_cloudwatch_log_group.deaths.arn}:*": _LOGS,
}
# KMS through DynamoDB and SQS: what their server-side encryption needs from the caller.
_KMS_ACTIONS = {"kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"}


@pytest.fixture(scope="module")
def tf() -> Terraform:
    return load()


def _table_for(tf: Terraform, table_name: str) -> dict[str, Any]:
    for _, body in tf.resources_of("aws_dynamodb_table"):
        if tf.evaluate(body["name"]) == table_name:
            return body
    raise AssertionError(f"no aws_dynamodb_table named {table_name!r} (at the defaults)")


def _keys(tf: Terraform, hash_key: Any, range_key: Any) -> list[dict[str, str]]:
    keys = [{"AttributeName": tf.evaluate(hash_key), "KeyType": "HASH"}]
    if range_key is not None:
        keys.append({"AttributeName": tf.evaluate(range_key), "KeyType": "RANGE"})
    return keys


@pytest.mark.parametrize(
    "definition", table_definitions(TableNames()), ids=lambda d: str(d["TableName"])
)
def test_tables_have_the_keys_attributes_and_index_the_code_creates(
    tf: Terraform, definition: dict[str, Any]
) -> None:
    table = _table_for(tf, definition["TableName"])
    assert _keys(tf, table["hash_key"], table.get("range_key")) == definition["KeySchema"]
    attributes = {(tf.evaluate(a["name"]), a["type"]) for a in table["attribute"]}
    expected = {
        (a["AttributeName"], a["AttributeType"]) for a in definition["AttributeDefinitions"]
    }
    assert attributes == expected
    indexes = {
        tf.evaluate(i["name"]): (
            _keys(tf, i["hash_key"], i.get("range_key")),
            {"ProjectionType": i["projection_type"]},
        )
        for i in table.get("global_secondary_index", [])
    }
    expected_indexes = {
        i["IndexName"]: (i["KeySchema"], i["Projection"])
        for i in definition.get("GlobalSecondaryIndexes", [])
    }
    assert indexes == expected_indexes
    assert tf.evaluate(table["billing_mode"]) == definition["BillingMode"]


def test_table_name_defaults_are_the_code_defaults(tf: Terraform) -> None:
    assert tf.default("connections_table_name") == dynamodb_schema.DEFAULT_CONNECTIONS_TABLE
    assert tf.default("events_table_name") == dynamodb_schema.DEFAULT_EVENTS_TABLE
    assert tf.default("messages_table_name") == dynamodb_schema.DEFAULT_MESSAGES_TABLE
    assert tf.default("sessions_table_name") == dynamodb_schema.DEFAULT_SESSIONS_TABLE
    assert tf.default("orphan_shards") == dynamodb_schema.DEFAULT_ORPHAN_SHARDS


def test_ttl_is_on_exactly_the_tables_and_attribute_the_code_expires(tf: Terraform) -> None:
    expected = {
        d["TableName"]: d["TimeToLiveSpecification"]["AttributeName"]
        for d in ttl_definitions(TableNames())
        if d["TimeToLiveSpecification"]["Enabled"]
    }
    actual = {
        tf.evaluate(body["name"]): tf.evaluate(ttl["attribute_name"])
        for _, body in tf.resources_of("aws_dynamodb_table")
        for ttl in body.get("ttl", [])
        if ttl.get("enabled") is True
    }
    assert actual == expected
    assert tf.evaluate("${local.ttl_attribute}") == dynamodb_schema.EXPIRES_AT


def test_hint_queue_has_the_adapters_settings(tf: Terraform) -> None:
    queue = tf.resource("aws_sqs_queue", "hints")
    dlq = tf.resource("aws_sqs_queue", "hints_dlq")
    assert tf.default("queue_name") == sqs_schema.DEFAULT_QUEUE_NAME
    assert tf.evaluate(dlq["name"]) == sqs_schema.DEFAULT_QUEUE_NAME + sqs_schema.DLQ_SUFFIX
    assert tf.evaluate(queue["visibility_timeout_seconds"]) == (
        sqs_schema.DEFAULT_VISIBILITY_TIMEOUT_S
    )
    assert tf.evaluate(queue["receive_wait_time_seconds"]) == sqs_schema.MAX_WAIT_S
    assert tf.evaluate(queue["message_retention_seconds"]) == sqs_schema.MESSAGE_RETENTION_S
    assert tf.evaluate("${local.queue_max_receive_count}") == sqs_schema.MAX_RECEIVE_COUNT
    assert "local.queue_max_receive_count" in queue["redrive_policy"]
    for encrypted in (queue, dlq):
        assert encrypted["kms_master_key_id"] == "${local.kms_key_arn}"


def _environment(tf: Terraform, *locals_: str) -> dict[str, str]:
    merged: dict[str, str] = {}
    for name in locals_:
        merged.update({k: tf.evaluate(v) for k, v in tf.locals[name].items()})
    return merged


def test_worker_and_router_get_the_environments_defined_for_them(tf: Terraform) -> None:
    assert expression(tf.locals["worker_environment"]) == (
        "merge(var.worker_extra_environment, local.shared_environment, "
        "local.kinesis_environment, local.worker_only_environment)"
    ), "the stack's own settings must come last, so extras cannot override them"
    assert tf.locals["worker_container"]["environment"].count("local.worker_environment") == 2
    router = tf.resource("aws_lambda_function", "router")
    assert router["environment"] == [{"variables": "${local.shared_environment}"}]


@pytest.mark.parametrize(
    ("process", "locals_"),
    [
        (WORKER, ("shared_environment", "worker_only_environment")),
        (ROUTER, ("shared_environment",)),
        (ROUTER, ("shared_environment", "deaths_only_environment")),
    ],
)
def test_every_environment_variable_is_a_setting_the_process_reads(
    tf: Terraform, process: str, locals_: tuple[str, ...]
) -> None:
    for name in _environment(tf, *locals_):
        assert name in BY_NAME, f"{name} is not in entrypoints/settings/table.py"
        assert process in BY_NAME[name].used_by, f"the {process} does not read {name}"


@pytest.mark.parametrize(
    ("process", "locals_"),
    [
        (WORKER, ("shared_environment", "worker_only_environment")),
        (ROUTER, ("shared_environment",)),
        (ROUTER, ("shared_environment", "deaths_only_environment")),
    ],
)
def test_environments_load_as_valid_aws_settings(
    tf: Terraform, process: str, locals_: tuple[str, ...]
) -> None:
    """The values Terraform sets (variables at their defaults) pass the process's own loader,
    including what the aws backend requires."""
    env = _environment(tf, *locals_)
    settings = load_settings(env, aws=True)
    assert settings.connections_table == dynamodb_schema.DEFAULT_CONNECTIONS_TABLE
    assert settings.orphan_shards == dynamodb_schema.DEFAULT_ORPHAN_SHARDS
    if process == WORKER:
        assert settings.backend == "aws"
        assert settings.metrics_namespace == cloudwatch_schema.DEFAULT_NAMESPACE
        assert settings.hint_visibility_timeout_s == sqs_schema.DEFAULT_VISIBILITY_TIMEOUT_S
        assert settings.health_port == tf.default("health_port")


def test_worker_tuning_defaults_are_the_code_defaults(tf: Terraform) -> None:
    config = attrs.asdict(WorkerConfig())
    for field in (
        "lease_ms",
        "heartbeat_interval_s",
        "desired_state_interval_s",
        "reconcile_interval_s",
        "max_connections",
        "shutdown_budget_s",
    ):
        assert tf.default(field) == config[field], field
    assert BY_NAME["WSFLEET_HEALTH_PORT"].default == tf.default("health_port")


def test_graceful_shutdown_fits_within_the_stop_timeout(tf: Terraform) -> None:
    container = tf.locals["worker_container"]
    assert container["stopTimeout"] == "${var.stop_timeout_s}"
    assert tf.default("shutdown_budget_s") + 5 <= tf.default("stop_timeout_s") <= 120
    assert tf.default("target_connections_per_task") < tf.default("max_connections")


def test_scaling_policy_tracks_the_metric_the_adapter_publishes(tf: Terraform) -> None:
    policy = tf.resource("aws_appautoscaling_policy", "worker_connections")
    (config,) = policy["target_tracking_scaling_policy_configuration"]
    (metric,) = config["customized_metric_specification"]
    assert tf.evaluate(metric["namespace"]) == cloudwatch_schema.DEFAULT_NAMESPACE
    assert metric["metric_name"] == cloudwatch_schema.AUTOSCALING_METRIC
    assert metric["statistic"] == cloudwatch_schema.AUTOSCALING_STATISTIC
    (dimension,) = metric["dimensions"]
    assert tf.evaluate(dimension["name"]) == cloudwatch_schema.SERVICE_DIMENSION
    # The dimension's value is the service name every worker publishes under.
    assert dimension["value"] == tf.locals["shared_environment"]["WSFLEET_SERVICE_NAME"]
    service = tf.resource("aws_ecs_service", "worker")
    assert service["name"] == dimension["value"]


def test_alarms_watch_metrics_the_code_records(tf: Terraform) -> None:
    recorded = {v for k, v in vars(metric_names).items() if k.isupper() and isinstance(v, str)}
    ours = {
        body["metric_name"]
        for _, body in tf.resources_of("aws_cloudwatch_metric_alarm")
        if "namespace" in body
        and tf.evaluate(body["namespace"]) == cloudwatch_schema.DEFAULT_NAMESPACE
    }
    assert ours <= recorded
    assert {
        metric_names.ORPHANS_FOUND,
        metric_names.LEASES_LOST,
        metric_names.ACQUISITION_CONFLICTS,
    } <= ours
    for _, body in tf.resources_of("aws_cloudwatch_metric_alarm"):
        if body.get("metric_name") in ours:
            assert body["dimensions"] == "${local.service_dimensions}"
    dimensions = tf.locals["service_dimensions"]
    assert dimensions == {"${(local.metrics_dimension)}": "${local.service_name}"}
    assert tf.evaluate("${local.metrics_dimension}") == cloudwatch_schema.SERVICE_DIMENSION
    dlq_alarm = tf.resource("aws_cloudwatch_metric_alarm", "dlq_not_empty")
    assert dlq_alarm["dimensions"] == {"QueueName": "${aws_sqs_queue.hints_dlq.name}"}


def _grants(tf: Terraform, document: str) -> tuple[dict[str, set[str]], list[dict[str, Any]]]:
    """Actions allowed per resource key, and the statements (for their conditions)."""
    grants: dict[str, set[str]] = defaultdict(set)
    statements = blocks(tf.policy_document(document), "statement")
    for statement in statements:
        assert statement.get("effect", "Allow") == "Allow"
        for resource in statement["resources"]:
            key = _DYNAMODB_RESOURCES.get(resource) or _OTHER_RESOURCES.get(resource)
            assert key, f"{document}: unexpected resource {resource}"
            grants[key].update(statement["actions"])
    return grants, statements


@pytest.mark.parametrize(
    ("document", "dynamodb", "sqs", "cloudwatch", "kinesis"),
    [
        ("worker", dynamodb_iam.WORKER, sqs_iam.WORKER, cloudwatch_iam.WORKER, kinesis_iam.WORKER),
        ("router", dynamodb_iam.ROUTER, sqs_iam.ROUTER, cloudwatch_iam.ROUTER, kinesis_iam.ROUTER),
        ("deaths", dynamodb_iam.DEATHS, sqs_iam.DEATHS, cloudwatch_iam.DEATHS, kinesis_iam.DEATHS),
        ("operator", dynamodb_iam.OPERATOR, sqs_iam.OPERATOR, (), kinesis_iam.OPERATOR),
    ],
)
def test_roles_grant_exactly_the_actions_the_adapters_call(
    tf: Terraform,
    document: str,
    dynamodb: dynamodb_iam.Grants,
    sqs: tuple[str, ...],
    cloudwatch: tuple[str, ...],
    kinesis: tuple[str, ...],
) -> None:
    grants, statements = _grants(tf, document)
    tables = {
        key: actions for key, actions in grants.items() if key in _DYNAMODB_RESOURCES.values()
    }
    assert tables == {key: set(actions) for key, actions in dynamodb.items()}
    assert grants.get(_QUEUE, set()) == set(sqs)
    assert grants.get(_ANY, set()) == set(cloudwatch)
    assert grants.get(_STREAM, set()) == set(kinesis)  # granted only when the sink is chosen
    assert grants.get(_KEY, set()) <= _KMS_ACTIONS
    assert grants.get(_LOGS, set()) <= {"logs:CreateLogStream", "logs:PutLogEvents"}
    for statement in statements:
        conditions = {c["variable"]: c for c in statement.get("condition", [])}
        if "*" in statement["resources"]:
            # PutMetricData cannot be scoped to a resource: the namespace condition scopes it.
            condition = conditions[cloudwatch_iam.NAMESPACE_CONDITION_KEY]
            assert condition["test"] == "StringEquals"
            assert [tf.evaluate(v) for v in condition["values"]] == [
                cloudwatch_schema.DEFAULT_NAMESPACE
            ]
        if "${local.kms_key_arn}" in statement["resources"]:
            assert conditions["kms:ViaService"]["values"] == "${local.kms_via_services}"


def test_no_policy_allows_wildcard_actions_or_resources_beyond_what_aws_requires(
    tf: Terraform,
) -> None:
    # Only these actions have no resource-level permissions and need resource "*".
    needs_any_resource = {"cloudwatch:PutMetricData", "ecr:GetAuthorizationToken"}
    key_policies = {"kms"}  # a key policy's "*" is the key itself (justified in kms.tf)
    for (type_, name), body in tf.data.items():
        if type_ != "aws_iam_policy_document" or name in key_policies:
            continue
        for statement in blocks(body, "statement"):
            if statement.get("effect", "Allow") == "Deny":
                continue
            assert not any("*" in action for action in statement["actions"]), (name, statement)
            if "*" in statement.get("resources", []):  # trust policies have none
                assert set(statement["actions"]) <= needs_any_resource, (name, statement)


def test_lambda_runs_the_routers_handler_function(tf: Terraform) -> None:
    handler = tf.evaluate(tf.resource("aws_lambda_function", "router")["handler"])
    module_name, _, function = handler.rpartition(".")
    module = importlib.import_module(module_name)
    assert callable(getattr(module, function))
    assert tf.evaluate("${local.router_runtime}") == "python3.11"


def test_the_deaths_lambda_runs_its_handler_under_its_own_role_on_the_worker_service(
    tf: Terraform,
) -> None:
    deaths = tf.resource("aws_lambda_function", "deaths")
    module_name, _, function = tf.evaluate(deaths["handler"]).rpartition(".")
    assert callable(getattr(importlib.import_module(module_name), function))
    assert deaths["role"] == "${aws_iam_role.deaths.arn}"
    assert deaths["filename"] == "${var.router_zip_path}"  # the router's package
    assert deaths["environment"] == [{"variables": "${local.deaths_environment}"}]
    target = tf.resource("aws_cloudwatch_event_target", "deaths")
    assert target["arn"] == "${aws_lambda_function.deaths.arn}"
    pattern = tf.resource("aws_cloudwatch_event_rule", "worker_task_stopped")["event_pattern"]
    for needed in ('"source": ["aws.ecs"]', '"detail-type": ["ECS Task State Change"]',
                   '"clusterArn": ["${aws_ecs_cluster.main.arn}"]',
                   '"group": ["service:${aws_ecs_service.worker.name}"]',
                   '"lastStatus": ["STOPPED"]'):  # fmt: skip
        assert needed in pattern, needed


def test_container_health_check_runs_the_workers_healthcheck_module(tf: Terraform) -> None:
    command = tf.evaluate(tf.locals["worker_container"]["healthCheck"]["command"])
    assert command[:3] == ["CMD", "python", "-m"]
    assert importlib.util.find_spec(command[3]) is not None, command[3]
    assert importlib.util.find_spec("entrypoints.worker.__main__") is not None


def _dashboard_rows(tf: Terraform) -> list[list[Any]]:
    body = tf.resource("aws_cloudwatch_dashboard", "fleet")
    assert body["dashboard_body"] == '${jsonencode({"widgets": "${local.dashboard_widgets}"})}'
    return [
        row
        for widget in tf.locals["dashboard_widgets"]
        if widget["type"] == "metric"
        for row in widget["properties"]["metrics"]
    ]


def test_dashboard_graphs_only_metrics_the_code_records_under_its_dimension(tf: Terraform) -> None:
    catalogue = {spec.name for spec in metric_names.CATALOGUE}
    ours = [row for row in _dashboard_rows(tf) if row[0] == "${local.metrics_namespace}"]
    assert ours
    for row in ours:
        assert row[1] in catalogue, f"the dashboard graphs {row[1]}, which no code records"
        assert row[2:4] == ["${local.metrics_dimension}", "${local.service_name}"], row
    graphed = {row[1] for row in ours}
    assert {
        metric_names.ACTIVE_CONNECTIONS,
        metric_names.TAKEOVERS,
        metric_names.SELF_FENCES,
        metric_names.INGEST_LAG_MS,
        metric_names.SINK_ERRORS,
        metric_names.STORE_ERRORS,
        metric_names.MESSAGES_REJECTED,
        metric_names.HOLDING_WITHOUT_STORING_S,
    } <= graphed
    # Percentiles only of timings (the adapter publishes their distributions).
    timings = {s.name for s in metric_names.CATALOGUE if s.kind is metric_names.Kind.TIMING}
    for row in ours:
        stat = row[-1].get("stat", "") if isinstance(row[-1], dict) else ""
        if stat.startswith("p"):
            assert row[1] in timings, row


def test_dashboard_shows_the_dlq_and_the_router(tf: Terraform) -> None:
    rows = {(row[0], row[1], row[3]) for row in _dashboard_rows(tf)}
    assert (
        "AWS/SQS",
        "ApproximateNumberOfMessagesVisible",
        "${aws_sqs_queue.hints_dlq.name}",
    ) in rows
    assert ("AWS/Lambda", "Errors", "${aws_lambda_function.router.function_name}") in rows


@pytest.mark.parametrize(
    ("alarm", "metric", "statistic"),
    [
        ("worker_not_storing", metric_names.HOLDING_WITHOUT_STORING_S, "Maximum"),
        ("rejected_upstream_messages", metric_names.MESSAGES_REJECTED, "Sum"),
    ],
)
def test_operability_alarms_watch_the_workers_own_metrics(
    tf: Terraform, alarm: str, metric: str, statistic: str
) -> None:
    body = tf.resource("aws_cloudwatch_metric_alarm", alarm)
    assert body["metric_name"] == metric
    assert body["statistic"] == statistic
    assert tf.evaluate(body["namespace"]) == cloudwatch_schema.DEFAULT_NAMESPACE
    assert body["dimensions"] == "${local.service_dimensions}"
    assert body["treat_missing_data"] == "notBreaching"  # no worker, no data: not an outage
    kind = next(s.kind for s in metric_names.CATALOGUE if s.name == metric)
    # Maximum over the service is the worst worker only for a gauge each worker reports.
    assert (kind is metric_names.Kind.GAUGE) == (statistic == "Maximum")


# What infra/tests/plan.tftest.hcl asserts on a plan (`make terraform`), checked here on the
# parsed files too, so that `make test` keeps every one of its facts.


@pytest.mark.parametrize("role", ["worker", "router", "deaths"])
def test_each_roles_policy_is_the_document_checked_above_attached_to_that_role(
    tf: Terraform, role: str
) -> None:
    attached = tf.resource("aws_iam_role_policy", role)
    assert attached["role"] == f"${{aws_iam_role.{role}.id}}"
    assert attached["policy"] == f"${{data.aws_iam_policy_document.{role}.json}}"


def test_the_worker_task_and_the_router_run_under_their_own_roles(tf: Terraform) -> None:
    task = tf.resource("aws_ecs_task_definition", "worker")
    assert task["task_role_arn"] == "${aws_iam_role.worker.arn}"
    router = tf.resource("aws_lambda_function", "router")
    assert router["role"] == "${aws_iam_role.router.arn}"


def test_the_scaling_target_is_the_worker_service_between_min_and_max_tasks(tf: Terraform) -> None:
    target = tf.resource("aws_appautoscaling_target", "worker")
    assert target["service_namespace"] == "ecs"
    assert target["resource_id"] == (
        "service/${aws_ecs_cluster.main.name}/${aws_ecs_service.worker.name}"
    )
    assert target["scalable_dimension"] == "ecs:service:DesiredCount"
    assert (target["min_capacity"], target["max_capacity"]) == (
        "${var.min_tasks}",
        "${var.max_tasks}",
    )
    policy = tf.resource("aws_appautoscaling_policy", "worker_connections")
    for field in ("service_namespace", "resource_id", "scalable_dimension"):
        assert policy[field] == f"${{aws_appautoscaling_target.worker.{field}}}"


@pytest.mark.parametrize(
    "alarm", ["worker_not_storing", "rejected_upstream_messages", "dlq_not_empty"]
)
def test_alarms_notify_the_alarm_actions_when_raised_and_cleared(tf: Terraform, alarm: str) -> None:
    body = tf.resource("aws_cloudwatch_metric_alarm", alarm)
    assert body["alarm_actions"] == "${var.alarm_actions}"
    assert body["ok_actions"] == "${var.alarm_actions}"


def test_the_dashboards_alarm_widget_shows_the_not_storing_alarm(tf: Terraform) -> None:
    alarms = [
        alarm
        for widget in tf.locals["dashboard_widgets"]
        if widget["type"] == "alarm"
        for alarm in widget["properties"]["alarms"]
    ]
    assert "${aws_cloudwatch_metric_alarm.worker_not_storing.arn}" in alarms
