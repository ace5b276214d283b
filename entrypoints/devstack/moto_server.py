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

Kinesis requests are always served one at a time: moto's shard gives a put record "the highest
sequence number + 1" unlocked (its own comment: not safe for concurrency), so two PutRecords at
once can get the same number and the second replaces the first. Measured: 6,200 records put
side by side, 6,199 read back; a 1,000 msg/s demo on the Kinesis sink lost 23 messages of one
connection, stored by its worker with their checkpoint. The service has no such race.

A message made visible again by ChangeMessageVisibility (a worker giving a hint back) wakes
the long polls waiting on its queue, as in SQS, where a long poll returns a message as soon as
one is available. moto notifies its waiters only when a message is sent, and otherwise looks
again once a second: measured, a hint given back reached a waiting long poll 0.1-0.75 s later
(p50 0.51 s), a delay the service does not have, in every handoff on these adapters that gave a
hint back.

Always: moto's duplicate `Server` header is dropped (aiohttp refuses it in asyncio debug mode),
and request bodies are read before a request is served (with a lock, a client frozen half-way
through sending would otherwise hold every other client's calls to that service).
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


class OneRequestAtATime:
    """WSGI middleware: the requests of the services named (by their X-Amz-Target prefix, e.g.
    "DynamoDB_") one at a time, each service under a lock of its own; everything else (SQS
    long polls) concurrently."""

    def __init__(self, app: WsgiApp, targets: Iterable[str]) -> None:
        self._app = app
        self._locks = {target: threading.Lock() for target in targets}

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        lock = next((lk for prefix, lk in self._locks.items() if target.startswith(prefix)), None)
        if lock is None:
            return self._app(environ, start_response)
        with lock:
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


def wake_long_polls_on_give_back() -> None:
    """Patch moto's SQS so that a message made visible wakes the long polls of its queue."""
    from moto.sqs.models import SQSBackend

    original = SQSBackend.change_message_visibility

    def change_message_visibility(
        self: Any, queue_name: str, receipt_handle: str, visibility_timeout: int
    ) -> None:
        original(self, queue_name, receipt_handle, visibility_timeout)
        queue = self.get_queue(queue_name)
        with queue._messages_lock:  # the condition moto's long polls wait on
            queue._messages_lock.notify_all()

    SQSBackend.change_message_visibility = change_message_visibility  # type: ignore[method-assign]


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
    wake_long_polls_on_give_back()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a line per request costs CPU
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    server = ThreadedMotoServer(ip_address=args.host, port=args.port, verbose=False)
    server.start()
    wsgi = server._server
    assert wsgi is not None  # start() returns once it exists
    app = without_duplicate_server_header(wsgi.app)
    serialized = ["Kinesis_", *(["DynamoDB_"] if args.serialize_dynamodb else [])]
    app = OneRequestAtATime(app, serialized)
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
