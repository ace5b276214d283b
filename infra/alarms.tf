# Alarms on what needs a person: hints that keep failing, connections nobody owns, ownership
# flapping, and DynamoDB refusing work. Metric names are application/ports/metrics.py's
# (checked by tests/infra).

locals {
  service_dimensions = { (local.metrics_dimension) = local.service_name }
}

resource "aws_cloudwatch_metric_alarm" "dlq_not_empty" {
  alarm_name          = "${var.name}-hints-dlq-not-empty"
  alarm_description   = "Hints were received ${local.queue_max_receive_count} times without being deleted: a worker crashes or fails on them. Inspect the DLQ; the connections themselves are still picked up by reconciliation."
  namespace           = "AWS/SQS"
  metric_name         = "ApproximateNumberOfMessagesVisible"
  dimensions          = { QueueName = aws_sqs_queue.hints_dlq.name }
  statistic           = "Maximum"
  period              = 300
  evaluation_periods  = 1
  threshold           = 0
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = var.alarm_actions
  ok_actions          = var.alarm_actions
}

resource "aws_cloudwatch_metric_alarm" "orphans" {
  alarm_name          = "${var.name}-orphaned-connections"
  alarm_description   = "Reconciliation keeps finding more than ${var.orphans_alarm_threshold} STARTED connections without a live lease for ${var.orphans_alarm_minutes} minutes: workers are full (check max_tasks), failing to acquire, or down."
  namespace           = local.metrics_namespace
  metric_name         = "OrphansFound"
  dimensions          = local.service_dimensions
  statistic           = "Maximum" # every worker counts the same orphans: Sum would multiply them
  period              = 60
  evaluation_periods  = var.orphans_alarm_minutes
  threshold           = var.orphans_alarm_threshold
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = var.alarm_actions
  ok_actions          = var.alarm_actions
}

resource "aws_cloudwatch_metric_alarm" "leases_lost" {
  alarm_name          = "${var.name}-leases-lost"
  alarm_description   = "Workers lost more than ${var.leases_lost_alarm_threshold} leases in 5 minutes: renewals fail (throttling, a slow network, clock skew) and connections flap between owners."
  namespace           = local.metrics_namespace
  metric_name         = "LeasesLost"
  dimensions          = local.service_dimensions
  statistic           = "Sum"
  period              = 300
  evaluation_periods  = 1
  threshold           = var.leases_lost_alarm_threshold
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = var.alarm_actions
  ok_actions          = var.alarm_actions
}

resource "aws_cloudwatch_metric_alarm" "acquisition_conflicts" {
  alarm_name          = "${var.name}-acquisition-conflicts"
  alarm_description   = "More than ${var.acquisition_conflicts_alarm_threshold} lease acquisitions lost a race in 5 minutes: many workers chase the same orphans (raise reconcile jitter) or a hint storm."
  namespace           = local.metrics_namespace
  metric_name         = "AcquisitionConflicts"
  dimensions          = local.service_dimensions
  statistic           = "Sum"
  period              = 300
  evaluation_periods  = 1
  threshold           = var.acquisition_conflicts_alarm_threshold
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = var.alarm_actions
  ok_actions          = var.alarm_actions
}

# DynamoDB throttling, per table and index (a throttled index throttles the writes that go
# through it; a throttled sessions table throttles the heartbeats). Read/WriteThrottleEvents carry the table (and index)
# dimension; ThrottledRequests would need one alarm per operation.
locals {
  throttle_targets = {
    connections  = { TableName = aws_dynamodb_table.connections.name }
    orphan_index = { TableName = aws_dynamodb_table.connections.name, GlobalSecondaryIndexName = local.orphan_index_name }
    owner_index  = { TableName = aws_dynamodb_table.connections.name, GlobalSecondaryIndexName = local.owner_index_name }
    stop_index   = { TableName = aws_dynamodb_table.connections.name, GlobalSecondaryIndexName = local.stop_index_name }
    sessions     = { TableName = aws_dynamodb_table.sessions.name }
    events       = { TableName = aws_dynamodb_table.events.name }
    messages     = { TableName = aws_dynamodb_table.messages.name }
  }
}

resource "aws_cloudwatch_metric_alarm" "dynamodb_throttles" {
  for_each = local.throttle_targets

  alarm_name          = "${var.name}-dynamodb-throttles-${each.key}"
  alarm_description   = "DynamoDB throttled requests on ${each.key} in 3 of the last 5 minutes: heartbeats or lease changes may fail and sessions expire. Raise provisioned capacity (or its autoscaling maximum), or check for a hot partition."
  evaluation_periods  = 5
  datapoints_to_alarm = 3
  threshold           = 0
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = var.alarm_actions
  ok_actions          = var.alarm_actions

  metric_query {
    id          = "throttles"
    expression  = "FILL(reads, 0) + FILL(writes, 0)" # each is emitted only when non-zero
    label       = "Throttle events"
    return_data = true
  }

  metric_query {
    id = "reads"
    metric {
      namespace   = "AWS/DynamoDB"
      metric_name = "ReadThrottleEvents"
      dimensions  = each.value
      stat        = "Sum"
      period      = 60
    }
  }

  metric_query {
    id = "writes"
    metric {
      namespace   = "AWS/DynamoDB"
      metric_name = "WriteThrottleEvents"
      dimensions  = each.value
      stat        = "Sum"
      period      = 60
    }
  }
}
