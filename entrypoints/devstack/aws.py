"""The local AWS of the demo, the tests, the benchmarks and the chaos suite: DynamoDB Local
for DynamoDB and a moto server for SQS and CloudWatch, each a child process on 127.0.0.1.

Where DynamoDB Local cannot run (no java, not installed) moto serves DynamoDB too, one request
at a time (moto_server.py says why), and `LocalAws.fallback` says why: callers must say so
loudly, because races are then not exercised at all. DEVSTACK_DYNAMODB chooses: `auto` (the
default: DynamoDB Local if it can run), `dynamodb-local` (an error if it cannot) or `moto`."""

import asyncio
import fcntl
import json
import os
import re
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import attrs
from aiobotocore.config import AioConfig
from aiobotocore.session import get_session

from entrypoints.devstack import dynamodb_local
from entrypoints.devstack.service import CREDENTIALS, REGION, Service, ServiceError, child_env

ENGINE_VARIABLE = "DEVSTACK_DYNAMODB"
# Running stacks lent to the test sessions of child processes (`lend`, `borrow`).
LENT_VARIABLE = "DEVSTACK_LENT_AWS"
ENGINES = ("auto", "dynamodb-local", "moto")
MOTO_START_TIMEOUT_S = 60.0


@attrs.frozen
class LocalAws:
    moto_url: str  # SQS and CloudWatch (and DynamoDB in the fallback)
    dynamodb_url: str
    engine: str  # what serves DynamoDB, with its version
    fallback: str | None = None  # why DynamoDB Local is not that engine; None when it is
    region: str = REGION

    @property
    def on_dynamodb_local(self) -> bool:
        return self.fallback is None

    def env(self) -> dict[str, str]:
        """The WSFLEET_* variables that point a worker, the router or the CLI here."""
        return {
            "WSFLEET_BACKEND": "aws",
            "WSFLEET_AWS_ENDPOINT_URL": self.moto_url,
            "WSFLEET_DYNAMODB_ENDPOINT_URL": self.dynamodb_url,
            "WSFLEET_REGION": self.region,
        }

    def describe(self) -> str:
        if self.fallback is None:
            return (
                f"DynamoDB on {self.engine} at {self.dynamodb_url} (no lock), "
                f"SQS and CloudWatch on moto at {self.moto_url}"
            )
        return (
            f"DynamoDB, SQS and CloudWatch on moto at {self.moto_url}, NOT DynamoDB Local "
            f"({self.fallback}): DynamoDB requests are served one at a time"
        )


@asynccontextmanager
async def client(
    service: str, endpoint: str, *, region: str = REGION, pool: int = 50
) -> AsyncIterator[Any]:
    """An aiobotocore client of the local AWS (its fake credentials, three attempts), for the
    benchmarks and the tests that set up or read a deployment outside the containers."""
    config = AioConfig(
        retries={"mode": "standard", "total_max_attempts": 3}, max_pool_connections=pool
    )
    async with get_session().create_client(
        service,
        region_name=region,
        endpoint_url=endpoint,
        aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        config=config,
    ) as made:
        yield made


def set_fake_credentials() -> None:
    """This process's own clients: fake credentials unless some are configured."""
    for name, value in CREDENTIALS.items():
        os.environ.setdefault(name, value)


@contextmanager
def local_aws(log_dir: Path, engine: str | None = None) -> Iterator[LocalAws]:
    """Starts the stack (both services at once), yields where it answers, stops it."""
    choice = engine or os.environ.get(ENGINE_VARIABLE, "") or "auto"
    if choice not in ENGINES:
        raise ServiceError(f"{ENGINE_VARIABLE}={choice!r}: expected one of {', '.join(ENGINES)}")
    found: Path | str = f"{ENGINE_VARIABLE}=moto" if choice == "moto" else dynamodb_local.locate()
    if choice == "dynamodb-local" and isinstance(found, str):
        raise ServiceError(f"{ENGINE_VARIABLE}=dynamodb-local, but {found}")
    with ExitStack() as stack:
        serialize = ["--serialize-dynamodb"] if isinstance(found, str) else []
        moto = Service.start(
            "moto",
            [sys.executable, "-m", "entrypoints.devstack.moto_server", *serialize],
            log_dir,
            env=child_env(),
        )
        stack.callback(moto.stop)
        if isinstance(found, Path):
            dynamodb, dynamodb_url = dynamodb_local.start(found, log_dir)
            stack.callback(dynamodb.stop)
        moto_url = moto.wait_for_line(r"listening on (http://\S+)", MOTO_START_TIMEOUT_S)[1]
        if isinstance(found, Path):
            yield LocalAws(moto_url, dynamodb_url, f"DynamoDB Local {_release(found)}")
        else:
            yield LocalAws(moto_url, moto_url, "moto (one request at a time)", fallback=found)


def lend(stacks: list[LocalAws], lock_dir: Path) -> dict[str, str]:
    """The environment that lends these running stacks to child processes, each to one of them
    at a time (`borrow`). For a mutation run, whose every mutant is a test session of its own:
    one stack per mutant run at once, instead of one started and stopped per mutant."""
    entries = [
        {**attrs.asdict(aws), "lock": str(lock_dir / f"lent-aws-{i}.lock")}
        for i, aws in enumerate(stacks)
    ]
    return {LENT_VARIABLE: json.dumps(entries)}


@contextmanager
def borrow(poll_s: float = 0.1) -> Iterator[LocalAws | None]:
    """A stack lent by `lend`, this process's alone until exit (an exclusive lock on its file,
    which the kernel drops if the process dies); waits while every one is borrowed. None when
    nothing is lent."""
    raw = os.environ.get(LENT_VARIABLE)
    if not raw:
        yield None
        return
    entries = json.loads(raw)
    while True:
        for entry in entries:
            with Path(entry["lock"]).open("a") as lock:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue
                yield LocalAws(**{k: v for k, v in entry.items() if k != "lock"})
                return
        time.sleep(poll_s)


@asynccontextmanager
async def open_local_aws(log_dir: Path, engine: str | None = None) -> AsyncIterator[LocalAws]:
    """`local_aws` for an event loop: starting and stopping block, so they run on a thread."""
    manager = local_aws(log_dir, engine)
    aws = await asyncio.to_thread(manager.__enter__)
    try:
        yield aws
    finally:
        await asyncio.to_thread(manager.__exit__, None, None, None)


def _release(jar_dir: Path) -> str:
    """ "3.3.1", from the release notes beside the jar (its directory is named by date)."""
    try:
        notes = (jar_dir / "README.txt").read_text(errors="replace")
    except OSError:
        notes = ""
    match = re.search(r"^\s*\d{4}-\d{2}-\d{2} \((\d+(?:\.\d+)+)\)", notes, re.MULTILINE)
    return match[1] if match else dynamodb_local.version(jar_dir)
