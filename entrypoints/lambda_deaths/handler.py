"""The deaths Lambda handler: `entrypoints.lambda_deaths.handler.handler`.

Invoked asynchronously by EventBridge. One event loop and one set of clients per Lambda
container (entrypoints/lambda_runtime.py).

Outcomes: a malformed event is logged and dropped (retrying cannot mend it); an event about
another cluster, service or status is ignored; a store or configuration failure raises, so
that Lambda retries the event (ending sessions is idempotent) and it shows in Errors.
"""

import logging
import os
from typing import Any

from application.deaths import WorkerDeaths
from application.errors import ConfigurationError
from entrypoints.lambda_deaths.events import Malformed, NotOurs, read_event
from entrypoints.lambda_runtime import AwsRuntime, PerContainer
from entrypoints.logging_setup import bind
from entrypoints.settings import load_settings

log = logging.getLogger(__name__)


class _Runtime:
    def __init__(self) -> None:
        settings = load_settings(os.environ, aws=True)
        if not (settings.worker_cluster_arn and settings.worker_service):
            raise ConfigurationError(
                "the deaths Lambda needs WSFLEET_WORKER_CLUSTER_ARN and WSFLEET_WORKER_SERVICE"
            )
        if not settings.queue_url:
            raise ConfigurationError("the deaths Lambda needs WSFLEET_QUEUE_URL (the hints)")
        self.cluster_arn: str = settings.worker_cluster_arn
        self.service: str = settings.worker_service
        self.aws = AwsRuntime(settings)
        self.deaths: WorkerDeaths = self.aws.provide(self.aws.container.core.deaths)

    def invoke(self, event: Any, context: Any) -> dict[str, Any]:
        lambda_request_id = str(getattr(context, "aws_request_id", "") or "local")
        with bind(lambda_request_id=lambda_request_id):
            try:
                found = read_event(event, self.cluster_arn, self.service)
            except Malformed as exc:
                log.warning("malformed event dropped: %s", exc)
                return {"result": "malformed", "problem": str(exc)}
            if isinstance(found, NotOurs):
                log.info("event ignored: %s", found.why)
                return {"result": "ignored", "why": found.why}
            with bind(task_id=found.task_id):
                outcome = self.aws.run(self.deaths.task_died(found.task_id, found.reason))
            return {
                "result": "ended",
                "task_id": found.task_id,
                "sessions": list(outcome.sessions),
                "ended": list(outcome.ended),
                "hinted": len(outcome.hinted),
                "hints_sent": not outcome.hints_failed,
            }


_runtime = PerContainer(_Runtime, lambda runtime: runtime.aws.close())


def handler(event: Any, context: Any) -> dict[str, Any]:
    return _runtime.get().invoke(event, context)


def close() -> None:
    """Close the clients and the loop (tests; a Lambda container is simply discarded)."""
    _runtime.close()
