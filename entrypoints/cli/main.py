"""`wsfleet`: the command line. One parser, one backend switch, one place for exit codes.

Command modules are imported when their command runs, and a dev command's module only when the
command line names it (or asks for help), so that `--help`, usage errors and the read-only
commands (`messages`, `status`, `history`) answer without importing the worker, the dev
tooling or another backend's adapters (tests/e2e/test_cli_import_path.py lists what they must
not import).
"""

import argparse
import asyncio
import importlib
import os
import re
import sys
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any

from application.errors import ApplicationError, ConfigurationError
from application.ports.sink import MAX_SEQ
from application.url_policy import ForbiddenUrl
from domain import DomainError
from entrypoints import dev_tooling
from entrypoints.cli.options import add_backend_options, command_environment

EXIT_OK = 0
EXIT_FAILED = 1  # refused (bad id or URL, not found, conflict) or the backend failed
EXIT_USAGE = 2  # bad arguments or configuration (argparse's own convention)
EXIT_INTERRUPTED = 130

DESCRIPTION = """\
Run and operate a wsfleet: workers that hold long-lived outbound WebSocket connections with
exactly one owner each. The embedded backend (default) keeps everything in SQLite files under
the data directory, for one host; --backend aws uses DynamoDB and SQS (--endpoint-url for a
local emulator such as moto); --backend postgres one PostgreSQL database
(WSFLEET_POSTGRES_URL; `wsfleet migrate` first)."""

EPILOG = """\
exit codes: 0 success; 1 refused (invalid id or URL, unknown connection, conflict) or the
backend failed; 2 bad arguments or configuration (including a missing data directory);
130 interrupted. `wsfleet demo` exits 1 if an invariant broke. `wsfleet worker` exits as the
ECS worker does (0 after a graceful shutdown, 1 crashed, 70 shutdown overran its budget).

Settings: every WSFLEET_* environment variable (docs/settings.md); flags override them."""

PRIVATE_HINT = (
    "  (an upstream on this machine or a private network: set "
    "WSFLEET_ALLOW_PRIVATE_UPSTREAMS=true for the command, the API and the workers; "
    "local development only)"
)

# The commands of the dev tooling (wsfleet-dev): command -> (its package, whose `cli` module
# has DESCRIPTION, add_arguments, check and run; whether it takes the backend options).
DEV_COMMANDS = {
    "simulate-upstream": ("entrypoints.simulator", False),
    "demo": ("entrypoints.demo", True),
}

Handler = Callable[[argparse.Namespace, Mapping[str, str]], Coroutine[Any, Any, int]]
_NAME = re.compile(r"[A-Za-z0-9._-]{1,48}")


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The whole parser; a dev command's own arguments (its module imported) only where `argv`
    (default: sys.argv) may name it or asks for help."""
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog="wsfleet", description=DESCRIPTION, epilog=EPILOG, formatter_class=formatter
    )
    add_backend_options(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(name: str, help_: str, handler: str | None, backend: bool = True) -> Any:
        p = sub.add_parser(name, help=help_, description=help_, formatter_class=formatter)
        if backend:
            add_backend_options(p)
        p.set_defaults(handler=handler)
        return p

    p = command(
        "worker", "run a worker: take connections, stream them, hand them over", "serve:worker"
    )
    p.add_argument("--name", type=_name, help="worker id prefix (a random suffix is added)")
    p.add_argument(
        "--health-port",
        type=_port,
        help="port of /healthz, /status and /metrics (0 disables) "
        "[WSFLEET_HEALTH_PORT, default 8080]",
    )

    p = command("api", "serve the event API over HTTP (the Lambda router's routes)", "serve:api")
    p.add_argument(
        "--host",
        help="address to bind [WSFLEET_API_HOST, default 127.0.0.1]; "
        "a non-loopback one needs WSFLEET_API_TOKEN",
    )
    p.add_argument(
        "--port", type=_port, help="port; 0 picks a free one [WSFLEET_API_PORT, default 8000]"
    )

    p = command("start", "START a connection: someone should stream URL", "commands:start")
    p.add_argument("connection_id", metavar="ID", help="the connection id")
    p.add_argument("ws_url", metavar="URL", help="the upstream's ws:// or wss:// URL")
    p.add_argument("--json", action="store_true", help="print the API's JSON answer")

    p = command("stop", "STOP a connection: its owner releases it", "commands:stop")
    p.add_argument("connection_id", metavar="ID", help="the connection id")
    p.add_argument("--json", action="store_true", help="print the API's JSON answer")

    p = command(
        "status",
        "list connections: desired state, owner, lease remaining, token, checkpoint",
        "commands:status",
    )
    p.add_argument("--json", action="store_true", help="print JSON (the API's views)")
    p.add_argument(
        "--limit",
        type=_positive,
        default=None,
        help="at most this many (by id) [default 1000; 100000 with --watch]",
    )
    p.add_argument(
        "--watch",
        action="store_true",
        help="a live view of the fleet, refreshed in place: workers and their load, lease "
        "time left, the connections most in need of attention (Ctrl-C ends it)",
    )
    p.add_argument("--interval", type=_seconds, default=2.0, help="seconds between refreshes [2]")
    p.add_argument("--top", type=_positive, default=10, help="workers and connections listed [10]")
    p.add_argument("--count", type=_positive, help="stop after this many refreshes")
    p.add_argument(
        "--scrape",
        metavar="URL",
        action="append",
        help="a worker's health endpoint (http://host:port), for its ingest lag; repeatable",
    )

    p = command(
        "history",
        "the ownership log of a connection, or the log of a worker session",
        "commands:history",
    )
    p.add_argument(
        "connection_id",
        metavar="ID",
        help="a connection id, or a worker session id (worker#n, as `status` shows it)",
    )
    p.add_argument("--json", action="store_true", help="print JSON (the API's views)")

    p = command(
        "messages",
        "print a connection's stored messages in seq order (the built-in sinks)",
        "messages:messages",
    )
    p.add_argument("connection_id", metavar="ID", help="the connection id")
    p.add_argument(
        "--from-seq", type=_seq, default=0, help="the first seq to print [0: from the start]"
    )
    p.add_argument("--follow", action="store_true", help="keep printing new messages (Ctrl-C)")
    p.add_argument("--json", action="store_true", help="one JSON object per line, every field")
    p.add_argument("--interval", type=_seconds, default=1.0, help="--follow: seconds between reads")
    p.add_argument("--page", type=_positive, default=1000, help="messages read per request")

    command(
        "migrate",
        "bring the backend's database schema to this wsfleet's version (postgres; before the "
        "workers of a new version start)",
        "migrate:migrate",
    )

    p = command(
        "end-session",
        "a worker is certainly gone: end its sessions now and hint its connections to the others",
        "deaths:end_session",
    )
    p.add_argument(
        "--worker",
        metavar="WORKER_ID",
        help="the worker id (every session <WORKER_ID>#<n>); a systemd ExecStopPost= can pass "
        "the id it gave the worker (WSFLEET_WORKER_ID)",
    )
    p.add_argument(
        "--task", metavar="TASK_ID", help="an ECS task id: every worker id <TASK_ID>-<8 hex>"
    )
    p.add_argument(
        "--session", metavar="SESSION_ID", action="append", help="one session id; repeatable"
    )
    p.add_argument(
        "--reason", default="ended by wsfleet end-session", help="recorded with SessionEnded"
    )
    p.add_argument("--json", action="store_true", help="print the outcome as JSON")

    p = command(
        "fleet",
        "supervise N worker processes on this host: restart each on exit, end a dead one's "
        "sessions at once",
        "fleet:fleet",
    )
    p.add_argument("--workers", type=_positive, required=True, help="worker processes to run")
    p.add_argument("--name", type=_name, help="worker id prefix [the host name]")
    p.add_argument(
        "--health-port",
        type=_port,
        default=0,
        help="first health port: worker i listens on PORT+i (0, the default, disables them)",
    )
    p.add_argument(
        "--restart-delay",
        type=_seconds,
        default=1.0,
        help="seconds before restarting a worker that exited; doubled while it keeps failing "
        "within a minute, up to 30 [1]",
    )

    words = set(sys.argv[1:] if argv is None else argv)
    wanted = not words or bool(words & {"-h", "--help"})
    for name, (package, backend) in DEV_COMMANDS.items():
        if not (wanted or name in words):  # never parsed: a stand-in keeps it in the list
            command(name, "(wsfleet-dev)", None, backend=False)
        elif dev_tooling.installed(package):
            dev = importlib.import_module(f"{package}.cli")
            dev.add_arguments(command(name, dev.DESCRIPTION, None, backend))
        else:  # takes any arguments (no option prefix), refused in main() with what to install
            p = sub.add_parser(
                name, help="(not installed: needs the dev tooling)", prefix_chars="\0"
            )
            p.add_argument("arguments", nargs=argparse.REMAINDER)
    return parser


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    env = os.environ if environ is None else environ
    name = f"wsfleet {args.command}"
    try:
        if args.command in DEV_COMMANDS:
            package, backend = DEV_COMMANDS[args.command]
            dev_tooling.require(package, "this command")
            dev = importlib.import_module(f"{package}.cli")
            dev.check(parser, args)
            if backend:
                return int(dev.run(args, command_environment(args, env)))
            return int(dev.run(args))
        return asyncio.run(_handler(args.handler)(args, command_environment(args, env)))
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except ConfigurationError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ForbiddenUrl as exc:
        print(f"{name}: refused: {exc}", file=sys.stderr)
        if exc.internal:  # only then would the setting change the answer
            print(PRIVATE_HINT, file=sys.stderr)
        return EXIT_FAILED
    except DomainError as exc:
        print(f"{name}: refused: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except ApplicationError as exc:  # the store, queue or sink did not answer
        print(f"{name}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except Exception as exc:
        if not _aws_error(exc):
            raise
        print(f"{name}: AWS error: {exc}", file=sys.stderr)
        return EXIT_FAILED


def _aws_error(exc: Exception) -> bool:
    """AWS refused (a missing table, no access...). botocore is not imported for it: a process
    that never imported botocore cannot have raised its errors."""
    errors = sys.modules.get("botocore.exceptions")
    return errors is not None and isinstance(exc, (errors.BotoCoreError, errors.ClientError))


def _handler(ref: str) -> Handler:
    """`"commands:start"` -> entrypoints.cli.commands.start."""
    module, _, name = ref.partition(":")
    handler: Handler = getattr(importlib.import_module(f"entrypoints.cli.{module}"), name)
    return handler


def _port(text: str) -> int:
    value = _int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (0-65535)")
    return value


def _positive(text: str) -> int:
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return value


def _seq(text: str) -> int:
    value = _int(text)
    if not 0 <= value <= MAX_SEQ:
        raise argparse.ArgumentTypeError(f"{text!r} is not a seq (an integer in 0..2^63-1)")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0.1 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"{text!r}: between 0.1 and 3600 seconds")
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def _name(text: str) -> str:
    if not _NAME.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r}: use 1-48 of A-Z a-z 0-9 . _ -")
    return text
