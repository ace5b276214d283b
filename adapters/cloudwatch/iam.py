"""The CloudWatch actions each process calls: the single source of truth for IAM.

PutMetricData supports no resource-level permission (its resource must be "*"); infra/ limits
it with a `cloudwatch:namespace` condition instead (tests/infra checks both).
"""

WORKER: tuple[str, ...] = ("cloudwatch:PutMetricData",)

ROUTER: tuple[str, ...] = ()  # the router publishes no metrics

DEATHS: tuple[str, ...] = ()  # nor does the deaths Lambda

NAMESPACE_CONDITION_KEY = "cloudwatch:namespace"
