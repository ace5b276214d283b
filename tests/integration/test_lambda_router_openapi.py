"""The Lambda router against its OpenAPI document, fuzzed by schemathesis: every generated
request (valid and invalid) goes through a small WSGI adapter that turns it into an API
Gateway REST proxy event, calls the handler in-process against moto, and hands the response
back for schemathesis to check: never a 500, status codes, headers and bodies as documented."""

import base64
import itertools
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.config import SchemathesisConfig
from schemathesis.config._checks import NEGATIVE_DATA_REJECTION_EXPECTED_STATUSES
from schemathesis.specs.openapi.checks import positive_data_acceptance

from entrypoints.devstack.aws import LocalAws
from entrypoints.lambda_router import handler as lambda_handler
from tests.support.apigw import LambdaContext, proxy_event
from tests.support.aws import reset
from tests.support.deployment import create_deployment_sync
from tests.support.logs import preserved_logging

OPENAPI = Path(__file__).parents[2] / "entrypoints" / "lambda_router" / "openapi.yaml"
# A schema-violating body over the 16 KiB limit is refused with the documented 413 before it
# is parsed; schemathesis's list of rejections lacks 413, so such a case (generated now and
# then: a run in three on two xdist workers, once in one process) failed ST201 although the
# API refused it as documented.
REJECTIONS = [*NEGATIVE_DATA_REJECTION_EXPECTED_STATUSES, "413"]
schema = schemathesis.openapi.from_path(
    OPENAPI,
    config=SchemathesisConfig.from_dict(
        {"checks": {"negative_data_rejection": {"expected-statuses": REJECTIONS}}}
    ),
)
_contexts = itertools.count(1)


def proxy_app(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
    """WSGI -> API Gateway proxy event -> the Lambda handler -> WSGI."""
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length) if length else b""
    # API Gateway passes the path as requested; WSGI has already percent-decoded PATH_INFO.
    path = environ.get("RAW_URI", "").split("?", 1)[0] or quote(environ["PATH_INFO"])
    headers = {
        key[5:].replace("_", "-").title(): value
        for key, value in environ.items()
        if key.startswith("HTTP_")
    }
    event = proxy_event(environ["REQUEST_METHOD"], path, headers=headers)
    if body:  # binary-safe, as API Gateway passes bodies of binary media types
        event["body"] = base64.b64encode(body).decode()
        event["isBase64Encoded"] = True
    context = LambdaContext(aws_request_id=f"fuzz-{next(_contexts)}")
    response = lambda_handler.handler(event, context)
    start_response(f"{response['statusCode']} -", list(response["headers"].items()))
    return [response["body"].encode()]


@pytest.fixture(scope="module")
def router(aws_session: LocalAws) -> Iterator[None]:
    reset(aws_session)
    env = create_deployment_sync(aws_session)
    with pytest.MonkeyPatch.context() as patch, preserved_logging():
        for name in [n for n in os.environ if n.startswith("WSFLEET_")]:
            patch.delenv(name)
        for name, value in env.items():
            patch.setenv(name, value)
        # No DNS: generated hosts are random names; the SSRF policy has its own tests.
        patch.setenv("WSFLEET_ALLOW_PRIVATE_UPSTREAMS", "true")
        patch.setenv("WSFLEET_LOG_LEVEL", "WARNING")
        lambda_handler.close()
        try:
            yield
        finally:
            lambda_handler.close()


@schema.parametrize()
@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_handler_conforms_to_its_openapi_document(
    case: schemathesis.Case[Any], router: None
) -> None:
    # Every default check but one: "schema-valid data is accepted" cannot hold for an API
    # whose validity also depends on DNS and the host allow-list (SSRF), on URL parsing
    # beyond a pattern, and on what is stored (404, 409): those answer 400/404/409 by design.
    case.call_and_validate(app=proxy_app, excluded_checks=[positive_data_acceptance])
