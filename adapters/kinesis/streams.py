"""Creating the sink's stream where nothing else does (the dev stack: the demo, the tests, the
benchmarks). On AWS, Terraform makes it (infra/kinesis.tf, on demand and encrypted)."""

import contextlib
from typing import Any


async def create_stream(client: Any, name: str, shards: int = 2) -> None:
    """Create the stream with `shards` shards (a fixed count: the emulators' on-demand streams
    differ from the service's) and wait until it takes writes. A stream of that name that
    already exists is kept as it is."""
    if not 1 <= shards <= 500:
        raise ValueError(f"shards must be 1-500, got {shards}")
    # One that exists (a run sharing its emulator) is kept; it is still waited for.
    with contextlib.suppress(client.exceptions.ResourceInUseException):
        await client.create_stream(StreamName=name, ShardCount=shards)
    await client.get_waiter("stream_exists").wait(
        StreamName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 60}
    )
