# The four tables of adapters/dynamodb/tables.py (built from schema.py). Keys, the index, its
# projection and TTL are checked against that code by tests/infra; capacity is this file's own.

locals {
  provisioned = var.billing_mode == "PROVISIONED"
  capacity    = var.provisioned_capacity
}

resource "aws_dynamodb_table" "connections" {
  name                        = var.connections_table_name
  billing_mode                = var.billing_mode
  hash_key                    = "pk"
  read_capacity               = local.provisioned ? local.capacity.connections.read_min : null
  write_capacity              = local.provisioned ? local.capacity.connections.write_min : null
  deletion_protection_enabled = var.deletion_protection

  attribute {
    name = "pk"
    type = "S"
  }
  attribute {
    name = local.orphan_index_partition_key
    type = "S"
  }
  attribute {
    name = local.orphan_index_sort_key
    type = "N"
  }
  attribute {
    name = local.owner_index_partition_key
    type = "S"
  }
  attribute {
    name = local.stop_index_partition_key
    type = "S"
  }

  # Sparse: only STARTED, unowned connections carry orphan_shard (written when ownership
  # changes, never on a heartbeat). Sharded: "STARTED#00".."STARTED#nn". ALL: a reconciliation
  # page yields whole connections without a read per item.
  global_secondary_index {
    name            = local.orphan_index_name
    hash_key        = local.orphan_index_partition_key
    range_key       = local.orphan_index_sort_key
    projection_type = "ALL"
    read_capacity   = local.provisioned ? local.capacity.orphan_index.read_min : null
    write_capacity  = local.provisioned ? local.capacity.orphan_index.write_min : null
  }

  # Sparse: owned connections by owner session, to find a dead session's connections. KEYS_ONLY:
  # checkpoints and STOPs of owned connections change nothing it projects, so cost it nothing.
  global_secondary_index {
    name            = local.owner_index_name
    hash_key        = local.owner_index_partition_key
    projection_type = "KEYS_ONLY"
    read_capacity   = local.provisioned ? local.capacity.owner_indexes.read_min : null
    write_capacity  = local.provisioned ? local.capacity.owner_indexes.write_min : null
  }

  # Sparse: only STOPPED connections still owned, by owner: one Query per STOP check per worker.
  global_secondary_index {
    name            = local.stop_index_name
    hash_key        = local.stop_index_partition_key
    projection_type = "KEYS_ONLY"
    read_capacity   = local.provisioned ? local.capacity.owner_indexes.read_min : null
    write_capacity  = local.provisioned ? local.capacity.owner_indexes.write_min : null
  }

  point_in_time_recovery {
    enabled = var.point_in_time_recovery
  }

  server_side_encryption {
    enabled     = true
    kms_key_arn = local.kms_key_arn
  }

  lifecycle {
    # With PROVISIONED, Application Auto Scaling owns the capacities of the table and of the
    # index; without this, every apply would reset them to the minimums mid-load. The index's
    # definition comes from the code (and tests/infra holds this file to it): changing it is a
    # migration (new index, switch the code, drop the old one), applied with this lifted.
    ignore_changes = [read_capacity, write_capacity, global_secondary_index]
  }
}

# One small item per worker process, renewed on its heartbeat (the only per-heartbeat write).
resource "aws_dynamodb_table" "sessions" {
  name                        = var.sessions_table_name
  billing_mode                = var.billing_mode
  hash_key                    = "pk"
  read_capacity               = local.provisioned ? local.capacity.sessions.read_min : null
  write_capacity              = local.provisioned ? local.capacity.sessions.write_min : null
  deletion_protection_enabled = var.deletion_protection

  attribute {
    name = "pk"
    type = "S"
  }

  point_in_time_recovery {
    enabled = var.point_in_time_recovery
  }

  server_side_encryption {
    enabled     = true
    kms_key_arn = local.kms_key_arn
  }

  lifecycle {
    ignore_changes = [read_capacity, write_capacity]
  }
}

resource "aws_dynamodb_table" "events" {
  name                        = var.events_table_name
  billing_mode                = var.billing_mode
  hash_key                    = "pk"
  range_key                   = "sk"
  read_capacity               = local.provisioned ? local.capacity.events.read_min : null
  write_capacity              = local.provisioned ? local.capacity.events.write_min : null
  deletion_protection_enabled = var.deletion_protection

  attribute {
    name = "pk"
    type = "S"
  }
  attribute {
    name = "sk"
    type = "N"
  }

  point_in_time_recovery {
    enabled = var.point_in_time_recovery
  }

  server_side_encryption {
    enabled     = true
    kms_key_arn = local.kms_key_arn
  }

  lifecycle {
    ignore_changes = [read_capacity, write_capacity]
  }
}

resource "aws_dynamodb_table" "messages" {
  name                        = var.messages_table_name
  billing_mode                = var.billing_mode
  hash_key                    = "pk"
  range_key                   = "sk"
  read_capacity               = local.provisioned ? local.capacity.messages.read_min : null
  write_capacity              = local.provisioned ? local.capacity.messages.write_min : null
  deletion_protection_enabled = var.deletion_protection

  attribute {
    name = "pk"
    type = "S"
  }
  attribute {
    name = "sk"
    type = "N"
  }

  # Only messages expire: the sink writes expires_at (epoch seconds) when a retention is set
  # (var.message_retention_days). DynamoDB deletes expired items lazily, within about two days.
  ttl {
    attribute_name = local.ttl_attribute
    enabled        = true
  }

  point_in_time_recovery {
    enabled = var.point_in_time_recovery
  }

  server_side_encryption {
    enabled     = true
    kms_key_arn = local.kms_key_arn
  }

  lifecycle {
    ignore_changes = [read_capacity, write_capacity]
  }
}

# --- Capacity autoscaling (billing_mode = PROVISIONED) -------------------------------------------

locals {
  table_resource_ids = {
    connections  = "table/${aws_dynamodb_table.connections.name}"
    orphan_index = "table/${aws_dynamodb_table.connections.name}/index/${local.orphan_index_name}"
    owner_index  = "table/${aws_dynamodb_table.connections.name}/index/${local.owner_index_name}"
    stop_index   = "table/${aws_dynamodb_table.connections.name}/index/${local.stop_index_name}"
    sessions     = "table/${aws_dynamodb_table.sessions.name}"
    events       = "table/${aws_dynamodb_table.events.name}"
    messages     = "table/${aws_dynamodb_table.messages.name}"
  }
  # Both owner indexes scale within the same bounds (each is small and written on ownership
  # changes only).
  capacity_key = {
    owner_index = "owner_indexes"
    stop_index  = "owner_indexes"
  }

  # One scalable target per (table or index, read or write).
  capacity_targets = local.provisioned ? merge([
    for key, resource_id in local.table_resource_ids : {
      for kind in ["read", "write"] : "${key}-${kind}" => {
        resource_id = resource_id
        kind        = kind
        dimension   = "dynamodb:${endswith(key, "_index") ? "index" : "table"}:${kind == "read" ? "Read" : "Write"}CapacityUnits"
        metric      = "DynamoDB${kind == "read" ? "Read" : "Write"}CapacityUtilization"
        min         = local.capacity[lookup(local.capacity_key, key, key)]["${kind}_min"]
        max         = local.capacity[lookup(local.capacity_key, key, key)]["${kind}_max"]
      }
    }
  ]...) : {}
}

resource "aws_appautoscaling_target" "capacity" {
  for_each = local.capacity_targets

  service_namespace  = "dynamodb"
  resource_id        = each.value.resource_id
  scalable_dimension = each.value.dimension
  min_capacity       = each.value.min
  max_capacity       = each.value.max
}

resource "aws_appautoscaling_policy" "capacity" {
  for_each = local.capacity_targets

  name               = "${var.name}-${each.key}"
  policy_type        = "TargetTrackingScaling"
  service_namespace  = aws_appautoscaling_target.capacity[each.key].service_namespace
  resource_id        = aws_appautoscaling_target.capacity[each.key].resource_id
  scalable_dimension = aws_appautoscaling_target.capacity[each.key].scalable_dimension

  target_tracking_scaling_policy_configuration {
    target_value = var.capacity_target_utilization
    predefined_metric_specification {
      predefined_metric_type = each.value.metric
    }
  }
}
