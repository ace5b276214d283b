"""A local AWS emulator for `wsfleet demo --backend aws`: moto's server on 127.0.0.1, as a
process of its own (`python -m entrypoints.demo.moto_server --port 0`), so the demo's event
loop and the workers never wait on it. Prints `moto server listening on http://HOST:PORT`,
then serves until SIGINT or SIGTERM.

Two corrections to moto, the same as the test suite's (tests/support/moto.py, which explains
them): DynamoDB requests are served one at a time, because moto's transactions are not atomic
against each other (two racing conditional writers could both win a lease); and moto's
duplicate `Server` header is dropped, because aiohttp refuses it in asyncio debug mode.
"""

import argparse
import signal
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

WsgiApp = Callable[..., Iterable[bytes]]


class OneDynamoDbRequestAtATime:
    def __init__(self, app: WsgiApp) -> None:
        self._app = app
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        if not environ.get("HTTP_X_AMZ_TARGET", "").startswith("DynamoDB_"):
            return self._app(environ, start_response)
        with self._lock:
            return list(self._app(environ, start_response))


def without_duplicate_server_header(app: WsgiApp) -> WsgiApp:
    def wrapped(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        def start(status: str, headers: list[tuple[str, str]], *exc_info: Any) -> Any:
            return start_response(
                status, [(k, v) for k, v in headers if k.lower() != "server"], *exc_info
            )

        return app(environ, start)

    return wrapped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m entrypoints.demo.moto_server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        from moto.server import ThreadedMotoServer
    except ImportError:
        print(
            "the aws demo needs moto's server: pip install 'moto[server]' (make install does)",
            file=sys.stderr,
        )
        return 2
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    server = ThreadedMotoServer(ip_address=args.host, port=args.port, verbose=False)
    server.start()
    wsgi = server._server
    assert wsgi is not None  # start() returns once it exists
    wsgi.app = OneDynamoDbRequestAtATime(without_duplicate_server_header(wsgi.app))
    host, port = server.get_host_and_port()
    print(f"moto server listening on http://{host}:{port}", flush=True)
    try:
        stop.wait()
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
