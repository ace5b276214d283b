"""Who may touch the stack's logs: every log group is named in one map (locals.tf), the KMS key
admits CloudWatch Logs for exactly those groups, the API Gateway logging role writes only this
API's two groups and reads none, and the operator policy, which reads raw upstream URLs, is
called privileged where it is granted."""

import re

import pytest

from tests.infra.terraform import REPO, Terraform, blocks, load

# Reading log events: what a role that only writes logs must never hold.
_LOG_READS = re.compile(r"^logs:(Get|Filter|StartQuery|StartLiveTail|Unmask)", re.IGNORECASE)


@pytest.fixture(scope="module")
def tf() -> Terraform:
    return load()


def test_every_log_group_takes_its_name_from_the_stacks_one_map(tf: Terraform) -> None:
    names = tf.locals["log_group_names"]
    groups = dict(tf.resources_of("aws_cloudwatch_log_group"))
    assert set(groups) == set(names), "a log group outside local.log_group_names, or the reverse"
    for key, body in groups.items():
        assert body["name"] == f"${{local.log_group_names.{key}}}", key
        assert body["kms_key_id"] == "${local.kms_key_arn}", key
    # The one API Gateway names itself, here made by the stack (encrypted, with a retention).
    assert names["api_execution"] == (
        "API-Gateway-Execution-Logs_${aws_api_gateway_rest_api.router.id}/"
        "${local.router_stage_name}"
    )
    stage = tf.resource("aws_api_gateway_stage", "router")
    assert stage["stage_name"] == "${local.router_stage_name}"
    settings = tf.resource("aws_api_gateway_method_settings", "all")
    assert "${aws_cloudwatch_log_group.api_execution}" in settings["depends_on"]


def test_the_key_admits_cloudwatch_logs_for_exactly_the_stacks_log_groups(tf: Terraform) -> None:
    (statement,) = [
        s
        for s in blocks(tf.policy_document("kms"), "statement")
        if any(p["type"] == "Service" and "logs." in p["identifiers"][0] for p in s["principals"])
    ]
    (condition,) = statement["condition"]
    assert condition["variable"] == "kms:EncryptionContext:aws:logs:arn"
    assert condition["test"] == "ArnEquals", "ArnLike would admit a pattern"
    assert condition["values"] == "${values(local.log_group_arns)}"
    arns = tf.locals["log_group_arns"]
    assert "local.log_group_names" in arns
    assert arns.endswith(':log-group:${name}"}}'), arns  # the exact name, no wildcard
    assert "*" not in arns


def test_the_api_gateway_role_writes_only_this_apis_log_groups_and_reads_none(
    tf: Terraform,
) -> None:
    ours = {
        f"${{local.log_group_arns.{key}}}{suffix}"
        for key in ("api_execution", "api_access")
        for suffix in ("", ":log-stream:*")
    }
    statements = blocks(tf.policy_document("apigateway_logs"), "statement")
    for statement in statements:
        assert not [a for a in statement["actions"] if _LOG_READS.match(a)], statement
        if statement["actions"] == ["logs:DescribeLogGroups"]:
            continue  # a list action: no resource narrower than the region (names only)
        assert set(statement["resources"]) <= ours, statement
    written = {a for s in statements for a in s["actions"]}
    assert {"logs:CreateLogStream", "logs:PutLogEvents"} <= written
    role_policy = tf.resource("aws_iam_role_policy", "apigateway_logs")
    assert role_policy["policy"] == "${data.aws_iam_policy_document.apigateway_logs.json}"


def test_the_operator_policy_reads_raw_urls_and_says_it_is_privileged(tf: Terraform) -> None:
    operator = blocks(tf.policy_document("operator"), "statement")
    reads_connections = any(
        s["resources"] == ["${aws_dynamodb_table.connections.arn}"] for s in operator
    )
    assert reads_connections, "if the operator no longer reads ws_url, say so here and in docs"
    description = tf.resource("aws_iam_policy", "operator")["description"]
    assert "Privileged" in description
    assert "credentials" in description
    deploy = " ".join((REPO / "docs" / "deploy.md").read_text().split())
    assert "`operator_policy_arn` policy attached. **Treat it as privileged**" in deploy
    assert "user info and query tokens included" in deploy
