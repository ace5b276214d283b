"""`wsfleet demo`: the whole system on one machine, a crash and a handoff, and the verdict.

Exit codes: 0 every invariant held; 1 an invariant broke, or the demo could not run (a
process did not start, a phase timed out; the logs are kept and their place printed);
2 bad arguments.
"""

import argparse
import asyncio
import json
import shutil
import signal
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from application.errors import ApplicationError, ConfigurationError
from entrypoints.backends import NAMES as BACKENDS
from entrypoints.cli.options import PREFIX
from entrypoints.demo.options import DemoError, DemoOptions
from entrypoints.devstack.process import ProcessError, Processes
from entrypoints.settings.load import SINKS_OF_BACKEND

if TYPE_CHECKING:
    from entrypoints.demo.judge import Summary

DESCRIPTION = (
    "run the whole system on this machine: the upstream simulator, the local API and 3 worker "
    "processes; START 30 connections, SIGKILL one worker and SIGTERM another, then judge from "
    "the simulator's records and the sink: takeover times, messages lost and duplicated"
)
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130
LEASE_MS = 2000
QUICK_CONNECTIONS = 6
QUICK_STEADY_S = 1.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = (
        "The embedded demo keeps its state in a temporary directory (or --data-dir) and "
        "ignores WSFLEET_* variables other than WSFLEET_BACKEND; --backend aws starts DynamoDB "
        "Local and a moto server for SQS (moto alone, and says so, without java or DynamoDB "
        "Local: `make dynamodb-local`), or uses --endpoint-url, with tables and a queue named "
        "for the run; --backend postgres starts a throwaway PostgreSQL server (the pgserver "
        "wheel of the test extra) with a fresh, migrated database. "
        "Exit codes: 0 every invariant held, 1 an invariant broke or the demo could not run, "
        "2 bad arguments."
    )
    parser.add_argument(
        "--sink",
        choices=sorted({sink for sinks in SINKS_OF_BACKEND.values() for sink in sinks}),
        help="where the workers store messages: the backend's own (sqlite, the dynamodb "
        "messages table, the postgres messages table), or kinesis (a stream on moto, read back "
        "by the consumer rule: duplicates are counted, not refused; needs --backend aws)",
    )
    parser.add_argument("--connections", type=int, help="connections to START (default 30)")
    parser.add_argument("--workers", type=int, default=3, help="workers at any time (default 3)")
    parser.add_argument("--rate", type=float, default=5.0, help="messages/s per stream (5)")
    parser.add_argument(
        "--lease-ms",
        type=int,
        help=f"lease length; the other timings scale with it ({LEASE_MS})",
    )
    parser.add_argument("--steady", type=float, help="seconds of calm between phases (5)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"short run for tests and CI: {QUICK_CONNECTIONS} connections, "
        f"{QUICK_STEADY_S:g}s phases, plain output",
    )
    parser.add_argument("--no-live", action="store_true", help="plain lines, no live view")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    parser.add_argument("--keep", action="store_true", help="keep the logs and temporary state")


def check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.connections is not None and not 1 <= args.connections <= 1000:
        parser.error("--connections must be 1-1000")
    if not 2 <= args.workers <= 20:
        parser.error("--workers must be 2-20 (one is killed and one stopped)")
    if not 0 < args.rate <= 1000:
        parser.error("--rate must be above 0 and at most 1000")
    if args.lease_ms is not None and not 1000 <= args.lease_ms <= 60_000:
        parser.error("--lease-ms must be 1000-60000")
    if args.steady is not None and not 0 <= args.steady <= 600:
        parser.error("--steady must be 0-600 seconds")
    if getattr(args, "backend", None) != "aws" and getattr(args, "endpoint_url", None):
        parser.error("--endpoint-url needs --backend aws")


def options_from(args: argparse.Namespace, env: Mapping[str, str], console: Console) -> DemoOptions:
    backend = getattr(args, "backend", None) or env.get(PREFIX + "BACKEND", "") or "embedded"
    if backend.lower() not in BACKENDS:
        raise ConfigurationError(
            f"{PREFIX}BACKEND={backend!r}: expected one of {', '.join(BACKENDS)}"
        )
    backend = backend.lower()
    runs = SINKS_OF_BACKEND[backend]
    sink = args.sink or runs[0]
    if sink not in runs:
        raise ConfigurationError(
            f"--sink {sink}: not with the {backend} backend (it runs {' or '.join(runs)})"
        )
    return DemoOptions(
        backend=backend,
        sink=sink,
        endpoint_url=getattr(args, "endpoint_url", None),
        data_dir=getattr(args, "data_dir", None),
        connections=args.connections or (QUICK_CONNECTIONS if args.quick else 30),
        workers=args.workers,
        rate=args.rate,
        lease_ms=args.lease_ms or LEASE_MS,
        steady_s=args.steady
        if args.steady is not None
        else (QUICK_STEADY_S if args.quick else 5.0),
        live=not (args.no_live or args.quick or args.json) and console.is_terminal,
        json=args.json,
        keep=args.keep,
        quick=args.quick,
    )


def run(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    from entrypoints.demo.report import print_summary  # heavy: every adapter

    console = Console(stderr=bool(args.json), highlight=False, soft_wrap=True)
    if not console.is_terminal:  # a pipe or a file: no live view, and room for the tables
        console = Console(stderr=bool(args.json), highlight=False, soft_wrap=True, width=160)
    options = options_from(args, env, console)
    # The demo's processes get only the demo's settings: a WSFLEET_DATA_DIR or custom sink
    # from the caller's shell must not point them at real state.
    process_env = {k: v for k, v in env.items() if not k.startswith(PREFIX)}
    process_env.update(options.worker_environment())
    run_dir = Path(tempfile.mkdtemp(prefix="wsfleet-demo-"))
    children = Processes(run_dir / "logs")
    keep = True
    try:
        summary = asyncio.run(_run(options, process_env, children, console, run_dir))
        keep = options.keep or not summary.ok
    except ConfigurationError:
        raise
    except asyncio.CancelledError:  # SIGTERM or SIGHUP: every process was ended on the way out
        console.print("demo stopped by a signal")
        return EXIT_INTERRUPTED
    except (DemoError, ProcessError, TimeoutError, ApplicationError, OSError) as exc:
        console.print(f"[bold red]demo failed[/]: {exc}")
        return EXIT_FAILED
    finally:
        children.kill_all_now()  # only if something outlived the orderly close
        if keep:
            console.print(f"logs of every process: {run_dir / 'logs'}")
        else:
            shutil.rmtree(run_dir, ignore_errors=True)
    print_summary(console, summary, per_connection=not options.quick or options.json)
    if options.json:
        processes = [
            {"name": c.name, "pid": c.pid, "exit_code": c.returncode, "signal": c.signalled}
            for c in children.all
        ]
        json.dump({**summary.to_json(), "processes": processes}, sys.stdout, indent=2)
        print()
    return EXIT_OK if summary.ok else EXIT_FAILED


async def _run(
    options: DemoOptions, env: dict[str, str], children: Processes, console: Console, run_dir: Path
) -> "Summary":
    from entrypoints.demo.scenario import Scenario  # heavy: every adapter
    from entrypoints.demo.view import LiveReporter, PlainReporter, Reporter

    title = f"wsfleet demo ({options.backend}, {options.sink} sink)"
    reporter: Reporter = LiveReporter(console, title) if options.live else PlainReporter(console)
    scenario = Scenario(options, env, children, reporter, run_dir)
    # Ctrl-C cancels this task (asyncio.run does that for SIGINT); SIGTERM and SIGHUP too, so
    # that the `finally` below ends every child process whichever way the demo is stopped.
    loop, task = asyncio.get_running_loop(), asyncio.current_task()
    assert task is not None
    for signum in (signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(signum, task.cancel)
    try:
        with reporter:
            return await scenario.run()
    finally:
        # Workers first, so that they hand their leases back; then the API and the simulator
        # (the AWS backend's services stop after them, in backends.py).
        await children.close(order=scenario.workers)
        for signum in (signal.SIGTERM, signal.SIGHUP):
            loop.remove_signal_handler(signum)
