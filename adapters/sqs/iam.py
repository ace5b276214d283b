"""The SQS actions each process calls on the hint queue: the single source of truth for IAM.

infra/ grants exactly these on the queue's ARN (tests/infra checks the Terraform policies).
The batch calls are authorized by their single-message actions: SendMessageBatch needs
`sqs:SendMessage`, DeleteMessageBatch needs `sqs:DeleteMessage`.
"""

# receive + delete the hints; send: hand connections back on graceful shutdown.
WORKER: tuple[str, ...] = ("sqs:DeleteMessage", "sqs:ReceiveMessage", "sqs:SendMessage")

ROUTER: tuple[str, ...] = ("sqs:SendMessage",)  # the hint after a START

DEATHS: tuple[str, ...] = ("sqs:SendMessage",)  # a dead task's connections, hinted

OPERATOR: tuple[str, ...] = ("sqs:GetQueueAttributes",)  # queue depth for operators
