# The event router: API Gateway (REST, proxy) in front of a Lambda that records START/STOP in
# the connections table and sends a hint. Callers sign with SigV4 (IAM authorization) unless
# configured otherwise.

locals {
  router_handler = "entrypoints.lambda_router.handler.handler"
  router_runtime = "python3.11" # `make lambda-zip` builds the dependencies for this Python
}

resource "aws_cloudwatch_log_group" "router" {
  #checkov:skip=CKV_AWS_338:Operational logs; retention is var.log_retention_days (30 by default) to bound cost; raise it where policy demands a year.
  name              = local.log_group_names.router
  retention_in_days = var.log_retention_days
  kms_key_id        = local.kms_key_arn
}

resource "aws_lambda_function" "router" {
  #checkov:skip=CKV_AWS_116:Invoked synchronously by API Gateway: the caller gets the error; a DLQ only applies to asynchronous invocations.
  #checkov:skip=CKV_AWS_117:The router only calls AWS APIs and resolves upstream host names (SSRF check); outside a VPC it needs no NAT or endpoints. The workers, which connect to upstreams, run in the VPC.
  #checkov:skip=CKV_AWS_50:Tracing is OpenTelemetry's job in wsfleet (the X-Ray SDK reaches end of support); enable X-Ray here if you use it.
  #checkov:skip=CKV_AWS_272:The package is built from this repository by `make lambda-zip`; add a signing profile if your pipeline signs artifacts.
  function_name                  = "${var.name}-router"
  role                           = aws_iam_role.router.arn
  handler                        = local.router_handler
  runtime                        = local.router_runtime
  architectures                  = [var.router_architecture]
  filename                       = var.router_zip_path
  source_code_hash               = filebase64sha256(var.router_zip_path)
  memory_size                    = var.router_memory_mb
  timeout                        = var.router_timeout_s
  reserved_concurrent_executions = var.router_reserved_concurrency == null ? -1 : var.router_reserved_concurrency
  kms_key_arn                    = local.kms_key_arn

  environment {
    variables = local.shared_environment
  }

  logging_config {
    log_format = "Text" # the router writes its own JSON lines
    log_group  = aws_cloudwatch_log_group.router.name
  }
}

resource "aws_lambda_permission" "api" {
  statement_id  = "AllowApiGatewayInvoke"
  action        = "lambda:InvokeFunction"
  function_name = aws_lambda_function.router.function_name
  principal     = "apigateway.amazonaws.com"
  source_arn    = "${aws_api_gateway_rest_api.router.execution_arn}/*/*/*"
}

# --- API Gateway (REST, one proxy resource) --------------------------------------------------------

resource "aws_api_gateway_rest_api" "router" {
  name        = "${var.name}-router"
  description = "wsfleet START/STOP/status API"

  endpoint_configuration {
    types = ["REGIONAL"]
  }

  lifecycle {
    create_before_destroy = true
  }
}

resource "aws_api_gateway_resource" "proxy" {
  rest_api_id = aws_api_gateway_rest_api.router.id
  parent_id   = aws_api_gateway_rest_api.router.root_resource_id
  path_part   = "{proxy+}"
}

resource "aws_api_gateway_method" "proxy" {
  #checkov:skip=CKV2_AWS_53:A proxy method has no fixed request shape; the router validates every request itself (ids, URLs, the SSRF policy) and answers 400 with a reason.
  rest_api_id      = aws_api_gateway_rest_api.router.id
  resource_id      = aws_api_gateway_resource.proxy.id
  http_method      = "ANY"
  authorization    = var.api_authorization
  api_key_required = var.api_key_required
}

resource "aws_api_gateway_integration" "proxy" {
  rest_api_id             = aws_api_gateway_rest_api.router.id
  resource_id             = aws_api_gateway_resource.proxy.id
  http_method             = aws_api_gateway_method.proxy.http_method
  type                    = "AWS_PROXY"
  integration_http_method = "POST"
  uri                     = aws_lambda_function.router.invoke_arn
}

resource "aws_api_gateway_deployment" "router" {
  rest_api_id = aws_api_gateway_rest_api.router.id

  # Redeploy whenever the API's shape changes.
  triggers = {
    redeployment = sha1(jsonencode([
      aws_api_gateway_resource.proxy.id,
      aws_api_gateway_method.proxy.id,
      aws_api_gateway_method.proxy.authorization,
      aws_api_gateway_method.proxy.api_key_required,
      aws_api_gateway_integration.proxy.id,
    ]))
  }

  lifecycle {
    create_before_destroy = true
  }
}

resource "aws_cloudwatch_log_group" "api_access" {
  #checkov:skip=CKV_AWS_338:Operational logs; retention is var.log_retention_days (30 by default) to bound cost; raise it where policy demands a year.
  name              = local.log_group_names.api_access
  retention_in_days = var.log_retention_days
  kms_key_id        = local.kms_key_arn
}

resource "aws_cloudwatch_log_group" "api_execution" {
  #checkov:skip=CKV_AWS_338:Operational logs; retention is var.log_retention_days (30 by default) to bound cost; raise it where policy demands a year.
  name              = local.log_group_names.api_execution
  retention_in_days = var.log_retention_days
  kms_key_id        = local.kms_key_arn
}

resource "aws_api_gateway_stage" "router" {
  #checkov:skip=CKV_AWS_73:Tracing is OpenTelemetry's job in wsfleet; enable X-Ray here if you use it.
  #checkov:skip=CKV_AWS_120:START/STOP are writes and GET must be fresh: a response cache would be wrong.
  #checkov:skip=CKV2_AWS_29:IAM (SigV4) authorization and stage throttling guard this API; associate your WAF web ACL with the stage if your organisation runs one.
  #checkov:skip=CKV2_AWS_51:Clients authenticate with SigV4 (or an API key); the Lambda integration is authorized by its resource policy, so backend client certificates add nothing.
  rest_api_id   = aws_api_gateway_rest_api.router.id
  deployment_id = aws_api_gateway_deployment.router.id
  stage_name    = local.router_stage_name

  access_log_settings {
    destination_arn = aws_cloudwatch_log_group.api_access.arn
    format = jsonencode({
      requestId      = "$context.requestId"
      ip             = "$context.identity.sourceIp"
      caller         = "$context.identity.caller"
      userArn        = "$context.identity.userArn"
      apiKeyId       = "$context.identity.apiKeyId"
      requestTime    = "$context.requestTime"
      httpMethod     = "$context.httpMethod"
      resourcePath   = "$context.resourcePath"
      path           = "$context.path"
      status         = "$context.status"
      responseLength = "$context.responseLength"
      latencyMs      = "$context.responseLatency"
      error          = "$context.error.message"
    })
  }

  depends_on = [aws_api_gateway_account.main]
}

resource "aws_api_gateway_method_settings" "all" {
  #checkov:skip=CKV_AWS_225:Caching is off on purpose (START/STOP are writes, GET must be fresh), so there is no cache to encrypt.
  rest_api_id = aws_api_gateway_rest_api.router.id
  stage_name  = aws_api_gateway_stage.router.stage_name
  method_path = "*/*"

  settings {
    metrics_enabled        = true
    logging_level          = "ERROR"
    data_trace_enabled     = false # request bodies carry upstream URLs, maybe with tokens
    throttling_rate_limit  = var.api_throttle_rate
    throttling_burst_limit = var.api_throttle_burst
    caching_enabled        = false
  }

  # Execution logs start with these settings: their log group must exist first.
  depends_on = [aws_cloudwatch_log_group.api_execution]
}

# API Gateway writes execution and access logs through one role per account and region. This
# stack's role may write only to this API's two log groups (and read none): other REST APIs of
# the same account and region, if any, then log nothing. If the account hosts others, set
# var.manage_apigateway_account = false and keep the account's role where it is managed.
data "aws_iam_policy_document" "apigateway_assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["apigateway.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "apigateway_logs" {
  count = var.manage_apigateway_account ? 1 : 0

  name               = "${var.name}-apigateway-logs"
  assume_role_policy = data.aws_iam_policy_document.apigateway_assume.json
}

data "aws_iam_policy_document" "apigateway_logs" {
  # DescribeLogGroups lists: it has no resource-level permission narrower than every group of
  # the region. It returns names and settings, never a log event.
  statement {
    sid       = "FindLogGroups"
    actions   = ["logs:DescribeLogGroups"]
    resources = ["arn:${local.partition}:logs:${local.region}:${local.account_id}:log-group:*"]
  }

  statement {
    sid = "WriteThisApisLogs"
    actions = [
      "logs:CreateLogGroup", # the execution log group exists already; API Gateway may still ask
      "logs:CreateLogStream",
      "logs:DescribeLogStreams",
      "logs:PutLogEvents",
    ]
    resources = [
      local.log_group_arns.api_execution,
      "${local.log_group_arns.api_execution}:log-stream:*",
      local.log_group_arns.api_access,
      "${local.log_group_arns.api_access}:log-stream:*",
    ]
  }
}

resource "aws_iam_role_policy" "apigateway_logs" {
  count = var.manage_apigateway_account ? 1 : 0

  name   = "apigateway-logs"
  role   = aws_iam_role.apigateway_logs[0].id
  policy = data.aws_iam_policy_document.apigateway_logs.json
}

resource "aws_api_gateway_account" "main" {
  count = var.manage_apigateway_account ? 1 : 0

  cloudwatch_role_arn = aws_iam_role.apigateway_logs[0].arn
}

# --- Optional API key and usage plan -------------------------------------------------------------

resource "aws_api_gateway_usage_plan" "router" {
  count = var.api_key_required ? 1 : 0

  name = "${var.name}-router"

  api_stages {
    api_id = aws_api_gateway_rest_api.router.id
    stage  = aws_api_gateway_stage.router.stage_name
  }

  throttle_settings {
    rate_limit  = var.api_throttle_rate
    burst_limit = var.api_throttle_burst
  }

  quota_settings {
    limit  = var.api_quota_per_day
    period = "DAY"
  }
}

resource "aws_api_gateway_api_key" "router" {
  count = var.api_key_required ? 1 : 0

  name = "${var.name}-router"
}

resource "aws_api_gateway_usage_plan_key" "router" {
  count = var.api_key_required ? 1 : 0

  key_id        = aws_api_gateway_api_key.router[0].id
  key_type      = "API_KEY"
  usage_plan_id = aws_api_gateway_usage_plan.router[0].id
}
