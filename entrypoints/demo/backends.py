"""The demo's backend: the environment its processes get, and the deployment it watches and
judges (entrypoints/devstack/backends.py).

Embedded: a fresh data directory (a temporary one unless --data-dir). AWS: the dev stack's
local AWS (entrypoints/devstack: DynamoDB Local for DynamoDB, moto for SQS; moto alone, and
saying so, where java or DynamoDB Local is missing) or the emulator at --endpoint-url, with
tables and a hint queue named for this run. Every other backend: what its registry entry's
`devstack` starts (postgres: a throwaway PostgreSQL server and a fresh, migrated database).
The demo reads through the same adapters the workers use: the store for owners and
checkpoints, the messages for the judge.
"""

import secrets
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

from entrypoints.cli.backend import ensure_data_dir
from entrypoints.demo.options import DemoOptions
from entrypoints.devstack.aws import open_local_aws
from entrypoints.devstack.backends import LocalDeployment, open_aws, open_embedded, start_backend
from entrypoints.devstack.process import Processes
from entrypoints.devstack.service import CREDENTIALS
from entrypoints.settings import PREFIX

DEMO_REGION = "us-east-1"
ORPHAN_SHARDS = 2  # a handful of connections: fewer index partitions, fewer queries

Probe = LocalDeployment  # what the demo watches and judges


@asynccontextmanager
async def prepare(
    options: DemoOptions, children: Processes, run_dir: Path, env: dict[str, str]
) -> AsyncIterator[Probe]:
    """Adds the backend's variables to `env` (the processes' environment) and yields a probe."""
    if options.backend == "aws":
        opening = _aws(options, children, run_dir, env)
    elif options.backend == "embedded":
        opening = _embedded(options, run_dir, env)
    else:
        opening = _started(options, children, run_dir, env)
    async with opening as probe:
        yield probe


# embedded and aws take demo flags of their own (--data-dir, --endpoint-url); the others are
# started as the registry says.


@asynccontextmanager
async def _embedded(
    options: DemoOptions, run_dir: Path, env: dict[str, str]
) -> AsyncIterator[Probe]:
    data_dir = Path(options.data_dir) if options.data_dir else run_dir / "data"
    ensure_data_dir(data_dir, create=True)
    async with open_embedded(data_dir, env) as probe:
        env.update(probe.env)
        yield probe


@asynccontextmanager
async def _started(
    options: DemoOptions, children: Processes, run_dir: Path, env: dict[str, str]
) -> AsyncIterator[Probe]:
    async with AsyncExitStack() as stack:
        probe = await stack.enter_async_context(start_backend(options.backend, run_dir, env))
        # Children first (they release their leases), then the backend's services.
        stack.push_async_callback(children.close)
        env.update(probe.env)
        yield probe


@asynccontextmanager
async def _aws(
    options: DemoOptions, children: Processes, run_dir: Path, env: dict[str, str]
) -> AsyncIterator[Probe]:
    async with AsyncExitStack() as stack:
        aws = None
        if options.endpoint_url is None:
            aws = await stack.enter_async_context(open_local_aws(run_dir / "logs"))
            # Children first (they release their leases), then DynamoDB Local and moto.
            stack.push_async_callback(children.close)
            where = aws.env()
        else:
            where = {PREFIX + "AWS_ENDPOINT_URL": options.endpoint_url}
        for name, value in CREDENTIALS.items():
            env.setdefault(name, value)
        where[PREFIX + "REGION"] = where.get(PREFIX + "REGION") or DEMO_REGION
        run = f"wsfleet-demo-{secrets.token_hex(3)}"
        probe = await stack.enter_async_context(
            open_aws(
                where,
                aws=aws,
                run=run,
                shards=ORPHAN_SHARDS,
                hint_visibility_s=int(env.get(PREFIX + "HINT_VISIBILITY_TIMEOUT_S", "30")),
                with_dlq=False,
                settings=env,
                sink=options.sink,
            )
        )
        env.update(probe.env)
        probe.where = f"{probe.where} (tables {run}-*)"
        if probe.sink == "kinesis":
            stream = probe.env[PREFIX + "KINESIS_STREAM"]
            probe.where += f"; messages on the Kinesis stream {stream}"
        yield probe
