# Inputs of the wsfleet stack. Defaults that mirror the code (table names, worker timings, queue
# settings) are checked against it by tests/infra/test_terraform_matches_code.py.

# --- Stack -------------------------------------------------------------------------------------

variable "region" {
  description = "AWS region to deploy to."
  type        = string
}

variable "name" {
  description = "Name of the stack: prefix of its resources, the ECS service name and the ServiceName metric dimension (WSFLEET_SERVICE_NAME)."
  type        = string
  default     = "wsfleet"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{1,30}$", var.name))
    error_message = "name: 2-31 of a-z 0-9 -, starting with a letter."
  }
}

variable "tags" {
  description = "Tags added to every resource."
  type        = map(string)
  default     = {}
}

variable "kms_key_arn" {
  description = "ARN of an existing KMS key for tables, queues, logs, the image repository and the Lambda environment. Null: the stack creates one (with rotation)."
  type        = string
  default     = null
}

# --- Networking (an existing VPC) ----------------------------------------------------------------

variable "vpc_id" {
  description = "VPC of the worker tasks."
  type        = string
}

variable "subnet_ids" {
  description = "Subnets of the worker tasks: private subnets with a NAT gateway (upstreams are on the internet) and, ideally, gateway endpoints for DynamoDB."
  type        = list(string)

  validation {
    condition     = length(var.subnet_ids) > 0
    error_message = "subnet_ids: at least one subnet (two or more, in different zones, for availability)."
  }
}

variable "assign_public_ip" {
  description = "Give worker tasks public IPs (only for public subnets without NAT; prefer private subnets)."
  type        = bool
  default     = false
}

variable "upstream_egress_ports" {
  description = "TCP ports workers may connect out to (AWS APIs use 443; add 80 or others for ws:// or non-standard upstreams)."
  type        = list(number)
  default     = [443]
}

# --- DynamoDB ------------------------------------------------------------------------------------

variable "connections_table_name" {
  description = "Connections and leases table (WSFLEET_CONNECTIONS_TABLE)."
  type        = string
  default     = "wsfleet-connections"
}

variable "events_table_name" {
  description = "Ownership event log table (WSFLEET_EVENTS_TABLE)."
  type        = string
  default     = "wsfleet-connection-events"
}

variable "sessions_table_name" {
  description = "Worker sessions table, renewed on each worker's heartbeat (WSFLEET_SESSIONS_TABLE)."
  type        = string
  default     = "wsfleet-sessions"
}

variable "messages_table_name" {
  description = "Upstream messages table, the default message sink (WSFLEET_MESSAGES_TABLE)."
  type        = string
  default     = "wsfleet-messages"
}

variable "message_retention_days" {
  description = "Days after which stored messages expire (WSFLEET_MESSAGE_RETENTION_DAYS, DynamoDB TTL on the messages table); null keeps them."
  type        = number
  default     = null
}

variable "message_sink" {
  description = "Where the workers store messages: \"dynamodb\" (the messages table) or \"kinesis\" (a Kinesis data stream: infra/kinesis.tf). A sink of your own goes in worker_extra_environment instead."
  type        = string
  default     = "dynamodb"

  validation {
    condition     = contains(["dynamodb", "kinesis"], var.message_sink)
    error_message = "message_sink: \"dynamodb\" or \"kinesis\"."
  }
}

variable "kinesis_stream_arn" {
  description = "With message_sink = \"kinesis\": an existing stream's ARN; null creates one (on demand, encrypted with the stack key)."
  type        = string
  default     = null
}

variable "kinesis_retention_hours" {
  description = "Hours the created Kinesis stream keeps records (24 to 8760)."
  type        = number
  default     = 24

  validation {
    condition     = var.kinesis_retention_hours >= 24 && var.kinesis_retention_hours <= 8760
    error_message = "kinesis_retention_hours: 24 to 8760."
  }
}

variable "orphan_shards" {
  description = "Partitions of the orphan index (WSFLEET_ORPHAN_SHARDS); the same value goes to the router and the workers."
  type        = number
  default     = 16

  validation {
    condition     = var.orphan_shards >= 1 && var.orphan_shards <= 100 && floor(var.orphan_shards) == var.orphan_shards
    error_message = "orphan_shards: an integer 1-100."
  }
}

variable "billing_mode" {
  description = "PAY_PER_REQUEST (on-demand, the default) or PROVISIONED with autoscaling (cheaper for a steady heartbeat load: see docs/deploy.md)."
  type        = string
  default     = "PAY_PER_REQUEST"

  validation {
    condition     = contains(["PAY_PER_REQUEST", "PROVISIONED"], var.billing_mode)
    error_message = "billing_mode: PAY_PER_REQUEST or PROVISIONED."
  }
}

variable "provisioned_capacity" {
  description = "With billing_mode = PROVISIONED: autoscaling bounds of read and write capacity units per table and index (owner_indexes: connections-by-owner and stops-by-owner, each)."
  type = map(object({
    read_min  = number
    read_max  = number
    write_min = number
    write_max = number
  }))
  # Connection items and their indexes are written when ownership or desired state changes,
  # sessions on every heartbeat (one write per worker per heartbeat interval).
  default = {
    connections   = { read_min = 5, read_max = 500, write_min = 2, write_max = 500 }
    orphan_index  = { read_min = 5, read_max = 500, write_min = 2, write_max = 500 }
    owner_indexes = { read_min = 1, read_max = 100, write_min = 2, write_max = 500 }
    sessions      = { read_min = 2, read_max = 200, write_min = 2, write_max = 500 }
    events        = { read_min = 1, read_max = 100, write_min = 2, write_max = 500 }
    messages      = { read_min = 1, read_max = 100, write_min = 5, write_max = 2000 }
  }

  validation {
    condition     = alltrue([for k in ["connections", "orphan_index", "owner_indexes", "sessions", "events", "messages"] : contains(keys(var.provisioned_capacity), k)])
    error_message = "provisioned_capacity: needs the keys connections, orphan_index, owner_indexes, sessions, events and messages."
  }
}

variable "capacity_target_utilization" {
  description = "With billing_mode = PROVISIONED: target utilization (percent) of the capacity autoscaling."
  type        = number
  default     = 70

  validation {
    condition     = var.capacity_target_utilization >= 20 && var.capacity_target_utilization <= 90
    error_message = "capacity_target_utilization: 20-90."
  }
}

variable "point_in_time_recovery" {
  description = "Continuous backups of the tables."
  type        = bool
  default     = true
}

variable "deletion_protection" {
  description = "Refuse to delete the tables (turn off before `terraform destroy`)."
  type        = bool
  default     = true
}

# --- SQS -----------------------------------------------------------------------------------------

variable "queue_name" {
  description = "Name of the hint queue (WSFLEET_QUEUE_URL is its URL); the dead-letter queue is <name>-dlq."
  type        = string
  default     = "wsfleet-connection-hints"
}

# --- Router (Lambda + API Gateway) ---------------------------------------------------------------

variable "router_zip_path" {
  description = "The router's deployment package, built by `make lambda-zip`."
  type        = string
  default     = "../build/lambda-router.zip"
}

variable "router_architecture" {
  description = "Lambda architecture; must match the platform `make lambda-zip` built for (x86_64 by default)."
  type        = string
  default     = "x86_64"

  validation {
    condition     = contains(["x86_64", "arm64"], var.router_architecture)
    error_message = "router_architecture: x86_64 or arm64."
  }
}

variable "router_memory_mb" {
  description = "Lambda memory (CPU grows with it)."
  type        = number
  default     = 512
}

variable "router_timeout_s" {
  description = "Lambda timeout; API Gateway gives up after 29 s anyway."
  type        = number
  default     = 10
}

variable "router_reserved_concurrency" {
  description = "Reserved concurrency of the router; null leaves it unreserved (the stage throttle still applies)."
  type        = number
  default     = null
}

variable "api_authorization" {
  description = "Authorization of the API's methods: AWS_IAM (SigV4-signed calls; callers need execute-api:Invoke) or NONE (only together with api_key_required)."
  type        = string
  default     = "AWS_IAM"

  validation {
    condition     = contains(["AWS_IAM", "NONE"], var.api_authorization)
    error_message = "api_authorization: AWS_IAM or NONE."
  }
}

variable "api_key_required" {
  description = "Require an API key (x-api-key) and create a usage plan with one key."
  type        = bool
  default     = false

  validation {
    condition     = var.api_key_required || var.api_authorization == "AWS_IAM"
    error_message = "An API without IAM authorization must at least require an API key."
  }
}

variable "api_throttle_rate" {
  description = "Steady-state requests per second the API stage (and the usage plan) allows."
  type        = number
  default     = 50
}

variable "api_throttle_burst" {
  description = "Burst of requests the API stage (and the usage plan) allows."
  type        = number
  default     = 100
}

variable "api_quota_per_day" {
  description = "With api_key_required: requests per day the usage plan allows."
  type        = number
  default     = 100000
}

variable "manage_apigateway_account" {
  description = "Set the account's (per region) API Gateway CloudWatch logging role, scoped to this API's log groups; false if another stack manages it or other REST APIs of the account and region must log."
  type        = bool
  default     = true
}

variable "allowed_upstream_hosts" {
  description = "If not empty, the only upstream hosts START may name: exact names or .suffix (WSFLEET_ALLOWED_UPSTREAM_HOSTS)."
  type        = list(string)
  default     = []
}

# --- Worker (ECS Fargate) ------------------------------------------------------------------------

variable "create_ecr_repository" {
  description = "Create an ECR repository for the worker image."
  type        = bool
  default     = true
}

variable "worker_image" {
  description = "Full image reference of the worker; null: <the stack's ECR repository>:<worker_image_tag>."
  type        = string
  default     = null
}

variable "worker_image_tag" {
  description = "Tag of the worker image in the stack's ECR repository (tags are immutable: use a version or a commit). Required unless worker_image is set."
  type        = string
  default     = null
}

variable "worker_cpu_architecture" {
  description = "CPU architecture of the worker image: X86_64 or ARM64."
  type        = string
  default     = "X86_64"

  validation {
    condition     = contains(["X86_64", "ARM64"], var.worker_cpu_architecture)
    error_message = "worker_cpu_architecture: X86_64 or ARM64."
  }
}

variable "worker_cpu" {
  description = "Fargate CPU units of a worker task (1024 = 1 vCPU)."
  type        = number
  default     = 512
}

variable "worker_memory" {
  description = "Fargate memory (MiB) of a worker task; budget 2-5 MB per connection plus ~150 MB."
  type        = number
  default     = 1024
}

variable "min_tasks" {
  description = "Fewest worker tasks (two or more survive the loss of one without waiting for leases to expire)."
  type        = number
  default     = 2
}

variable "max_tasks" {
  description = "Most worker tasks autoscaling may run."
  type        = number
  default     = 20

  validation {
    condition     = var.max_tasks >= var.min_tasks
    error_message = "max_tasks must be at least min_tasks."
  }
}

variable "target_connections_per_task" {
  description = "Autoscaling target: average ActiveConnections per task. Keep it below max_connections so tasks have room while new ones start."
  type        = number
  default     = 70

  validation {
    condition     = var.target_connections_per_task < var.max_connections
    error_message = "target_connections_per_task must be below max_connections."
  }
}

variable "stop_timeout_s" {
  description = "ECS stopTimeout: seconds between SIGTERM and SIGKILL (Fargate allows at most 120)."
  type        = number
  default     = 30

  validation {
    condition     = var.stop_timeout_s <= 120 && var.stop_timeout_s >= var.shutdown_budget_s + 5
    error_message = "stop_timeout_s: at most 120 and at least shutdown_budget_s + 5 (the process needs time to exit after its graceful shutdown)."
  }
}

variable "health_port" {
  description = "Port of the worker's health endpoint inside the task (WSFLEET_HEALTH_PORT); only the container's own health check uses it."
  type        = number
  default     = 8080

  validation {
    condition     = var.health_port >= 1 && var.health_port <= 65535
    error_message = "health_port: 1-65535 (the health check needs the endpoint, so 0 is not allowed here)."
  }
}

variable "log_level" {
  description = "WSFLEET_LOG_LEVEL of the worker and the router."
  type        = string
  default     = "INFO"
}

variable "log_retention_days" {
  description = "Retention of the worker, router and API access logs."
  type        = number
  default     = 30
}

# Worker timings (WorkerConfig). Defaults are the code's; see the tuning table in docs/deploy.md.

variable "lease_ms" {
  description = "WSFLEET_LEASE_MS: a worker session's lease; a crashed worker's connections are taken over after this."
  type        = number
  default     = 4000
}

variable "heartbeat_interval_s" {
  description = "WSFLEET_HEARTBEAT_INTERVAL_S: seconds between session renewals (one DynamoDB write per worker each, whatever it holds)."
  type        = number
  default     = 1

  validation {
    condition     = var.heartbeat_interval_s * 1000 < var.lease_ms
    error_message = "heartbeat_interval_s must be well below the lease (the article keeps a 4:1 ratio)."
  }
}

variable "desired_state_interval_s" {
  description = "WSFLEET_DESIRED_STATE_INTERVAL_S: seconds between STOP checks (one Query of the stops-by-owner index per worker)."
  type        = number
  default     = 2
}

variable "reconcile_interval_s" {
  description = "WSFLEET_RECONCILE_INTERVAL_S: longest pause between orphan scans."
  type        = number
  default     = 60
}

variable "max_connections" {
  description = "WSFLEET_MAX_CONNECTIONS: connections one worker holds at most."
  type        = number
  default     = 100
}

variable "shutdown_budget_s" {
  description = "WSFLEET_SHUTDOWN_BUDGET_S: graceful shutdown deadline after SIGTERM; below stop_timeout_s."
  type        = number
  default     = 20
}

variable "worker_extra_environment" {
  description = "More WSFLEET_* settings for the worker (see docs/settings.md); the stack's own settings take precedence."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for k in keys(var.worker_extra_environment) : startswith(k, "WSFLEET_")])
    error_message = "worker_extra_environment: only WSFLEET_* variables."
  }
}

variable "worker_extra_policy_statements" {
  description = "More IAM statements (Allow) for the worker's task role: what a sink or upstream hook of your own calls, e.g. [{ sid = \"TeamSink\", actions = [\"s3:PutObject\"], resources = [\"arn:aws:s3:::team-bucket/*\"] }] (docs/deploy.md). Attached as a policy of its own."
  type = list(object({
    sid       = optional(string)
    actions   = list(string)
    resources = list(string)
  }))
  default = []

  validation {
    condition = alltrue([
      for s in var.worker_extra_policy_statements :
      length(s.actions) > 0 && length(s.resources) > 0 && !anytrue([for a in s.actions : a == "*" || endswith(a, ":*")])
    ])
    error_message = "worker_extra_policy_statements: each statement needs actions and resources, and names its actions (no \"*\" or \"service:*\")."
  }
}

# --- Alarms --------------------------------------------------------------------------------------

variable "alarm_actions" {
  description = "ARNs notified when an alarm fires or clears (e.g. an SNS topic); empty: alarms only show in the console."
  type        = list(string)
  default     = []
}

variable "orphans_alarm_threshold" {
  description = "Alarm when a reconciliation pass finds more orphaned connections than this..."
  type        = number
  default     = 10
}

variable "orphans_alarm_minutes" {
  description = "...in every minute for this many minutes."
  type        = number
  default     = 5
}

variable "leases_lost_alarm_threshold" {
  description = "Alarm when workers lose more leases than this in 5 minutes (flapping ownership)."
  type        = number
  default     = 20
}

variable "acquisition_conflicts_alarm_threshold" {
  description = "Alarm when lease acquisitions lose a race more often than this in 5 minutes."
  type        = number
  default     = 200
}

variable "not_storing_alarm_seconds" {
  description = "Alarm when a worker has held connections this many seconds without storing a message (a failing sink, or upstreams that all went quiet: raise it for feeds that are silent for long)."
  type        = number
  default     = 300
}

variable "rejected_messages_alarm_threshold" {
  description = "Alarm when workers reject more upstream messages than this in 5 minutes (bad input from an upstream)."
  type        = number
  default     = 0
}
