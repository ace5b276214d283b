"""`python -m tests.chaos.moto_process`: the moto server in a process of its own, so that its
request handling never competes for the harness's GIL (the harness judges timings). Prints
`moto listening on http://HOST:PORT`, serves until SIGTERM. Carries the test fixture's two
corrections to moto (tests/support/moto.py explains them), and a third the chaos suite needs:
the request body is read before DynamoDB's lock is taken."""

import io
import logging
import signal
import threading
from collections.abc import Callable, Iterable
from typing import Any

from moto.server import ThreadedMotoServer

from tests.support.moto import _OneDynamoDbRequestAtATime, _without_duplicate_server_header

WsgiApp = Callable[..., Iterable[bytes]]


class _WholeBodyFirst:
    """WSGI middleware. The serializing middleware holds its lock while moto reads the body;
    a client frozen (SIGSTOP) half-way through sending a request would then hold every other
    client's DynamoDB calls until it resumed — a stall of moto's making (DynamoDB serves each
    request on its own; found by the chaos suite). Reading the body first leaves only the
    frozen client's own request waiting."""

    def __init__(self, app: WsgiApp) -> None:
        self._app = app

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        if length:
            environ["wsgi.input"] = io.BytesIO(environ["wsgi.input"].read(length))
        return self._app(environ, start_response)


def main() -> None:
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a line per request costs CPU
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    wsgi = server._server
    assert wsgi is not None
    wsgi.app = _WholeBodyFirst(
        _OneDynamoDbRequestAtATime(_without_duplicate_server_header(wsgi.app))
    )
    host, port = server.get_host_and_port()
    print(f"moto listening on http://{host}:{port}", flush=True)
    done = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: done.set())
    done.wait()
    server.stop()


if __name__ == "__main__":
    main()
