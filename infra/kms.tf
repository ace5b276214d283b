# One customer managed key for the stack's data at rest: tables, queues, logs, the image
# repository and the router's environment. Bring your own with var.kms_key_arn.

resource "aws_kms_key" "main" {
  count = var.kms_key_arn == null ? 1 : 0

  description             = "${var.name}: wsfleet data at rest"
  enable_key_rotation     = true
  deletion_window_in_days = 30
  policy                  = data.aws_iam_policy_document.kms[0].json
}

resource "aws_kms_alias" "main" {
  count = var.kms_key_arn == null ? 1 : 0

  name          = "alias/${var.name}"
  target_key_id = aws_kms_key.main[0].key_id
}

data "aws_iam_policy_document" "kms" {
  count = var.kms_key_arn == null ? 1 : 0

  # The account administers the key and delegates its use to IAM policies (the roles below
  # get only what their services need, through kms:ViaService).
  #checkov:skip=CKV_AWS_109:In a key policy, resource "*" is this key only; the account-root statement is AWS's default delegation of key use to IAM policies.
  #checkov:skip=CKV_AWS_111:In a key policy, write access applies to this key only, and only the account root (through IAM) holds it.
  #checkov:skip=CKV_AWS_356:In a key policy, resource "*" is this key only, not every resource in the account.
  statement {
    sid       = "AccountAdministersKey"
    actions   = ["kms:*"]
    resources = ["*"]
    principals {
      type        = "AWS"
      identifiers = ["arn:${local.partition}:iam::${local.account_id}:root"]
    }
  }

  # CloudWatch Logs encrypts the stack's log groups, and only those: their exact ARNs
  # (locals.tf), not a pattern another group's name could match.
  statement {
    sid = "CloudWatchLogsUsesKeyForStackLogGroups"
    actions = [
      "kms:Decrypt",
      "kms:Encrypt",
      "kms:GenerateDataKey*",
      "kms:ReEncrypt*",
      "kms:DescribeKey",
    ]
    resources = ["*"]
    principals {
      type        = "Service"
      identifiers = ["logs.${local.region}.amazonaws.com"]
    }
    condition {
      test     = "ArnEquals"
      variable = "kms:EncryptionContext:aws:logs:arn"
      values   = values(local.log_group_arns)
    }
  }
}
