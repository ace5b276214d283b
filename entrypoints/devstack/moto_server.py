"""`python -m entrypoints.devstack.moto_server [--serialize-dynamodb]`: moto's server on
127.0.0.1 in a process of its own (its request handling never competes with the caller's
event loop for one GIL). Prints `moto listening on http://HOST:PORT`, serves until SIGINT or
SIGTERM.

moto serves SQS and CloudWatch for every local stack. It serves DynamoDB only where DynamoDB
Local cannot run, and then with `--serialize-dynamodb`: moto's DynamoDB is not atomic (a
cancelled transaction restores a deep copy of the tables, erasing writes committed meanwhile,
so two racing conditional writers can both win a lease; measured: 8 of 150 rounds of 20 racers
had 2-3 winners), and serving its requests one at a time restores per-item atomicity at the
cost of every concurrency the tests would otherwise exercise.

Always: moto's duplicate `Server` header is dropped (aiohttp refuses it in asyncio debug mode),
and request bodies are read before a request is served (with the lock, a client frozen half-way
through sending would otherwise hold every other client's DynamoDB calls).
"""

import argparse
import io
import logging
import signal
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

WsgiApp = Callable[..., Iterable[bytes]]


class OneDynamoDbRequestAtATime:
    """WSGI middleware: DynamoDB requests one at a time, everything else (SQS long polls)
    concurrently."""

    def __init__(self, app: WsgiApp) -> None:
        self._app = app
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        if not environ.get("HTTP_X_AMZ_TARGET", "").startswith("DynamoDB_"):
            return self._app(environ, start_response)
        with self._lock:
            return list(self._app(environ, start_response))  # the whole response, locked


def whole_body_first(app: WsgiApp) -> WsgiApp:
    def wrapped(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        if length:
            environ["wsgi.input"] = io.BytesIO(environ["wsgi.input"].read(length))
        return app(environ, start_response)

    return wrapped


def without_duplicate_server_header(app: WsgiApp) -> WsgiApp:
    def wrapped(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        def start(status: str, headers: list[tuple[str, str]], *exc_info: Any) -> Any:
            kept = [(k, v) for k, v in headers if k.lower() != "server"]
            return start_response(status, kept, *exc_info)

        return app(environ, start)

    return wrapped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m entrypoints.devstack.moto_server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument(
        "--serialize-dynamodb",
        action="store_true",
        help="serve DynamoDB requests one at a time (moto's DynamoDB is not atomic otherwise)",
    )
    args = parser.parse_args(argv)
    try:
        from moto.server import ThreadedMotoServer
    except ImportError:
        print("moto's server is missing: pip install 'moto[server]'", file=sys.stderr)
        return 2
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a line per request costs CPU
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    server = ThreadedMotoServer(ip_address=args.host, port=args.port, verbose=False)
    server.start()
    wsgi = server._server
    assert wsgi is not None  # start() returns once it exists
    app = without_duplicate_server_header(wsgi.app)
    if args.serialize_dynamodb:
        app = OneDynamoDbRequestAtATime(app)
    wsgi.app = whole_body_first(app)
    host, port = server.get_host_and_port()
    print(f"moto listening on http://{host}:{port}", flush=True)
    try:
        stop.wait()
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
