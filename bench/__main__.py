"""`python -m bench` (`make bench`): run the benchmarks, print the table, write
bench/out/results.json and bench/out/benchmarks.png. `--quick` is a smoke run (seconds)."""

import argparse
import asyncio
import json
import logging
import tempfile
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from adapters.dynamodb.schema import DEFAULT_ORPHAN_SHARDS
from adapters.postgres.db import migrate_database
from bench import machine
from bench.backends import Backend, open_backend
from bench.balance import run_balance
from bench.balance_skew import run_balance_skew
from bench.capacity import run_capacity, run_floor
from bench.capacity_worker import POSTGRES_URL_VARIABLE
from bench.cost import run_cost
from bench.deaths import run_deaths
from bench.fleet_scenario import run_fleet
from bench.ingest import run_ingest
from bench.kinesis_batches import render as render_kinesis_batches
from bench.kinesis_batches import run_kinesis_batches
from bench.kinesis_crash import render as render_kinesis_crash
from bench.kinesis_crash import run_kinesis_crash
from bench.limits import raise_open_files
from bench.read_back import render as render_read_back
from bench.read_back import run_read_back
from bench.report import table
from bench.scale import render as render_scale
from bench.scale import run_scale
from bench.sim.fleet import SimSize
from bench.sim.scenarios import SCENARIOS as SCALE_SCENARIOS
from bench.sink_writers import render as render_sinks
from bench.sink_writers import run_sink_bench
from bench.store_cost import run_store_cost
from bench.store_cost_postgres import run_store_cost_postgres
from bench.upstream import SimulatorProcess, simulator
from entrypoints.devstack.aws import open_local_aws
from entrypoints.devstack.postgres import fresh_database, open_local_postgres
from entrypoints.devstack.process import ProcessError

SUITES = (
    "fleet",
    "deaths",
    "balance",
    "balance-skew",
    "store-cost",
    "store-cost-postgres",
    "cost",
    "capacity",
    "capacity-aws",
    "capacity-postgres",
    "tls",
    "tls-throughput",
    "floor",
    "ingest",
    "sink",
    "kinesis-batch",
    "kinesis-crash",
    "read-back",
    "scale",
)
log = logging.getLogger("bench")


Scenario = Callable[[Backend, SimulatorProcess], Awaitable[dict[str, Any]]]


async def per_backend(
    args: argparse.Namespace,
    log_dir: Path,
    suite: str,
    rate_of: Callable[[Backend], float],
    scenario: Scenario,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Run `scenario` on each backend of `args.backends`, each on a fresh deployment and
    simulator at `rate_of(backend)` messages/s per connection. Returns (results, failures): a
    run that does not finish is logged and kept apart, so the other backend's figures stay."""
    results: list[dict[str, Any]] = []
    failures: list[dict[str, Any]] = []
    for name in args.backends:
        async with AsyncExitStack() as stack:
            backend: Backend = await stack.enter_async_context(open_backend(name, log_dir, suite))
            rate = rate_of(backend)
            sim = await simulator(log_dir, rate=rate, name=f"{name}-{suite}-simulator").start()
            stack.push_async_callback(sim.stop)
            try:
                results.append({**await scenario(backend, sim), "rate": rate})
            except (TimeoutError, RuntimeError, ProcessError) as exc:
                log.error("the %s %s run did not finish: %s", name, suite, exc)
                failures.append({"backend": name, "rate": rate, "error": str(exc)[:2000]})
    if failures:
        log.error("%s runs that did not finish: %s", suite, json.dumps(failures, indent=1))
    return results, failures


def aws_rate(args: argparse.Namespace, backend: Backend, default: float) -> float:
    """Messages/s per connection on `backend`: `default` on the AWS adapters unless
    --aws-rate says otherwise, 20/s on the embedded one. The DynamoDB sink on DynamoDB Local
    falls behind at 20/s (one conditional put per message; bench/RESULTS.md section 11), and
    moto (the fallback without DynamoDB Local) serves one request at a time."""
    if backend.aws is None:
        return 20.0
    return default if args.aws_rate is None else args.aws_rate


async def fleet(args: argparse.Namespace, log_dir: Path) -> list[dict[str, Any]]:
    def rate_of(backend: Backend) -> float:
        on_moto = backend.aws is not None and backend.aws.fallback is not None
        return aws_rate(args, backend, 2.0 if on_moto else 20.0)

    async def scenario(backend: Backend, sim: SimulatorProcess) -> dict[str, Any]:
        return await run_fleet(backend, sim, log_dir, **args.fleet)

    results, _ = await per_backend(args, log_dir, "fleet", rate_of, scenario)
    return results


async def deaths(args: argparse.Namespace, log_dir: Path) -> list[dict[str, Any]]:
    """Known deaths per backend: see bench/deaths.py."""

    async def scenario(backend: Backend, sim: SimulatorProcess) -> dict[str, Any]:
        return await run_deaths(backend, sim, log_dir, **args.deaths)

    results, failures = await per_backend(
        args, log_dir, "deaths", lambda b: aws_rate(args, b, 2.0), scenario
    )
    return results + failures  # the report shows a run that did not finish


async def balance(args: argparse.Namespace, log_dir: Path) -> list[dict[str, Any]]:
    """Balancing: 3 workers holding 300 connections, 3 more join."""

    async def scenario(backend: Backend, sim: SimulatorProcess) -> dict[str, Any]:
        return await run_balance(backend, sim, log_dir, **args.balance)

    results, _ = await per_backend(args, log_dir, "balance", lambda _: args.balance_rate, scenario)
    return results


async def balance_skew(args: argparse.Namespace, log_dir: Path) -> list[dict[str, Any]]:
    """4 hot streams on one worker of 4: by count, then by load (bench/balance_skew.py)."""
    results: list[dict[str, Any]] = []
    for by in ("count", "load"):

        async def scenario(backend: Backend, sim: SimulatorProcess, by: str = by) -> dict[str, Any]:
            return await run_balance_skew(backend, sim, log_dir, by=by)

        found, failures = await per_backend(
            args, log_dir, f"balance-skew-{by}", lambda _: 1.0, scenario
        )
        results += found + failures
    return results


async def capacity(
    args: argparse.Namespace, log_dir: Path, tls: bool, throughput: bool = False
) -> list[dict[str, Any]]:
    if not tls:
        runs = [await run_capacity(log_dir, "capacity-memory", args.steps, window_s=args.window)]
        if not args.quick:
            runs.append(
                await run_capacity(
                    log_dir,
                    "capacity-sqlite",
                    args.steps,
                    window_s=args.window,
                    extra=["--store", "sqlite", "--sink", "sqlite"],
                )
            )
        return runs
    from tests.support.tls import make_tls_files  # cryptography: a test dependency

    files = make_tls_files(log_dir)
    paths = (files.ca_file, files.cert_file, files.key_file)
    if throughput:
        # 10 messages/s on each of 1,000 wss:// connections: the small TLS read buffer must not
        # cost throughput (more, smaller reads per socket event).
        return [
            await run_capacity(
                log_dir,
                "throughput-wss",
                [args.throughput_connections],
                window_s=args.window,
                rate=10.0,
                tls=paths,
            )
        ]
    runs = [
        await run_capacity(log_dir, "capacity-wss", args.tls_steps, window_s=args.window, tls=paths)
    ]
    if not args.quick:
        # The same ramp's first steps with asyncio's own 256 KiB buffer, for the comparison.
        asyncio_buffer = ["--tls-read-buffer", str(256 * 1024)]
        runs.append(
            await run_capacity(
                log_dir,
                "capacity-wss-asyncio-buffer",
                args.tls_steps[:2],
                window_s=args.window,
                tls=paths,
                extra=asyncio_buffer,
            )
        )
    return runs


async def capacity_aws(args: argparse.Namespace, log_dir: Path) -> list[dict[str, Any]]:
    """One worker on the AWS adapters, DynamoDB Local as the store: the store's requests/s at
    each step with a discarding sink (what session leases cost: calls per second at
    10,000), then the ramp with the DynamoDB messages table as the sink too. Each
    ramp on a DynamoDB Local of its own: on a shared one the second found the first's 10,000
    connections still STARTED and spent its worker on taking them."""
    ramps = [("capacity-dynamodb-store", args.aws_steps, "discard")]
    if not args.quick:
        ramps.append(("capacity-aws-adapters", args.aws_sink_steps, "dynamodb"))
    runs = []
    for name, steps, sink in ramps:
        async with open_local_aws(log_dir / name) as aws:
            extra = ["--store", "dynamodb", "--sink", sink, "--endpoint", aws.dynamodb_url]
            runs.append(await run_capacity(log_dir, name, steps, window_s=args.window, extra=extra))
    return runs


async def capacity_postgres(args: argparse.Namespace, log_dir: Path) -> list[dict[str, Any]]:
    """One worker with PostgreSQL (the dev stack's throwaway server) as its store and its sink,
    on one pool as a postgres worker has; hints in memory, as in the other capacity runs. The
    store's round trips per second at each step beside the ramp."""
    name = "capacity-postgres"
    async with (
        open_local_postgres(log_dir / name) as server,
        fresh_database(server, "capacity") as url,
    ):
        await migrate_database(url)
        extra = ["--store", "postgres", "--sink", "postgres"]
        extra += ["--postgres-pool-size", str(args.postgres_pool_size)]
        env = {POSTGRES_URL_VARIABLE: url}
        run = await run_capacity(
            log_dir, name, args.postgres_steps, window_s=args.window, extra=extra, env=env
        )
    # Issue 28's target: 5,000 connections at 1 msg/s, every message stored within 2 s.
    return [{**run, "engine": f"PostgreSQL {server.version}", "connections_target": 5_000}]


def save(out: Path, results: dict[str, Any]) -> None:
    (out / "results.json").write_text(json.dumps(results, indent=1))


async def run_suites(args: argparse.Namespace, out: Path, log_dir: Path) -> dict[str, Any]:
    results: dict[str, Any] = {"machine": machine.describe(), "files": raise_open_files()}
    results["logs"] = str(log_dir)
    for suite in args.only:
        log.info("running %s (logs in %s)", suite, log_dir)
        if suite == "fleet":
            results["fleet"] = await fleet(args, log_dir)
        elif suite == "deaths":
            results["deaths"] = await deaths(args, log_dir)
        elif suite == "balance":
            results["balance"] = await balance(args, log_dir)
        elif suite == "balance-skew":
            results["balance_skew"] = await balance_skew(args, log_dir)
        elif suite == "cost":
            results["cost"] = await run_cost(log_dir, window_s=args.cost_window)
        elif suite == "store-cost":
            results["store_cost"] = await run_store_cost(log_dir, args.store_cost_counts)
        elif suite == "store-cost-postgres":
            results["store_cost_postgres"] = await run_store_cost_postgres(
                log_dir, args.postgres_store_cost_counts
            )
        elif suite == "capacity":
            results.setdefault("capacity", []).extend(await capacity(args, log_dir, tls=False))
        elif suite == "capacity-aws":
            results.setdefault("capacity", []).extend(await capacity_aws(args, log_dir))
        elif suite == "capacity-postgres":
            results.setdefault("capacity", []).extend(await capacity_postgres(args, log_dir))
        elif suite == "tls":
            results.setdefault("capacity", []).extend(await capacity(args, log_dir, tls=True))
        elif suite == "tls-throughput":
            results.setdefault("capacity", []).extend(
                await capacity(args, log_dir, tls=True, throughput=True)
            )
        elif suite == "floor":
            results["floor"] = await run_floor(log_dir, args.steps)
        elif suite == "ingest":
            results["ingest"] = [
                await run_ingest(log_dir, "sqlite", 20, 500.0, args.window),
                await run_ingest(log_dir, "dynamodb", 10, 200.0, args.window),
            ]
        elif suite == "sink":
            results["sink"] = await run_sink_bench(log_dir, 2_000 if args.quick else 10_000)
            print(render_sinks(results["sink"]), flush=True)
        elif suite == "kinesis-batch":
            results["kinesis_batch"] = await run_kinesis_batches(log_dir, 1 if args.quick else 3)
            print(render_kinesis_batches(results["kinesis_batch"]), flush=True)
        elif suite == "kinesis-crash":
            results["kinesis_crash"] = await run_kinesis_crash(log_dir, 1 if args.quick else 2)
            print(render_kinesis_crash(results["kinesis_crash"]), flush=True)
        elif suite == "read-back":
            results["read_back"] = await run_read_back(
                log_dir, 10_000 if args.quick else 100_000, 2 if args.quick else 20
            )
            print(render_read_back(results["read_back"]), flush=True)
        elif suite == "scale":
            results["scale"] = await run_scale(
                SimSize(
                    args.workers, args.scale_connections, seed=args.seed, shards=args.scale_shards
                ),
                args.scenario,
                settle_s=args.scale_settle,
                window_s=args.scale_window,
                json_path=args.json,
                plot_dir=out,
            )
            print(render_scale(results["scale"]), flush=True)
        save(out, results)  # after each suite: a later failure keeps what was measured
    return results


def main(args: argparse.Namespace) -> dict[str, Any]:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log_dir = Path(tempfile.mkdtemp(prefix="wsfleet-bench-"))
    results = asyncio.run(run_suites(args, out, log_dir))
    print(table(results))
    try:
        from bench.chart import draw

        draw(results, out / "benchmarks.png")
        print(f"chart: {out / 'benchmarks.png'}")
    except ImportError:
        print("matplotlib is not installed (pip install -e '.[bench]'): no chart")
    print(f"results: {out / 'results.json'}; logs: {log_dir}")
    return results


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument(
        "--only",
        type=lambda s: s.split(","),
        default=list(SUITES),
        help=f"comma-separated suites of {','.join(SUITES)}",
    )
    p.add_argument("--backends", type=lambda s: s.split(","), default=["embedded", "aws"])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument(
        "--aws-rate",
        type=float,
        help="messages/s per connection of the AWS fleet (default 20, 2 when moto serves DynamoDB)",
    )
    p.add_argument(
        "--connections",
        type=int,
        help="fleet: connections (default 36); scale: connections simulated (default 200)",
    )
    p.add_argument(
        "--balance-connections", type=int, default=300, help="balance: held by the first ones"
    )
    p.add_argument("--balance-workers", type=int, default=3, help="balance: holding at first")
    p.add_argument("--balance-joining", type=int, default=3, help="balance: joining at once")
    p.add_argument(
        "--balance-rate", type=float, default=2.0, help="balance: messages/s per connection"
    )
    p.add_argument(
        "--steps",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[1000, 2500, 5000, 7500, 10000, 12500, 15000],
    )
    p.add_argument(
        "--tls-steps",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[1000, 2500, 5000, 7500, 10000],
    )
    p.add_argument(
        "--aws-steps",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[100, 1000, 10000],
        help="capacity-aws: connections held with DynamoDB Local as the store",
    )
    p.add_argument(
        "--aws-sink-steps",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[50, 100, 200, 400, 800],
        help="capacity-aws: the same with DynamoDB Local as the sink too (1 message/s each)",
    )
    p.add_argument(
        "--postgres-steps",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[1000, 2500, 5000, 7500, 10000],
        help="capacity-postgres: connections held, PostgreSQL the store and the sink",
    )
    p.add_argument(
        "--postgres-pool-size",
        type=int,
        default=10,
        help="capacity-postgres: the worker's pool (WSFLEET_POSTGRES_POOL_SIZE, default 10)",
    )
    p.add_argument("--throughput-connections", type=int, default=1000, help="tls-throughput")
    p.add_argument("--window", type=float, default=20.0, help="seconds measured per step")
    p.add_argument("--cost-window", type=float, default=120.0)
    p.add_argument(
        "--store-cost-counts",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[10, 100, 10_000],
        help="connections owned by the worker's session in the store-cost steady state",
    )
    p.add_argument(
        "--fleet-timings",
        type=float,
        default=1.0,
        help="fleet: the workers' timings as a part of the defaults (0.5: lease 2 s)",
    )
    p.add_argument(
        "--postgres-store-cost-counts",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[10, 100, 1_000, 10_000],
        help="store-cost-postgres: connections owned by the worker's session",
    )
    p.add_argument("--kills", type=int, default=8, help="deaths: supervised SIGKILLs")
    p.add_argument("--false-reports", type=int, default=3, help="deaths: false death reports")
    p.add_argument("--deaths-lease-ms", type=int, default=30_000, help="deaths: the lease")
    p.add_argument("--workers", type=int, default=10, help="scale: workers simulated")
    p.add_argument(
        "--scenario",
        type=lambda s: s.split(","),
        default=list(SCALE_SCENARIOS),
        help=f"scale: comma-separated of {','.join(SCALE_SCENARIOS)}",
    )
    p.add_argument("--seed", type=int, default=1, help="scale: the simulation's seed")
    p.add_argument(
        "--scale-shards",
        type=int,
        default=DEFAULT_ORPHAN_SHARDS,
        help="scale: the orphan index's partitions (WSFLEET_ORPHAN_SHARDS)",
    )
    p.add_argument("--scale-settle", type=float, default=40.0, help="scale: virtual s before")
    p.add_argument("--scale-window", type=float, default=60.0, help="scale: virtual s measured")
    p.add_argument("--json", type=Path, help="scale: its figures as JSON here too")
    p.add_argument("--out", default=str(Path(__file__).parent / "out"))
    p.add_argument("--quick", action="store_true", help="a smoke run: tiny and fast")
    args = p.parse_args(argv)
    args.scale_connections = 200 if args.connections is None else args.connections
    if args.connections is None:
        args.connections = 36
    if args.quick:
        args.rounds, args.connections, args.steps, args.window = 1, 6, [20], 2.0
        args.scale_connections, args.scale_settle, args.scale_window = 200, 10.0, 20.0
        args.aws_steps = [20]
        args.postgres_steps = [20]
        args.store_cost_counts = [10]
        args.postgres_store_cost_counts = [10, 100]
        args.kills, args.false_reports = 2, 1
    args.fleet = {
        "connections": args.connections,
        "rounds": args.rounds,
        "timings": args.fleet_timings,
    }
    args.deaths = {
        "connections": min(args.connections, 30),
        "kills": args.kills,
        "false_reports": args.false_reports,
        "lease_ms": args.deaths_lease_ms,
    }
    args.balance = {
        "connections": 12 if args.quick else args.balance_connections,
        "workers": args.balance_workers,
        "joining": args.balance_joining,
    }
    if args.quick:
        args.balance["quiet_s"] = 5.0
    return args


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    for noisy in ("application", "adapters", "matplotlib"):  # the in-process workers' chatter
        logging.getLogger(noisy).setLevel(logging.WARNING)
    main(parse_args())
