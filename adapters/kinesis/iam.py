"""The Kinesis actions each process calls on the sink's stream: the source of truth for IAM
(tests/infra compares infra/iam.tf with it)."""

WORKER = ("kinesis:PutRecords",)  # the sink: PutRecords only
ROUTER: tuple[str, ...] = ()
DEATHS: tuple[str, ...] = ()
# `wsfleet messages`: the reader lists the shards and reads each from its oldest record.
OPERATOR = ("kinesis:GetRecords", "kinesis:GetShardIterator", "kinesis:ListShards")
