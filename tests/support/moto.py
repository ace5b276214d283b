"""A moto server on 127.0.0.1 for the whole test session (moto's in-process mock does not patch
aiobotocore, so adapters talk to a real HTTP endpoint, as they would to AWS)."""

import os
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
    server._server.app = _without_duplicate_server_header(server._server.app)
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
