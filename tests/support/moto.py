"""A moto server on 127.0.0.1 for the whole test session (moto's in-process mock does not patch
aiobotocore, so adapters talk to a real HTTP endpoint, as they would to AWS)."""

import os
import threading
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import attrs
import pytest
from moto.server import ThreadedMotoServer

REGION = "us-east-1"


@attrs.frozen
class MotoEndpoint:
    url: str
    region: str = REGION

    def reset(self) -> None:
        request = urllib.request.Request(f"{self.url}/moto-api/reset", method="POST")
        with urllib.request.urlopen(request, timeout=10):
            pass


class _OneDynamoDbRequestAtATime:
    """WSGI middleware. moto serves each request on its own thread and does not lock its
    DynamoDB backend: a transaction deep-copies the tables and restores that copy when it is
    cancelled, erasing writes committed meanwhile, so two racing conditional transactions can
    both win (measured: 8 of 150 rounds of 20 racers had 2-3 winners). DynamoDB itself is
    atomic per item; serializing DynamoDB requests restores that. Other services (SQS long
    polls) stay concurrent."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self._app = app
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        if not environ.get("HTTP_X_AMZ_TARGET", "").startswith("DynamoDB_"):
            return self._app(environ, start_response)
        with self._lock:
            return list(self._app(environ, start_response))  # the whole response, locked


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoEndpoint]:
    # Fake credentials so botocore never looks further (no network, no real account).
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    os.environ.setdefault("AWS_DEFAULT_REGION", REGION)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    # moto answers with its own "server: amazon.com" beside werkzeug's Server header; aiohttp
    # parses strictly in asyncio debug mode and rejects the duplicate, failing every aiobotocore
    # call. Keep werkzeug's only.
    wsgi = server._server
    assert wsgi is not None  # start() created it
    wsgi.app = _without_duplicate_server_header(wsgi.app)
    wsgi.app = _OneDynamoDbRequestAtATime(wsgi.app)
    host, port = server.get_host_and_port()
    try:
        yield MotoEndpoint(url=f"http://{host}:{port}")
    finally:
        server.stop()


def _without_duplicate_server_header(app: Callable[..., Any]) -> Callable[..., Any]:
    def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        def start(status: str, headers: list[tuple[str, str]], *exc_info: Any) -> Any:
            kept = [(k, v) for k, v in headers if k.lower() != "server"]
            return start_response(status, kept, *exc_info)

        return app(environ, start)  # type: ignore[no-any-return]

    return wrapped


@pytest.fixture
def moto(moto_server: MotoEndpoint) -> MotoEndpoint:
    """The session's moto server, emptied before the test."""
    moto_server.reset()
    return moto_server
