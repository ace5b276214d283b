# Least privilege. The DynamoDB, SQS and CloudWatch actions of each role are exactly those of
# adapters/{dynamodb,sqs,cloudwatch}/iam.py, on this stack's tables, indexes and queue only
# (tests/infra/test_terraform_matches_code.py compares, statement by statement).

locals {
  # KMS through the services that encrypt with the stack's key, and nothing else.
  kms_via_services = [
    "dynamodb.${local.region}.amazonaws.com",
    "sqs.${local.region}.amazonaws.com",
    "kinesis.${local.region}.amazonaws.com",
  ]
}

# --- Worker task role ----------------------------------------------------------------------------

data "aws_iam_policy_document" "ecs_tasks_assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["ecs-tasks.amazonaws.com"]
    }
    # Only tasks of this account may assume the roles (confused deputy).
    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [local.account_id]
    }
  }
}

resource "aws_iam_role" "worker" {
  name               = "${var.name}-worker"
  assume_role_policy = data.aws_iam_policy_document.ecs_tasks_assume.json
}

data "aws_iam_policy_document" "worker" {
  statement {
    sid       = "ConnectionsTable"
    actions   = ["dynamodb:BatchGetItem", "dynamodb:GetItem", "dynamodb:UpdateItem"]
    resources = [aws_dynamodb_table.connections.arn]
  }

  statement {
    sid     = "ConnectionIndexes"
    actions = ["dynamodb:Query"]
    resources = [
      "${aws_dynamodb_table.connections.arn}/index/${local.orphan_index_name}",
      "${aws_dynamodb_table.connections.arn}/index/${local.owner_index_name}",
      "${aws_dynamodb_table.connections.arn}/index/${local.stop_index_name}",
    ]
  }

  statement {
    sid = "SessionsTable"
    actions = [
      "dynamodb:ConditionCheckItem",
      "dynamodb:DeleteItem",
      "dynamodb:GetItem",
      "dynamodb:PutItem",
      "dynamodb:Scan",
      "dynamodb:UpdateItem",
    ]
    resources = [aws_dynamodb_table.sessions.arn]
  }

  statement {
    sid       = "EventsTable"
    actions   = ["dynamodb:PutItem"]
    resources = [aws_dynamodb_table.events.arn]
  }

  statement {
    sid       = "MessagesTable"
    actions   = ["dynamodb:BatchWriteItem", "dynamodb:PutItem", "dynamodb:Query"]
    resources = [aws_dynamodb_table.messages.arn]
  }

  dynamic "statement" {
    for_each = local.kinesis_sink ? [1] : []
    content {
      sid       = "KinesisSink"
      actions   = ["kinesis:PutRecords"]
      resources = [local.kinesis_stream_arn]
    }
  }

  statement {
    sid       = "HintQueue"
    actions   = ["sqs:DeleteMessage", "sqs:ReceiveMessage", "sqs:SendMessage"]
    resources = [aws_sqs_queue.hints.arn]
  }

  # PutMetricData has no resource-level permissions: "*" is required; the namespace condition
  # keeps the worker to its own metrics.
  statement {
    sid       = "Metrics"
    actions   = ["cloudwatch:PutMetricData"]
    resources = ["*"]
    condition {
      test     = "StringEquals"
      variable = "cloudwatch:namespace"
      values   = [local.metrics_namespace]
    }
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
}

resource "aws_iam_role_policy" "worker" {
  name   = "wsfleet-worker"
  role   = aws_iam_role.worker.id
  policy = data.aws_iam_policy_document.worker.json
}

# What a sink or upstream hook of your own calls (var.worker_extra_policy_statements), in a
# policy of its own: the one above stays exactly what the built-in adapters call.
data "aws_iam_policy_document" "worker_extra" {
  count = length(var.worker_extra_policy_statements) > 0 ? 1 : 0

  dynamic "statement" {
    for_each = var.worker_extra_policy_statements
    content {
      sid       = statement.value.sid
      actions   = statement.value.actions
      resources = statement.value.resources
    }
  }
}

resource "aws_iam_role_policy" "worker_extra" {
  count  = length(var.worker_extra_policy_statements) > 0 ? 1 : 0
  name   = "wsfleet-worker-extra"
  role   = aws_iam_role.worker.id
  policy = data.aws_iam_policy_document.worker_extra[0].json
}

# --- Worker task execution role (pull the image, write the logs) ----------------------------------

resource "aws_iam_role" "worker_execution" {
  name               = "${var.name}-worker-execution"
  assume_role_policy = data.aws_iam_policy_document.ecs_tasks_assume.json
}

data "aws_iam_policy_document" "worker_execution" {
  # GetAuthorizationToken is account-wide: AWS requires resource "*".
  statement {
    sid       = "RegistryLogin"
    actions   = ["ecr:GetAuthorizationToken"]
    resources = ["*"]
  }

  dynamic "statement" {
    for_each = var.create_ecr_repository ? [1] : []
    content {
      sid       = "PullWorkerImage"
      actions   = ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"]
      resources = [aws_ecr_repository.worker[0].arn]
    }
  }

  statement {
    sid       = "WriteWorkerLogs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.worker.arn}:*"]
  }
}

resource "aws_iam_role_policy" "worker_execution" {
  name   = "wsfleet-worker-execution"
  role   = aws_iam_role.worker_execution.id
  policy = data.aws_iam_policy_document.worker_execution.json
}

# --- Router (Lambda) role ------------------------------------------------------------------------

data "aws_iam_policy_document" "lambda_assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["lambda.amazonaws.com"]
    }
    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [local.account_id]
    }
  }
}

resource "aws_iam_role" "router" {
  name               = "${var.name}-router"
  assume_role_policy = data.aws_iam_policy_document.lambda_assume.json
}

data "aws_iam_policy_document" "router" {
  statement {
    sid       = "ConnectionsTable"
    actions   = ["dynamodb:GetItem", "dynamodb:UpdateItem"]
    resources = [aws_dynamodb_table.connections.arn]
  }

  # The owner's session, read to report whether a lease is held (never written).
  statement {
    sid       = "SessionsTable"
    actions   = ["dynamodb:GetItem"]
    resources = [aws_dynamodb_table.sessions.arn]
  }

  statement {
    sid       = "EventsTable"
    actions   = ["dynamodb:PutItem", "dynamodb:Query"]
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
    sid       = "WriteRouterLogs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.router.arn}:*"]
  }
}

resource "aws_iam_role_policy" "router" {
  name   = "wsfleet-router"
  role   = aws_iam_role.router.id
  policy = data.aws_iam_policy_document.router.json
}

# --- Operators ------------------------------------------------------------------------------------

# Read-only access for `wsfleet status`, `history` and `messages --backend aws`; attach it to
# your operators' roles. Privileged all the same (docs/deploy.md, section 6): the connections
# table and the events table hold each upstream URL as the caller sent it, credentials included
# (the commands print it redacted, the raw items do not), and the messages table holds
# everything the upstreams sent.
data "aws_iam_policy_document" "operator" {
  statement {
    sid       = "ConnectionsTable"
    actions   = ["dynamodb:GetItem", "dynamodb:Scan"]
    resources = [aws_dynamodb_table.connections.arn]
  }

  statement {
    sid       = "SessionsTable"
    actions   = ["dynamodb:GetItem", "dynamodb:Scan"]
    resources = [aws_dynamodb_table.sessions.arn]
  }

  statement {
    sid       = "EventsTable"
    actions   = ["dynamodb:Query"]
    resources = [aws_dynamodb_table.events.arn]
  }

  # `wsfleet messages`: the messages themselves, not only their bookkeeping.
  statement {
    sid       = "MessagesTable"
    actions   = ["dynamodb:Query"]
    resources = [aws_dynamodb_table.messages.arn]
  }

  dynamic "statement" {
    for_each = local.kinesis_sink ? [1] : []
    content {
      sid       = "KinesisSinkRead"
      actions   = ["kinesis:GetRecords", "kinesis:GetShardIterator", "kinesis:ListShards"]
      resources = [local.kinesis_stream_arn]
    }
  }

  statement {
    sid       = "HintQueue"
    actions   = ["sqs:GetQueueAttributes"]
    resources = [aws_sqs_queue.hints.arn]
  }

  statement {
    sid       = "StackKeyThroughDynamoDbAndSqs"
    actions   = ["kms:Decrypt"]
    resources = [local.kms_key_arn]
    condition {
      test     = "StringEquals"
      variable = "kms:ViaService"
      values   = local.kms_via_services
    }
  }
}

resource "aws_iam_policy" "operator" {
  name        = "${var.name}-operator"
  description = "Privileged read-only access to the wsfleet tables and queue, for wsfleet status: reads upstream URLs with their credentials and every stored message."
  policy      = data.aws_iam_policy_document.operator.json
}
