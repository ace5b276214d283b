# Known deaths on ECS (docs/supervision.md): when a task of the worker service STOPS, ECS says
# so within seconds; this rule hands the event to the deaths Lambda, which ends the sessions of
# the task's workers and hints their connections, so the survivors take them at once instead of
# when the session lease runs out. The handler ships in the router's package.

locals {
  deaths_handler = "entrypoints.lambda_deaths.handler.handler"
  deaths_only_environment = {
    WSFLEET_WORKER_CLUSTER_ARN = aws_ecs_cluster.main.arn
    WSFLEET_WORKER_SERVICE     = aws_ecs_service.worker.name
  }
  deaths_environment = merge(local.shared_environment, local.deaths_only_environment)
}

resource "aws_cloudwatch_log_group" "deaths" {
  #checkov:skip=CKV_AWS_338:Operational logs; retention is var.log_retention_days (30 by default) to bound cost; raise it where policy demands a year.
  name              = local.log_group_names.deaths
  retention_in_days = var.log_retention_days
  kms_key_id        = local.kms_key_arn
}

resource "aws_lambda_function" "deaths" {
  #checkov:skip=CKV_AWS_116:Invoked asynchronously by EventBridge, whose target retries and keeps failed events in its own dead-letter queue (aws_cloudwatch_event_target.deaths).
  #checkov:skip=CKV_AWS_117:It only calls DynamoDB and SQS; outside a VPC it needs no NAT or endpoints.
  #checkov:skip=CKV_AWS_50:Tracing is OpenTelemetry's job in wsfleet (the X-Ray SDK reaches end of support); enable X-Ray here if you use it.
  #checkov:skip=CKV_AWS_272:The package is built from this repository by `make lambda-zip`; add a signing profile if your pipeline signs artifacts.
  function_name                  = "${var.name}-deaths"
  role                           = aws_iam_role.deaths.arn
  handler                        = local.deaths_handler
  runtime                        = local.router_runtime
  architectures                  = [var.router_architecture]
  filename                       = var.router_zip_path
  source_code_hash               = filebase64sha256(var.router_zip_path)
  memory_size                    = var.router_memory_mb
  timeout                        = var.router_timeout_s
  reserved_concurrent_executions = -1
  kms_key_arn                    = local.kms_key_arn

  environment {
    variables = local.deaths_environment
  }

  logging_config {
    log_format = "Text" # the handler writes its own JSON lines
    log_group  = aws_cloudwatch_log_group.deaths.name
  }
}

# Only STOPPED tasks of this cluster's worker service (the handler checks again).
resource "aws_cloudwatch_event_rule" "worker_task_stopped" {
  name        = "${var.name}-worker-task-stopped"
  description = "A wsfleet worker task stopped: end its sessions at once"
  event_pattern = jsonencode({
    source        = ["aws.ecs"]
    "detail-type" = ["ECS Task State Change"]
    detail = {
      clusterArn = [aws_ecs_cluster.main.arn]
      group      = ["service:${aws_ecs_service.worker.name}"]
      lastStatus = ["STOPPED"]
    }
  })
}

# Events the Lambda could not handle in time (14 days to look at them). SQS-managed keys:
# EventBridge can write without a grant in the stack's key policy, and a task-state event holds
# nothing secret (ARNs and a stop reason).
resource "aws_sqs_queue" "deaths_dlq" {
  name                      = "${var.name}-deaths-dlq"
  message_retention_seconds = 1209600
  sqs_managed_sse_enabled   = true
}

data "aws_iam_policy_document" "deaths_dlq" {
  statement {
    sid       = "EventBridgeDeadLetters"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.deaths_dlq.arn]
    principals {
      type        = "Service"
      identifiers = ["events.amazonaws.com"]
    }
    condition {
      test     = "ArnEquals"
      variable = "aws:SourceArn"
      values   = [aws_cloudwatch_event_rule.worker_task_stopped.arn]
    }
  }
}

resource "aws_sqs_queue_policy" "deaths_dlq" {
  queue_url = aws_sqs_queue.deaths_dlq.id
  policy    = data.aws_iam_policy_document.deaths_dlq.json
}

resource "aws_cloudwatch_event_target" "deaths" {
  rule = aws_cloudwatch_event_rule.worker_task_stopped.name
  arn  = aws_lambda_function.deaths.arn

  # A late end is worth little (the session expires anyway within a lease): retry briefly.
  retry_policy {
    maximum_event_age_in_seconds = 300
    maximum_retry_attempts       = 3
  }

  dead_letter_config {
    arn = aws_sqs_queue.deaths_dlq.arn
  }
}

resource "aws_lambda_permission" "deaths_events" {
  statement_id  = "AllowEventBridgeInvoke"
  action        = "lambda:InvokeFunction"
  function_name = aws_lambda_function.deaths.function_name
  principal     = "events.amazonaws.com"
  source_arn    = aws_cloudwatch_event_rule.worker_task_stopped.arn
}

# --- The deaths Lambda's role: exactly adapters/*/iam.py DEATHS, on this stack's resources ------

resource "aws_iam_role" "deaths" {
  name               = "${var.name}-deaths"
  assume_role_policy = data.aws_iam_policy_document.lambda_assume.json
}

data "aws_iam_policy_document" "deaths" {
  statement {
    sid       = "SessionsTable"
    actions   = ["dynamodb:GetItem", "dynamodb:Scan", "dynamodb:UpdateItem"]
    resources = [aws_dynamodb_table.sessions.arn]
  }

  statement {
    sid       = "OwnerIndex"
    actions   = ["dynamodb:Query"]
    resources = ["${aws_dynamodb_table.connections.arn}/index/${local.owner_index_name}"]
  }

  statement {
    sid       = "EventsTable"
    actions   = ["dynamodb:PutItem"]
    resources = [aws_dynamodb_table.events.arn]
  }

  statement {
    sid       = "HintQueue"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.hints.arn]
  }

  statement {
    sid       = "StackKeyThroughDynamoDbAndSqs"
    actions   = ["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"]
    resources = [local.kms_key_arn]
    condition {
      test     = "StringEquals"
      variable = "kms:ViaService"
      values   = local.kms_via_services
    }
  }

  statement {
    sid       = "WriteDeathsLogs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.deaths.arn}:*"]
  }
}

resource "aws_iam_role_policy" "deaths" {
  name   = "wsfleet-deaths"
  role   = aws_iam_role.deaths.id
  policy = data.aws_iam_policy_document.deaths.json
}
