"""`python -m entrypoints.simulator --port 8765 --rate 5`: serve until SIGINT or SIGTERM."""

import argparse
import asyncio
import logging
import signal
import ssl
import sys

from entrypoints.simulator.server import UpstreamSimulator


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m entrypoints.simulator",
        description="A live upstream: ws://HOST:PORT/stream/<id> emits "
        '{"seq": n, "data": "<id>:<n>"} at RATE messages/s; GET /records for the records.',
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default %(default)s)")
    parser.add_argument("--port", type=int, default=8765, help="0 picks a free port (printed)")
    parser.add_argument("--rate", type=float, default=5.0, help="messages/s per stream")
    parser.add_argument("--buffer", type=int, default=10_000, help="replay window per stream")
    parser.add_argument("--flaky-after", type=float, default=2.0, help="seconds, /flaky/<id>")
    parser.add_argument("--certfile", help="PEM certificate chain: serve wss://")
    parser.add_argument("--keyfile", help="PEM private key for --certfile")
    args = parser.parse_args(argv)
    if args.rate <= 0 or args.buffer < 1 or args.flaky_after <= 0:
        parser.error("--rate, --buffer and --flaky-after must be positive")
    if args.keyfile and not args.certfile:
        parser.error("--keyfile needs --certfile")
    return args


async def serve(args: argparse.Namespace) -> None:
    context = None
    if args.certfile:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(args.certfile, args.keyfile)
    simulator = UpstreamSimulator(
        rate=args.rate,
        buffer_size=args.buffer,
        flaky_drop_after_s=args.flaky_after,
        ssl_context=context,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await simulator.start(args.host, args.port)
    # One parseable line, so a parent process can learn the port chosen with --port 0.
    print(f"upstream simulator listening on {simulator.base_url}", flush=True)
    try:
        await stop.wait()
    finally:
        await simulator.stop()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(message)s")
    logging.getLogger("websockets").setLevel(logging.WARNING)  # one line per connection otherwise
    try:
        asyncio.run(serve(args))
    except OSError as exc:
        print(f"cannot serve on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
