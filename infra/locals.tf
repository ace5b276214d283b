# Names and settings shared by several files. The literal values here are the ones the code
# defines too; tests/infra/test_terraform_matches_code.py imports the code and compares.

locals {
  account_id = data.aws_caller_identity.current.account_id
  region     = data.aws_region.current.id
  partition  = data.aws_partition.current.partition

  kms_key_arn  = var.kms_key_arn != null ? var.kms_key_arn : aws_kms_key.main[0].arn
  service_name = var.name

  # Every log group of the stack, by name: each aws_cloudwatch_log_group takes its name from
  # here, and the key policy (kms.tf) admits exactly these. The policy builds their ARNs from
  # the names because the log groups refer to the key: the key cannot refer to them.
  router_stage_name = "v1"
  log_group_names = {
    router     = "/aws/lambda/${var.name}-router"
    deaths     = "/aws/lambda/${var.name}-deaths"
    worker     = "/aws/ecs/${var.name}-worker"
    api_access = "/aws/apigateway/${var.name}-router-access"
    # The name API Gateway writes execution logs to; the stack creates it (encrypted, with a
    # retention) so API Gateway never creates one of its own.
    api_execution = "API-Gateway-Execution-Logs_${aws_api_gateway_rest_api.router.id}/${local.router_stage_name}"
  }
  log_group_arns = {
    for key, name in local.log_group_names :
    key => "arn:${local.partition}:logs:${local.region}:${local.account_id}:log-group:${name}"
  }

  # CloudWatch: the namespace and dimension the metrics adapter publishes under.
  metrics_namespace = "WsFleet"
  metrics_dimension = "ServiceName"

  # The connections table's sharded, sparse orphan index (adapters/dynamodb/schema.py).
  orphan_index_name          = "orphans-by-shard"
  orphan_index_partition_key = "orphan_shard"
  orphan_index_sort_key      = "not_before_ms"
  # Sparse KEYS_ONLY indexes of owned connections by owner session, and of STOPs by owner.
  owner_index_name          = "connections-by-owner"
  owner_index_partition_key = "owned_by"
  stop_index_name           = "stops-by-owner"
  stop_index_partition_key  = "stop_owner"
  ttl_attribute             = "expires_at"

  # The hint queue (adapters/sqs/schema.py). The worker sends its visibility timeout
  # (WSFLEET_HINT_VISIBILITY_TIMEOUT_S, set to the same value) with every receive; the queue's
  # own is the fallback for other consumers.
  dlq_suffix                 = "-dlq"
  queue_visibility_timeout_s = 30
  queue_receive_wait_s       = 20
  queue_retention_s          = 3600
  queue_max_receive_count    = 5

  # The container health check, run by ECS *inside* the container (and by the Dockerfile's
  # HEALTHCHECK, which must stay identical): exits 0 when the worker's /healthz answers 200.
  health_check_command = ["CMD", "python", "-m", "entrypoints.worker.healthcheck"]

  worker_image = var.worker_image != null ? var.worker_image : "${one(aws_ecr_repository.worker[*].repository_url)}:${var.worker_image_tag}"

  # Settings both processes read; WSFLEET_ORPHAN_SHARDS in particular must be equal for both.
  shared_environment = {
    WSFLEET_REGION                 = local.region
    WSFLEET_SERVICE_NAME           = local.service_name
    WSFLEET_LOG_LEVEL              = var.log_level
    WSFLEET_CONNECTIONS_TABLE      = aws_dynamodb_table.connections.name
    WSFLEET_EVENTS_TABLE           = aws_dynamodb_table.events.name
    WSFLEET_SESSIONS_TABLE         = aws_dynamodb_table.sessions.name
    WSFLEET_QUEUE_URL              = aws_sqs_queue.hints.url
    WSFLEET_ORPHAN_SHARDS          = tostring(var.orphan_shards)
    WSFLEET_ALLOWED_UPSTREAM_HOSTS = join(",", var.allowed_upstream_hosts)
  }

  worker_only_environment = {
    WSFLEET_BACKEND                   = "aws"
    WSFLEET_MESSAGES_TABLE            = aws_dynamodb_table.messages.name
    WSFLEET_METRICS_NAMESPACE         = local.metrics_namespace
    WSFLEET_HEALTH_PORT               = tostring(var.health_port)
    WSFLEET_LEASE_MS                  = tostring(var.lease_ms)
    WSFLEET_HEARTBEAT_INTERVAL_S      = tostring(var.heartbeat_interval_s)
    WSFLEET_DESIRED_STATE_INTERVAL_S  = tostring(var.desired_state_interval_s)
    WSFLEET_RECONCILE_INTERVAL_S      = tostring(var.reconcile_interval_s)
    WSFLEET_MAX_CONNECTIONS           = tostring(var.max_connections)
    WSFLEET_SHUTDOWN_BUDGET_S         = tostring(var.shutdown_budget_s)
    WSFLEET_HINT_VISIBILITY_TIMEOUT_S = tostring(local.queue_visibility_timeout_s)
    WSFLEET_MESSAGE_RETENTION_DAYS    = var.message_retention_days == null ? "" : tostring(var.message_retention_days) # empty: unset
  }

  # The stack's own settings win over var.worker_extra_environment.
  worker_environment = merge(var.worker_extra_environment, local.shared_environment, local.kinesis_environment, local.worker_only_environment)
}
