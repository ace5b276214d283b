# The fleet on one CloudWatch dashboard: connections and per-task load, ownership changes and
# self-fences, ingest lag, errors, the hint DLQ, the Lambda router. Every metric in the WsFleet
# namespace is written `[local.metrics_namespace, "<Name>", ...]` with a name from
# application/ports/metrics.py (tests/infra checks both, and `terraform test` the wiring).

locals {
  dashboard_widgets = [
    {
      type = "metric", x = 0, y = 0, width = 12, height = 6
      properties = {
        title  = "Connections held (fleet) and tasks"
        region = local.region, view = "timeSeries", period = 60
        metrics = [
          [local.metrics_namespace, "ActiveConnections", local.metrics_dimension, local.service_name, { stat = "Sum", label = "held (sum over tasks)" }],
          ["ECS/ContainerInsights", "RunningTaskCount", "ClusterName", aws_ecs_cluster.main.name, "ServiceName", local.service_name, { stat = "Average", label = "running tasks", yAxis = "right" }],
        ]
      }
    },
    {
      type = "metric", x = 12, y = 0, width = 12, height = 6
      properties = {
        title  = "Per-task load (connections per task; CPU)"
        region = local.region, view = "timeSeries", period = 60
        metrics = [
          [local.metrics_namespace, "ActiveConnections", local.metrics_dimension, local.service_name, { stat = "Average", label = "mean per task (the scaling target)" }],
          [local.metrics_namespace, "ActiveConnections", local.metrics_dimension, local.service_name, { stat = "Maximum", label = "busiest task" }],
          [local.metrics_namespace, "ActiveConnections", local.metrics_dimension, local.service_name, { stat = "Minimum", label = "idlest task" }],
          ["AWS/ECS", "CPUUtilization", "ClusterName", aws_ecs_cluster.main.name, "ServiceName", local.service_name, { stat = "Maximum", label = "CPU % (busiest)", yAxis = "right" }],
        ]
      }
    },
    {
      type = "metric", x = 0, y = 6, width = 12, height = 6
      properties = {
        title  = "Takeovers, self-fences, lost leases"
        region = local.region, view = "timeSeries", stat = "Sum", period = 60
        metrics = [
          [local.metrics_namespace, "ExpiredLeaseTakeovers", local.metrics_dimension, local.service_name, { label = "takeovers of expired leases" }],
          [local.metrics_namespace, "SelfFences", local.metrics_dimension, local.service_name, { label = "self-fences" }],
          [local.metrics_namespace, "LeasesLost", local.metrics_dimension, local.service_name, { label = "leases lost" }],
          [local.metrics_namespace, "LeaseAcquisitions", local.metrics_dimension, local.service_name, { label = "acquisitions" }],
          [local.metrics_namespace, "LeaseReleases", local.metrics_dimension, local.service_name, { label = "releases" }],
        ]
      }
    },
    {
      type = "metric", x = 12, y = 6, width = 12, height = 6
      properties = {
        title  = "Ingest lag, receipt to stored (ms)"
        region = local.region, view = "timeSeries", period = 60
        metrics = [
          [local.metrics_namespace, "IngestLagMs", local.metrics_dimension, local.service_name, { stat = "p50", label = "p50" }],
          [local.metrics_namespace, "IngestLagMs", local.metrics_dimension, local.service_name, { stat = "p99", label = "p99" }],
          [local.metrics_namespace, "RenewLatencyMs", local.metrics_dimension, local.service_name, { stat = "p99", label = "renew p99" }],
          [local.metrics_namespace, "SecondsHoldingWithoutStoring", local.metrics_dimension, local.service_name, { stat = "Maximum", label = "s holding without storing (worst task)", yAxis = "right" }],
        ]
      }
    },
    {
      type = "metric", x = 0, y = 12, width = 12, height = 6
      properties = {
        title  = "Messages (per minute)"
        region = local.region, view = "timeSeries", stat = "Sum", period = 60
        metrics = [
          [local.metrics_namespace, "MessagesReceived", local.metrics_dimension, local.service_name, { label = "received" }],
          [local.metrics_namespace, "MessagesIngested", local.metrics_dimension, local.service_name, { label = "stored" }],
          [local.metrics_namespace, "MessagesRejected", local.metrics_dimension, local.service_name, { label = "rejected (bad input)" }],
          [local.metrics_namespace, "MessagesSkippedByUpstream", local.metrics_dimension, local.service_name, { label = "skipped by upstreams (lost)" }],
        ]
      }
    },
    {
      type = "metric", x = 12, y = 12, width = 12, height = 6
      properties = {
        title  = "Sink and store errors, upstream trouble"
        region = local.region, view = "timeSeries", stat = "Sum", period = 60
        metrics = [
          [local.metrics_namespace, "SinkErrors", local.metrics_dimension, local.service_name, { label = "sink errors" }],
          [local.metrics_namespace, "StoreErrors", local.metrics_dimension, local.service_name, { label = "store errors" }],
          [local.metrics_namespace, "UpstreamReconnects", local.metrics_dimension, local.service_name, { label = "upstream reconnects" }],
          [local.metrics_namespace, "UpstreamGiveUps", local.metrics_dimension, local.service_name, { label = "upstreams given up" }],
        ]
      }
    },
    {
      type = "metric", x = 0, y = 18, width = 12, height = 6
      properties = {
        title  = "Hint queue and DLQ depth"
        region = local.region, view = "timeSeries", stat = "Maximum", period = 60
        metrics = [
          ["AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName", aws_sqs_queue.hints_dlq.name, { label = "DLQ depth" }],
          ["AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName", aws_sqs_queue.hints.name, { label = "hints waiting" }],
          [local.metrics_namespace, "OrphansFound", local.metrics_dimension, local.service_name, { label = "orphans (last scan)" }],
        ]
      }
    },
    {
      type = "metric", x = 12, y = 18, width = 12, height = 6
      properties = {
        title  = "Lambda router"
        region = local.region, view = "timeSeries", stat = "Sum", period = 60
        metrics = [
          ["AWS/Lambda", "Errors", "FunctionName", aws_lambda_function.router.function_name, { label = "errors" }],
          ["AWS/Lambda", "Throttles", "FunctionName", aws_lambda_function.router.function_name, { label = "throttles" }],
          ["AWS/Lambda", "Invocations", "FunctionName", aws_lambda_function.router.function_name, { label = "invocations", yAxis = "right" }],
        ]
      }
    },
    {
      type = "alarm", x = 0, y = 24, width = 24, height = 3
      properties = {
        title = "Alarms"
        alarms = [
          aws_cloudwatch_metric_alarm.worker_not_storing.arn,
          aws_cloudwatch_metric_alarm.rejected_upstream_messages.arn,
          aws_cloudwatch_metric_alarm.dlq_not_empty.arn,
          aws_cloudwatch_metric_alarm.orphans.arn,
          aws_cloudwatch_metric_alarm.leases_lost.arn,
        ]
      }
    },
  ]
}

resource "aws_cloudwatch_dashboard" "fleet" {
  dashboard_name = var.name
  dashboard_body = jsonencode({ widgets = local.dashboard_widgets })
}

resource "aws_cloudwatch_metric_alarm" "worker_not_storing" {
  alarm_name          = "${var.name}-worker-not-storing"
  alarm_description   = "A worker has held connections for more than ${var.not_storing_alarm_seconds} s without storing a message: its sink writes fail (check SinkErrors and the messages table), or its upstreams all went silent. Each worker reports its own count; Maximum is the worst worker's."
  namespace           = local.metrics_namespace
  metric_name         = "SecondsHoldingWithoutStoring"
  dimensions          = local.service_dimensions
  statistic           = "Maximum"
  period              = 60
  evaluation_periods  = 1
  threshold           = var.not_storing_alarm_seconds
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = var.alarm_actions
  ok_actions          = var.alarm_actions
}

resource "aws_cloudwatch_metric_alarm" "rejected_upstream_messages" {
  alarm_name          = "${var.name}-rejected-upstream-messages"
  alarm_description   = "Workers rejected more than ${var.rejected_messages_alarm_threshold} upstream messages in 5 minutes as bad input (each cost only its own connection): an upstream changed its format, or sends garbage. The worker log names the connections."
  namespace           = local.metrics_namespace
  metric_name         = "MessagesRejected"
  dimensions          = local.service_dimensions
  statistic           = "Sum"
  period              = 300
  evaluation_periods  = 1
  threshold           = var.rejected_messages_alarm_threshold
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = var.alarm_actions
  ok_actions          = var.alarm_actions
}
