# The worker fleet: ECS on Fargate, scaled on the average ActiveConnections per task.

resource "aws_ecr_repository" "worker" {
  count = var.create_ecr_repository ? 1 : 0

  name                 = "${var.name}-worker"
  image_tag_mutability = "IMMUTABLE" # a tag names one build: deploys and rollbacks are exact

  image_scanning_configuration {
    scan_on_push = true
  }

  encryption_configuration {
    encryption_type = "KMS"
    kms_key         = local.kms_key_arn
  }
}

resource "aws_ecr_lifecycle_policy" "worker" {
  count = var.create_ecr_repository ? 1 : 0

  repository = aws_ecr_repository.worker[0].name
  policy = jsonencode({
    rules = [{
      rulePriority = 1
      description  = "Keep the 30 most recent images (enough to roll back)"
      selection    = { tagStatus = "any", countType = "imageCountMoreThan", countNumber = 30 }
      action       = { type = "expire" }
    }]
  })
}

resource "aws_cloudwatch_log_group" "worker" {
  #checkov:skip=CKV_AWS_338:Operational logs; retention is var.log_retention_days (30 by default) to bound cost; raise it where policy demands a year.
  name              = local.log_group_names.worker
  retention_in_days = var.log_retention_days
  kms_key_id        = local.kms_key_arn
}

resource "aws_ecs_cluster" "main" {
  name = var.name

  setting {
    name  = "containerInsights"
    value = "enabled"
  }
}

locals {
  # The worker's container definition (an object, so tests/infra can read its fields).
  worker_container = {
    name                   = "worker"
    image                  = local.worker_image
    essential              = true
    readonlyRootFilesystem = true # the worker writes nothing to disk on the aws backend
    user                   = "10001"
    # The graceful shutdown (release every lease, hand the connections back) must finish
    # before SIGKILL: WSFLEET_SHUTDOWN_BUDGET_S < stopTimeout (validated in variables.tf).
    stopTimeout = var.stop_timeout_s
    environment = [for name in sort(keys(local.worker_environment)) : {
      name  = name
      value = local.worker_environment[name]
    }]
    healthCheck = {
      command     = local.health_check_command
      interval    = 15
      timeout     = 5
      retries     = 3
      startPeriod = 30
    }
    logConfiguration = {
      logDriver = "awslogs"
      options = {
        awslogs-group         = aws_cloudwatch_log_group.worker.name
        awslogs-region        = local.region
        awslogs-stream-prefix = "worker"
        # Never block the event loop on a slow log pipe: buffer, drop when full.
        mode            = "non-blocking"
        max-buffer-size = "4m"
      }
    }
  }
}

resource "aws_ecs_task_definition" "worker" {
  family                   = "${var.name}-worker"
  requires_compatibilities = ["FARGATE"]
  network_mode             = "awsvpc"
  cpu                      = var.worker_cpu
  memory                   = var.worker_memory
  task_role_arn            = aws_iam_role.worker.arn
  execution_role_arn       = aws_iam_role.worker_execution.arn

  runtime_platform {
    operating_system_family = "LINUX"
    cpu_architecture        = var.worker_cpu_architecture
  }

  container_definitions = jsonencode([local.worker_container])

  lifecycle {
    precondition {
      condition     = var.worker_image != null || (var.create_ecr_repository && var.worker_image_tag != null)
      error_message = "Set worker_image, or worker_image_tag with create_ecr_repository = true."
    }
  }
}

resource "aws_security_group" "worker" {
  name        = "${var.name}-worker"
  description = "wsfleet workers: no inbound; outbound to upstreams and AWS APIs"
  vpc_id      = var.vpc_id

  # No ingress: the health check runs inside the container; workers only dial out.

  dynamic "egress" {
    for_each = toset(var.upstream_egress_ports)
    content {
      description = "Upstream WebSockets and AWS APIs on port ${egress.value}"
      from_port   = egress.value
      to_port     = egress.value
      protocol    = "tcp"
      cidr_blocks = ["0.0.0.0/0"]
    }
  }
}

resource "aws_ecs_service" "worker" {
  name                   = local.service_name
  cluster                = aws_ecs_cluster.main.id
  task_definition        = aws_ecs_task_definition.worker.arn
  desired_count          = var.min_tasks
  launch_type            = "FARGATE"
  platform_version       = "LATEST"
  propagate_tags         = "SERVICE"
  enable_execute_command = false

  # Old and new tasks overlap during a deploy (capacity never drops); old tasks hand their
  # connections over on SIGTERM. A deploy whose tasks keep failing rolls back by itself.
  deployment_minimum_healthy_percent = 100
  deployment_maximum_percent         = 200
  deployment_circuit_breaker {
    enable   = true
    rollback = true
  }

  network_configuration {
    subnets          = var.subnet_ids
    security_groups  = [aws_security_group.worker.id]
    assign_public_ip = var.assign_public_ip
  }

  lifecycle {
    ignore_changes = [desired_count] # owned by autoscaling
  }
}

# --- Autoscaling on ActiveConnections per task (the article's policy) ----------------------------

resource "aws_appautoscaling_target" "worker" {
  service_namespace  = "ecs"
  resource_id        = "service/${aws_ecs_cluster.main.name}/${aws_ecs_service.worker.name}"
  scalable_dimension = "ecs:service:DesiredCount"
  min_capacity       = var.min_tasks
  max_capacity       = var.max_tasks
}

resource "aws_appautoscaling_policy" "worker_connections" {
  name               = "${var.name}-active-connections-per-task"
  policy_type        = "TargetTrackingScaling"
  service_namespace  = aws_appautoscaling_target.worker.service_namespace
  resource_id        = aws_appautoscaling_target.worker.resource_id
  scalable_dimension = aws_appautoscaling_target.worker.scalable_dimension

  target_tracking_scaling_policy_configuration {
    target_value = var.target_connections_per_task
    # Every task publishes its own ActiveConnections under the service's dimension, so the
    # Average over the period is the average per task.
    customized_metric_specification {
      namespace   = local.metrics_namespace
      metric_name = "ActiveConnections"
      statistic   = "Average"
      dimensions {
        name  = local.metrics_dimension
        value = local.service_name
      }
    }
    scale_out_cooldown = 60
    # Scale-in hands connections over (a brief pause in each stream): do it unhurriedly.
    scale_in_cooldown = 300
  }
}
