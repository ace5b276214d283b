"""`wsfleet simulate-upstream`: the upstream simulator as a command.

The same server and options as `python -m entrypoints.simulator`; it prints one line,
`upstream simulator listening on ws://HOST:PORT`, then serves until SIGINT or SIGTERM.
"""

import argparse
import asyncio
import logging
import sys

from entrypoints.simulator.__main__ import serve

DESCRIPTION = "serve simulated live upstream streams (ws://HOST:PORT/stream/<id>)"
EXIT_OK = 0
EXIT_FAILED = 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default %(default)s)")
    parser.add_argument(
        "--port", type=int, default=8765, help="port (default %(default)s); 0 picks a free one"
    )
    parser.add_argument(
        "--rate", type=float, default=5.0, help="messages/s per stream (default %(default)s)"
    )
    parser.add_argument(
        "--buffer", type=int, default=10_000, help="replay window per stream, in messages"
    )
    parser.add_argument(
        "--flaky-after", type=float, default=2.0, help="seconds before /flaky/<id> drops"
    )
    parser.add_argument("--certfile", help="PEM certificate chain: serve wss://")
    parser.add_argument("--keyfile", help="PEM private key for --certfile")


def check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Exits 2 (argparse's usage error) for values the simulator cannot use."""
    if args.rate <= 0 or args.buffer < 1 or args.flaky_after <= 0:
        parser.error("--rate, --buffer and --flaky-after must be positive")
    if not 0 <= args.port <= 65535:
        parser.error("--port must be 0-65535")
    if args.keyfile and not args.certfile:
        parser.error("--keyfile needs --certfile")


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(message)s")
    logging.getLogger("websockets").setLevel(logging.WARNING)
    try:
        asyncio.run(serve(args))
    except OSError as exc:
        print(
            f"wsfleet simulate-upstream: cannot serve on {args.host}:{args.port}: {exc}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    return EXIT_OK
