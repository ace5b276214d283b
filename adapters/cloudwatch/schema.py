"""CloudWatch names and limits, defined once: the adapter publishes under them and infra/
(the ECS scaling policy, alarms, dashboards) is checked against them.

ECS target tracking follows AUTOSCALING_METRIC in DEFAULT_NAMESPACE with the one dimension
SERVICE_DIMENSION = <the ECS service name>, statistic AUTOSCALING_STATISTIC. Every worker
publishes its own count under that same single dimension (no per-task dimension: a metric's
identity is its full set of dimensions, and the policy must see one metric). The Average over
a period is then the mean connections per task, which falls as tasks are added, as target
tracking requires; the Sum is the fleet's total, for dashboards.
"""

from typing import Final

from application.ports.metrics import ACTIVE_CONNECTIONS

DEFAULT_NAMESPACE = "WsFleet"
SERVICE_DIMENSION = "ServiceName"
AUTOSCALING_METRIC = ACTIVE_CONNECTIONS
AUTOSCALING_STATISTIC = "Average"

COUNTER_UNIT: Final = "Count"
GAUGE_UNIT: Final = "Count"  # every gauge wsfleet records counts something (connections)
TIMING_UNIT: Final = "Milliseconds"

# PutMetricData limits: data per request, values per datum (Values/Counts), and the range of a
# value (NaN and infinities are refused; so is a whole request holding one).
MAX_DATA_PER_REQUEST = 1000
MAX_VALUES_PER_DATUM = 150
MAX_ABS_VALUE = 2.0**360
MIN_ABS_VALUE = 2.0**-260
