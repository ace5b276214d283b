# The Kinesis sink (WSFLEET_MESSAGE_SINK=kinesis, var.message_sink): a stream of the stack's
# own, on demand (no shards to size) and encrypted with the stack key, unless
# var.kinesis_stream_arn names one that already exists (then its key policy is yours to grant).

locals {
  kinesis_sink       = var.message_sink == "kinesis"
  create_kinesis     = local.kinesis_sink && var.kinesis_stream_arn == null
  kinesis_stream_arn = local.kinesis_sink ? coalesce(var.kinesis_stream_arn, one(aws_kinesis_stream.messages[*].arn)) : null
  # Only when chosen: a sink of your own in var.worker_extra_environment stays yours.
  kinesis_environment = local.kinesis_sink ? {
    WSFLEET_MESSAGE_SINK   = "kinesis"
    WSFLEET_KINESIS_STREAM = local.kinesis_stream_arn
  } : {}
}

resource "aws_kinesis_stream" "messages" {
  count            = local.create_kinesis ? 1 : 0
  name             = "${var.name}-messages"
  retention_period = var.kinesis_retention_hours
  encryption_type  = "KMS"
  kms_key_id       = local.kms_key_arn

  stream_mode_details {
    stream_mode = "ON_DEMAND"
  }
}
