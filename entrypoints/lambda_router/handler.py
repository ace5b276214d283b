"""The Lambda handler: `entrypoints.lambda_router.handler.handler`.

Clients are created once per Lambda container, on the first invocation (never at import), and
reused by every later invocation. aioboto3 clients are bound to the event loop that opened
them, so the container keeps ONE event loop for its lifetime and runs each invocation on it
with `run_until_complete`: `asyncio.run` per invocation would close the loop every time and
force new clients (TLS handshakes, credential look-ups) on every request. Lambda runs one
invocation at a time per container, so the loop is never re-entered.

A configuration error is raised (the invocation fails, and shows in the function's Errors
metric and logs) rather than answered: it is the deployment's fault, not the caller's.
"""

import asyncio
import logging
import os
from typing import Any

from entrypoints.api import EventApi
from entrypoints.api.http import ApiError, error_response
from entrypoints.containers import AwsContainer, provide, shutdown
from entrypoints.lambda_router.proxy import request_id_of, to_proxy_response, to_request
from entrypoints.logging_setup import bind, bind_globally, setup_logging
from entrypoints.settings import load_settings

log = logging.getLogger(__name__)


class _Runtime:
    """What one Lambda container keeps between invocations."""

    def __init__(self) -> None:
        settings = load_settings(os.environ, aws=True)  # the router always runs on AWS
        setup_logging(settings.log_level)
        bind_globally(service=settings.service_name)
        self.loop = asyncio.new_event_loop()
        self.container = AwsContainer(settings=settings)
        try:
            self.api: EventApi = self.loop.run_until_complete(provide(self.container.core.api))
        except BaseException:
            self.close()
            raise

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
                response = self.loop.run_until_complete(self.api.handle(request))
        return to_proxy_response(response, request_id)

    def close(self) -> None:
        try:
            self.loop.run_until_complete(shutdown(self.container))
        finally:
            self.loop.close()


_runtime: _Runtime | None = None


def handler(event: Any, context: Any) -> dict[str, Any]:
    global _runtime
    if _runtime is None:
        _runtime = _Runtime()
    return _runtime.invoke(event, context)


def close() -> None:
    """Close the clients and the loop (tests; a Lambda container is simply frozen/discarded)."""
    global _runtime
    if _runtime is not None:
        runtime, _runtime = _runtime, None
        runtime.close()
