"""Where a benchmarked fleet keeps its state: the dev stack's local deployments
(entrypoints/devstack/backends.py), embedded (SQLite files under a fresh data directory), on
the AWS adapters (DynamoDB on DynamoDB Local and SQS on a moto server, started for the run),
or any other backend as its registry entry starts it (postgres: a throwaway server).

Each gives the runner what a client of the deployment has (an EventRouter for START and STOP
over the same store and queue the workers use) and readers of the store and the sink for
judging afterwards."""

import asyncio
import logging
import shutil
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from pathlib import Path

from entrypoints.devstack.aws import open_local_aws
from entrypoints.devstack.backends import LocalDeployment, open_aws, open_embedded, start_backend

REGION = "us-east-1"
HINT_VISIBILITY_S = 3
# The runner's own view: its router accepts the simulator's 127.0.0.1 URLs.
HARNESS = {"WSFLEET_ALLOW_PRIVATE_UPSTREAMS": "true"}
log = logging.getLogger("bench")

Backend = LocalDeployment


@asynccontextmanager
async def open_embedded_backend(data_dir: Path) -> AsyncIterator[Backend]:
    """A fresh data directory (what a previous run left there is deleted first)."""
    await asyncio.to_thread(shutil.rmtree, data_dir, ignore_errors=True)
    async with open_embedded(data_dir, HARNESS) as backend:
        yield backend


@asynccontextmanager
async def open_aws_backend(log_dir: Path, name: str = "local-aws") -> AsyncIterator[Backend]:
    """A fresh local AWS (the dev stack: DynamoDB Local, moto for SQS) with the tables and
    the hint queue. Which engine served DynamoDB goes into the results (`engine`)."""
    async with AsyncExitStack() as stack:
        aws = await stack.enter_async_context(open_local_aws(log_dir / name))
        if aws.fallback:
            log.warning("the AWS benchmarks run on %s", aws.describe())
        yield await stack.enter_async_context(
            open_aws(
                aws.env(),
                aws=aws,
                hint_visibility_s=HINT_VISIBILITY_S,
                with_dlq=False,
                settings=HARNESS,
            )
        )


def open_backend(name: str, log_dir: Path, suite: str) -> AbstractAsyncContextManager[Backend]:
    """A fresh deployment of backend `name` for one suite's run."""
    if name == "aws":
        return open_aws_backend(log_dir, name=f"{suite}-local-aws")
    if name == "embedded":
        return open_embedded_backend(log_dir / f"{suite}-embedded-data")
    return start_backend(name, log_dir / f"{suite}-{name}", HARNESS)
