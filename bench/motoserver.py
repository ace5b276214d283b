"""`python -m bench.motoserver`: a moto server on 127.0.0.1 in a process of its own, so its
request handling never competes with the runner's event loop for one GIL.

It carries the same two fixes as the test fixture (tests/support/moto.py): DynamoDB requests
serialized (moto's transactions are not atomic otherwise: two racing conditional transactions
can both win) and a single Server header (aiohttp rejects moto's duplicate in debug mode).
"""

import argparse
import signal
import threading
from collections.abc import Callable, Iterable
from typing import Any

from moto.server import ThreadedMotoServer

App = Callable[[dict[str, Any], Any], Iterable[bytes]]


def serialize_dynamodb(app: App) -> App:
    lock = threading.Lock()

    def wrapped(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        if not environ.get("HTTP_X_AMZ_TARGET", "").startswith("DynamoDB_"):
            return app(environ, start_response)
        with lock:
            return list(app(environ, start_response))  # the whole response, under the lock

    return wrapped


def one_server_header(app: App) -> App:
    def wrapped(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        def start(status: str, headers: list[tuple[str, str]], *exc_info: Any) -> Any:
            kept = [(k, v) for k, v in headers if k.lower() != "server"]
            return start_response(status, kept, *exc_info)

        return app(environ, start)

    return wrapped


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.motoserver")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=args.port, verbose=False)
    server.start()
    assert server._server is not None
    server._server.app = serialize_dynamodb(one_server_header(server._server.app))
    host, port = server.get_host_and_port()
    print(f"moto listening on http://{host}:{port}", flush=True)
    done = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: done.set())
    done.wait()
    server.stop()


if __name__ == "__main__":
    main()
