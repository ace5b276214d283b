"""A moto server on 127.0.0.1 for the whole test session (moto's in-process mock does not patch
aiobotocore, so adapters talk to a real HTTP endpoint, as they would to AWS)."""

import os
import urllib.request
from collections.abc import Iterator

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
    host, port = server.get_host_and_port()
    try:
        yield MotoEndpoint(url=f"http://{host}:{port}")
    finally:
        server.stop()


@pytest.fixture
def moto(moto_server: MotoEndpoint) -> MotoEndpoint:
    """The session's moto server, emptied before the test."""
    moto_server.reset()
    return moto_server
