"""The Lambda handler: `entrypoints.lambda_router.handler.handler`.

One event loop and one set of clients per Lambda container (entrypoints/lambda_runtime.py).
A configuration error is raised (the invocation fails, and shows in the function's Errors
metric and logs) rather than answered: it is the deployment's fault, not the caller's.
"""

import logging
import os
from typing import Any

from entrypoints.api import EventApi
from entrypoints.api.http import ApiError, error_response
from entrypoints.lambda_router.proxy import request_id_of, to_proxy_response, to_request
from entrypoints.lambda_runtime import AwsRuntime, PerContainer
from entrypoints.logging_setup import bind
from entrypoints.settings import load_settings

log = logging.getLogger(__name__)


class _Runtime:
    """What one Lambda container keeps between invocations."""

    def __init__(self) -> None:
        settings = load_settings(os.environ, aws=True)  # the router always runs on AWS
        self.aws = AwsRuntime(settings)
        self.api: EventApi = self.aws.provide(self.aws.container.core.api)

    def invoke(self, event: Any, context: Any) -> dict[str, Any]:
        lambda_request_id = str(getattr(context, "aws_request_id", "") or "local")
        if not isinstance(event, dict):
            event = {}
        request_id = request_id_of(event, lambda_request_id)
        with bind(request_id=request_id, lambda_request_id=lambda_request_id):
            try:
                request = to_request(event, request_id)
            except ApiError as exc:
                response = error_response(exc.status, exc.code, exc.message, request_id)
                log.info("refused before routing: %d %s", exc.status, exc.message)
            else:
                response = self.aws.run(self.api.handle(request))
        return to_proxy_response(response, request_id)


_runtime = PerContainer(_Runtime, lambda runtime: runtime.aws.close())


def handler(event: Any, context: Any) -> dict[str, Any]:
    return _runtime.get().invoke(event, context)


def close() -> None:
    """Close the clients and the loop (tests; a Lambda container is simply discarded)."""
    _runtime.close()
