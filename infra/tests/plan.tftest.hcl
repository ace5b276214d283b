# `terraform test` offline: the whole root module planned against a mocked AWS provider (no
# credentials, no calls), asserting what matters at plan time against the code's own rules in
# code_facts.json (generated from the code by `python -m tests.infra.code_facts`; a pytest
# check keeps it current). `make test` runs it through tests/infra/test_terraform_tests.py.

# Runs that assert on ARNs (roles, alarms, the dashboard that embeds them) apply against the
# mock: nothing leaves the machine, and computed values are known. The provider validates
# ARNs, so the mocked ones are well-formed.
mock_provider "aws" {
  mock_resource "aws_iam_role" {
    defaults = { arn = "arn:aws:iam::123456789012:role/mock" }
  }
  mock_resource "aws_kms_key" {
    defaults = { arn = "arn:aws:kms:eu-west-1:123456789012:key/00000000-0000-0000-0000-000000000000" }
  }
  mock_resource "aws_sqs_queue" {
    defaults = { arn = "arn:aws:sqs:eu-west-1:123456789012:mock", url = "https://sqs.eu-west-1.amazonaws.com/123456789012/mock" }
  }
  mock_resource "aws_dynamodb_table" {
    defaults = { arn = "arn:aws:dynamodb:eu-west-1:123456789012:table/mock" }
  }
  mock_resource "aws_cloudwatch_log_group" {
    defaults = { arn = "arn:aws:logs:eu-west-1:123456789012:log-group:mock" }
  }
  mock_resource "aws_lambda_function" {
    defaults = {
      arn        = "arn:aws:lambda:eu-west-1:123456789012:function:mock"
      invoke_arn = "arn:aws:apigateway:eu-west-1:lambda:path/2015-03-31/functions/arn:aws:lambda:eu-west-1:123456789012:function:mock/invocations"
    }
  }
  mock_resource "aws_cloudwatch_event_rule" {
    defaults = { arn = "arn:aws:events:eu-west-1:123456789012:rule/mock" }
  }
  mock_resource "aws_ecs_cluster" {
    defaults = { arn = "arn:aws:ecs:eu-west-1:123456789012:cluster/mock" }
  }
  mock_resource "aws_api_gateway_rest_api" {
    defaults = { execution_arn = "arn:aws:execute-api:eu-west-1:123456789012:mock" }
  }
  mock_resource "aws_cloudwatch_metric_alarm" {
    defaults = { arn = "arn:aws:cloudwatch:eu-west-1:123456789012:alarm:mock" }
  }

  mock_data "aws_caller_identity" {
    defaults = { account_id = "123456789012" }
  }
  mock_data "aws_region" {
    defaults = { id = "eu-west-1", name = "eu-west-1" }
  }
  mock_data "aws_partition" {
    defaults = { partition = "aws" }
  }
  mock_data "aws_iam_policy_document" {
    defaults = { json = "{\"Version\":\"2012-10-17\",\"Statement\":[]}" }
  }
}

variables {
  region           = "eu-west-1"
  vpc_id           = "vpc-0123456789abcdef0"
  subnet_ids       = ["subnet-0123456789abcdef0"]
  worker_image_tag = "test"
  alarm_actions    = ["arn:aws:sns:eu-west-1:123456789012:wsfleet-ops"]
  min_tasks        = 2
  max_tasks        = 7
  # Any existing file: the Lambda package is only hashed at plan time.
  router_zip_path = "README.md"
}

run "tables_and_index_keys" {
  command = plan

  assert {
    condition = alltrue([
      for name, table in jsondecode(file("${path.module}/tests/code_facts.json")).tables :
      {
        connections = aws_dynamodb_table.connections
        events      = aws_dynamodb_table.events
        messages    = aws_dynamodb_table.messages
        sessions    = aws_dynamodb_table.sessions
      }[name].hash_key == table.hash_key
    ])
    error_message = "A table's partition key is not the one the code reads."
  }

  assert {
    condition = alltrue([
      for name, table in jsondecode(file("${path.module}/tests/code_facts.json")).tables :
      try({
        connections = aws_dynamodb_table.connections
        events      = aws_dynamodb_table.events
        messages    = aws_dynamodb_table.messages
        sessions    = aws_dynamodb_table.sessions
      }[name].range_key, null) == table.range_key
    ])
    error_message = "A table's sort key is not the one the code reads."
  }

  # Compared key by key: an index without a sort key has a null range_key, and objects whose
  # attributes differ in type (string, null) never compare equal as a whole.
  assert {
    condition = alltrue([
      for name, keys in jsondecode(file("${path.module}/tests/code_facts.json")).tables.connections.indexes :
      anytrue([
        for index in aws_dynamodb_table.connections.global_secondary_index :
        index.name == name && index.hash_key == keys.hash_key && index.range_key == keys.range_key
      ])
    ])
    error_message = "An index's name or keys differ from adapters/dynamodb/tables.py."
  }

  assert {
    condition = length([
      for index in aws_dynamodb_table.connections.global_secondary_index : index.name
    ]) == length(jsondecode(file("${path.module}/tests/code_facts.json")).tables.connections.indexes)
    error_message = "The connections table has indexes adapters/dynamodb/tables.py does not create."
  }
}

run "iam_actions_per_role" {
  command = apply

  # Exactly the DynamoDB, SQS and CloudWatch actions the adapters call (adapters/*/iam.py);
  # KMS, logs and ECR are the platform's and checked by tests/infra in Python.
  assert {
    condition = toset([
      for action in flatten([for s in data.aws_iam_policy_document.worker.statement : s.actions]) :
      action if !can(regex("^(kms|logs|ecr):", action))
    ]) == toset(jsondecode(file("${path.module}/tests/code_facts.json")).iam_actions.worker)
    error_message = "The worker role's actions differ from what the adapters call."
  }

  assert {
    condition = toset([
      for action in flatten([for s in data.aws_iam_policy_document.router.statement : s.actions]) :
      action if !can(regex("^(kms|logs|ecr):", action))
    ]) == toset(jsondecode(file("${path.module}/tests/code_facts.json")).iam_actions.router)
    error_message = "The router role's actions differ from what the adapters call."
  }

  assert {
    condition = toset([
      for action in flatten([for s in data.aws_iam_policy_document.deaths.statement : s.actions]) :
      action if !can(regex("^(kms|logs|ecr):", action))
    ]) == toset(jsondecode(file("${path.module}/tests/code_facts.json")).iam_actions.deaths)
    error_message = "The deaths Lambda role's actions differ from what the use case calls."
  }

  assert {
    condition     = aws_lambda_function.deaths.role == aws_iam_role.deaths.arn
    error_message = "The deaths Lambda does not run under its own role."
  }

  assert {
    condition = toset([
      for action in flatten([for s in data.aws_iam_policy_document.operator.statement : s.actions]) :
      action if !can(regex("^(kms|logs|ecr):", action))
    ]) == toset(jsondecode(file("${path.module}/tests/code_facts.json")).iam_actions.operator)
    error_message = "The operator policy's actions differ from what `wsfleet status` calls."
  }

  assert {
    condition     = aws_iam_role_policy.worker.role == aws_iam_role.worker.id
    error_message = "The worker's policy is not attached to the worker's task role."
  }

  assert {
    condition     = aws_ecs_task_definition.worker.task_role_arn == aws_iam_role.worker.arn
    error_message = "The task definition does not run the worker under its own role."
  }

  assert {
    condition     = aws_lambda_function.router.role == aws_iam_role.router.arn
    error_message = "The Lambda router does not run under the router role."
  }
}

run "autoscaling_target" {
  command = apply

  assert {
    condition     = aws_appautoscaling_target.worker.resource_id == "service/${aws_ecs_cluster.main.name}/${aws_ecs_service.worker.name}"
    error_message = "The scaling target is not the worker service."
  }

  assert {
    condition = (
      aws_appautoscaling_target.worker.min_capacity == 2 &&
      aws_appautoscaling_target.worker.max_capacity == 7 &&
      aws_appautoscaling_target.worker.scalable_dimension == "ecs:service:DesiredCount"
    )
    error_message = "The scaling target does not follow min_tasks/max_tasks."
  }

  assert {
    condition = alltrue([
      for spec in flatten([
        for config in aws_appautoscaling_policy.worker_connections.target_tracking_scaling_policy_configuration :
        config.customized_metric_specification
      ]) :
      spec.namespace == jsondecode(file("${path.module}/tests/code_facts.json")).metrics_namespace &&
      spec.metric_name == jsondecode(file("${path.module}/tests/code_facts.json")).autoscaling_metric &&
      spec.statistic == jsondecode(file("${path.module}/tests/code_facts.json")).autoscaling_statistic &&
      one(spec.dimensions).value == aws_ecs_service.worker.name
    ])
    error_message = "The scaling policy does not track the metric the workers publish."
  }
}

run "alarms_and_dashboard_wiring" {
  command = apply

  assert {
    condition = alltrue([
      for alarm in [
        aws_cloudwatch_metric_alarm.worker_not_storing,
        aws_cloudwatch_metric_alarm.rejected_upstream_messages,
        aws_cloudwatch_metric_alarm.orphans,
        aws_cloudwatch_metric_alarm.leases_lost,
        aws_cloudwatch_metric_alarm.acquisition_conflicts,
      ] :
      contains(jsondecode(file("${path.module}/tests/code_facts.json")).metrics, alarm.metric_name) &&
      alarm.namespace == jsondecode(file("${path.module}/tests/code_facts.json")).metrics_namespace &&
      alarm.dimensions == tomap({ ServiceName = aws_ecs_service.worker.name })
    ])
    error_message = "An alarm watches a metric, namespace or dimension the workers do not publish."
  }

  assert {
    condition = alltrue([
      for alarm in [
        aws_cloudwatch_metric_alarm.worker_not_storing,
        aws_cloudwatch_metric_alarm.rejected_upstream_messages,
        aws_cloudwatch_metric_alarm.dlq_not_empty,
      ] :
      alarm.alarm_actions == toset(var.alarm_actions) && alarm.ok_actions == toset(var.alarm_actions)
    ])
    error_message = "An alarm does not notify var.alarm_actions."
  }

  assert {
    condition     = aws_cloudwatch_metric_alarm.dlq_not_empty.dimensions.QueueName == aws_sqs_queue.hints_dlq.name
    error_message = "The DLQ alarm does not watch the DLQ."
  }

  # Every WsFleet metric on the dashboard is a catalogue metric under the service's dimension.
  assert {
    condition = alltrue([
      for row in concat([
        for widget in jsondecode(aws_cloudwatch_dashboard.fleet.dashboard_body).widgets :
        widget.properties.metrics if widget.type == "metric"
      ]...) :
      row[0] != "WsFleet" || (
        contains(jsondecode(file("${path.module}/tests/code_facts.json")).metrics, row[1]) &&
        row[2] == "ServiceName" && row[3] == aws_ecs_service.worker.name
      )
    ])
    error_message = "The dashboard graphs a metric the workers do not publish, or under another dimension."
  }

  assert {
    condition = contains([
      for row in concat([
        for widget in jsondecode(aws_cloudwatch_dashboard.fleet.dashboard_body).widgets :
        widget.properties.metrics if widget.type == "metric"
      ]...) : "${row[0]}/${row[1]}/${row[3]}"
    ], "AWS/SQS/ApproximateNumberOfMessagesVisible/${aws_sqs_queue.hints_dlq.name}")
    error_message = "The dashboard does not show the DLQ's depth."
  }

  assert {
    condition = contains([
      for row in concat([
        for widget in jsondecode(aws_cloudwatch_dashboard.fleet.dashboard_body).widgets :
        widget.properties.metrics if widget.type == "metric"
      ]...) : "${row[0]}/${row[1]}/${row[3]}"
    ], "AWS/Lambda/Errors/${aws_lambda_function.router.function_name}")
    error_message = "The dashboard does not show the Lambda router's errors."
  }

  assert {
    condition = contains(
      concat([
        for widget in jsondecode(aws_cloudwatch_dashboard.fleet.dashboard_body).widgets :
        widget.properties.alarms if widget.type == "alarm"
      ]...),
      aws_cloudwatch_metric_alarm.worker_not_storing.arn
    )
    error_message = "The dashboard's alarm widget does not show the not-storing alarm."
  }
}

run "extra_worker_policy_statements" {
  command = apply

  variables {
    worker_extra_policy_statements = [
      { sid = "TeamSink", actions = ["s3:PutObject"], resources = ["arn:aws:s3:::team-bucket/*"] },
    ]
  }

  assert {
    condition     = aws_iam_role_policy.worker_extra[0].role == aws_iam_role.worker.id
    error_message = "The extra statements are not attached to the worker's task role."
  }

  assert {
    condition     = one(data.aws_iam_policy_document.worker_extra[0].statement).actions == toset(["s3:PutObject"])
    error_message = "The extra statement's actions were not granted as given."
  }

  assert {
    condition     = one(data.aws_iam_policy_document.worker_extra[0].statement).resources == toset(["arn:aws:s3:::team-bucket/*"])
    error_message = "The extra statement's resources were not granted as given."
  }
}

run "no_extra_worker_policy_by_default" {
  command = plan

  assert {
    condition     = length(aws_iam_role_policy.worker_extra) == 0
    error_message = "An extra worker policy exists without extra statements."
  }
}

run "extra_statements_must_name_their_actions" {
  command = plan

  variables {
    worker_extra_policy_statements = [{ actions = ["s3:*"], resources = ["*"] }]
  }

  expect_failures = [var.worker_extra_policy_statements]
}
