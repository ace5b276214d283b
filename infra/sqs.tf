# The hint queue and its dead-letter queue (settings from adapters/sqs/schema.py, checked by
# tests/infra). A hint only speeds pickup up; reconciliation finds every orphan without it.

resource "aws_sqs_queue" "hints_dlq" {
  name                              = "${var.queue_name}${local.dlq_suffix}"
  message_retention_seconds         = 1209600 # 14 days to look at what kept failing
  kms_master_key_id                 = local.kms_key_arn
  kms_data_key_reuse_period_seconds = 300
}

resource "aws_sqs_queue" "hints" {
  name                              = var.queue_name
  visibility_timeout_seconds        = local.queue_visibility_timeout_s
  receive_wait_time_seconds         = local.queue_receive_wait_s
  message_retention_seconds         = local.queue_retention_s
  kms_master_key_id                 = local.kms_key_arn
  kms_data_key_reuse_period_seconds = 300

  redrive_policy = jsonencode({
    deadLetterTargetArn = aws_sqs_queue.hints_dlq.arn
    maxReceiveCount     = local.queue_max_receive_count
  })
}

# Only the hint queue may move messages into the DLQ.
resource "aws_sqs_queue_redrive_allow_policy" "hints_dlq" {
  queue_url = aws_sqs_queue.hints_dlq.id

  redrive_allow_policy = jsonencode({
    redrivePermission = "byQueue"
    sourceQueueArns   = [aws_sqs_queue.hints.arn]
  })
}

# Refuse plain-HTTP access to both queues.
data "aws_iam_policy_document" "queue_tls_only" {
  for_each = {
    hints     = aws_sqs_queue.hints.arn
    hints_dlq = aws_sqs_queue.hints_dlq.arn
  }

  statement {
    sid       = "DenyInsecureTransport"
    effect    = "Deny"
    actions   = ["sqs:*"]
    resources = [each.value]
    principals {
      type        = "*"
      identifiers = ["*"]
    }
    condition {
      test     = "Bool"
      variable = "aws:SecureTransport"
      values   = ["false"]
    }
  }
}

resource "aws_sqs_queue_policy" "tls_only" {
  for_each = {
    hints     = aws_sqs_queue.hints.id
    hints_dlq = aws_sqs_queue.hints_dlq.id
  }

  queue_url = each.value
  policy    = data.aws_iam_policy_document.queue_tls_only[each.key].json
}
