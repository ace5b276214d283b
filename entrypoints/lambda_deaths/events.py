"""Reading an EventBridge "ECS Task State Change" event: pure, so every refusal is testable.

Only a task of the worker service that has STOPPED is a death: the rule in infra/deaths.tf
sends nothing else, and the handler checks again (a rule edited by hand, a test event).
"""

import re
from collections.abc import Mapping
from typing import Any

import attrs

DETAIL_TYPE = "ECS Task State Change"
SOURCE = "aws.ecs"
MAX_REASON = 200
TASK_ARN = re.compile(
    r"arn:[a-z-]+:ecs:[a-z0-9-]+:\d{12}:task/(?P<cluster>[A-Za-z0-9_-]{1,255})/(?P<task>[0-9a-f]{32})"
)


class Malformed(ValueError):
    """The event is not an ECS task state change we can read: logged and dropped."""


@attrs.frozen
class TaskStopped:
    task_id: str
    reason: str


@attrs.frozen
class NotOurs:
    why: str  # another cluster or service, or not STOPPED: ignored


def read_event(event: Any, cluster_arn: str, service: str) -> TaskStopped | NotOurs:
    """Raises Malformed."""
    if not isinstance(event, Mapping):
        raise Malformed(f"the event is a {type(event).__name__}, not an object")
    if event.get("source") != SOURCE or event.get("detail-type") != DETAIL_TYPE:
        raise Malformed(
            f"not an ECS task state change (source {str(event.get('source'))[:40]!r}, "
            f"detail-type {str(event.get('detail-type'))[:40]!r})"
        )
    detail = event.get("detail")
    if not isinstance(detail, Mapping):
        raise Malformed("the event has no detail object")
    task_arn, cluster, group = (
        _text(detail, "taskArn"),
        _text(detail, "clusterArn"),
        _text(detail, "group"),
    )
    if cluster != cluster_arn:
        return NotOurs(f"cluster {cluster[:200]}")
    if group != f"service:{service}":
        return NotOurs(f"group {group[:200]}")
    status = _text(detail, "lastStatus")
    if status != "STOPPED":
        return NotOurs(f"lastStatus {status[:40]}")
    # arn:aws:ecs:<region>:<account>:task/<cluster name>/<task id> (the long ARN format, the
    # only one since 2021); the task id is what the worker's id starts with (identity.py).
    found = TASK_ARN.fullmatch(task_arn)
    if not found or found["cluster"] != cluster_arn.rsplit("/", 1)[-1]:
        raise Malformed(f"taskArn {task_arn[:200]!r} is not a task ARN of cluster {cluster}")
    why = " ".join(
        str(detail.get(key, "")).strip() for key in ("stopCode", "stoppedReason")
    ).strip()
    return TaskStopped(found["task"], f"ECS task STOPPED: {why or 'no reason given'}"[:MAX_REASON])


def _text(detail: Mapping[str, Any], key: str) -> str:
    value = detail.get(key)
    if not isinstance(value, str) or not value:
        raise Malformed(f"detail.{key} is missing or not a string")
    return value
