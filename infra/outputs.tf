output "api_url" {
  description = "Base URL of the router API (append e.g. /connections/<id>)."
  value       = aws_api_gateway_stage.router.invoke_url
}

output "api_execution_arn" {
  description = "Grant callers execute-api:Invoke on \"<this>/v1/*\" (IAM authorization)."
  value       = aws_api_gateway_rest_api.router.execution_arn
}

output "api_key_id" {
  description = "Id of the API key (api_key_required only); read its value with `aws apigateway get-api-key --include-value`."
  value       = one(aws_api_gateway_api_key.router[*].id)
}

output "ecr_repository_url" {
  description = "Push the worker image here (create_ecr_repository only)."
  value       = one(aws_ecr_repository.worker[*].repository_url)
}

output "ecs_cluster_name" {
  value = aws_ecs_cluster.main.name
}

output "ecs_service_name" {
  value = aws_ecs_service.worker.name
}

output "worker_log_group" {
  value = aws_cloudwatch_log_group.worker.name
}

output "router_function_name" {
  value = aws_lambda_function.router.function_name
}

output "queue_url" {
  description = "WSFLEET_QUEUE_URL."
  value       = aws_sqs_queue.hints.url
}

output "dlq_url" {
  value = aws_sqs_queue.hints_dlq.url
}

output "connections_table" {
  description = "WSFLEET_CONNECTIONS_TABLE."
  value       = aws_dynamodb_table.connections.name
}

output "events_table" {
  description = "WSFLEET_EVENTS_TABLE."
  value       = aws_dynamodb_table.events.name
}

output "sessions_table" {
  description = "WSFLEET_SESSIONS_TABLE."
  value       = aws_dynamodb_table.sessions.name
}

output "messages_table" {
  description = "WSFLEET_MESSAGES_TABLE."
  value       = aws_dynamodb_table.messages.name
}

output "kms_key_arn" {
  value = local.kms_key_arn
}

output "operator_policy_arn" {
  description = "Attach to the operators who run `wsfleet status --backend aws`."
  value       = aws_iam_policy.operator.arn
}

output "status_environment" {
  description = "Environment for `wsfleet status --backend aws` from an operator's shell."
  value = {
    WSFLEET_BACKEND           = "aws"
    WSFLEET_REGION            = local.region
    WSFLEET_CONNECTIONS_TABLE = aws_dynamodb_table.connections.name
    WSFLEET_EVENTS_TABLE      = aws_dynamodb_table.events.name
    WSFLEET_SESSIONS_TABLE    = aws_dynamodb_table.sessions.name
    WSFLEET_QUEUE_URL         = aws_sqs_queue.hints.url
    WSFLEET_ORPHAN_SHARDS     = tostring(var.orphan_shards)
  }
}

output "dashboard_name" {
  description = "The CloudWatch dashboard of the fleet."
  value       = aws_cloudwatch_dashboard.fleet.dashboard_name
}
