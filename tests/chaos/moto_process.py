"""`python -m tests.chaos.moto_process`: the moto server in a process of its own, so that its
request handling never competes for the harness's GIL (the harness judges timings). Prints
`moto listening on http://HOST:PORT`, serves until SIGTERM. Carries the test fixture's two
corrections to moto (tests/support/moto.py explains them)."""

import logging
import signal
import threading

from moto.server import ThreadedMotoServer

from tests.support.moto import _OneDynamoDbRequestAtATime, _without_duplicate_server_header


def main() -> None:
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a line per request costs CPU
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    wsgi = server._server
    assert wsgi is not None
    wsgi.app = _OneDynamoDbRequestAtATime(_without_duplicate_server_header(wsgi.app))
    host, port = server.get_host_and_port()
    print(f"moto listening on http://{host}:{port}", flush=True)
    done = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: done.set())
    done.wait()
    server.stop()


if __name__ == "__main__":
    main()
