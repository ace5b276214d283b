"""Ingest throughput of one worker process: a few streams at a high rate (more than it can
store), so `stored_per_s` is what the worker and its sink sustain, not what was offered.
Against the embedded sink (SQLite, synchronous=FULL) and against DynamoDB on a local moto
endpoint — moto is a slow, serialized stand-in (several ms per request), so that figure says
more about moto than about DynamoDB."""

from pathlib import Path
from typing import Any

from bench.backends import open_aws_backend
from bench.capacity import run_capacity


async def run_ingest(
    log_dir: Path, sink: str, streams: int, rate: float, window_s: float
) -> dict[str, Any]:
    extra = ["--sink", sink, "--query", f"?rate={rate:g}", "--settle", "3"]
    label = f"ingest-{sink}"
    if sink == "dynamodb":
        async with open_aws_backend(log_dir, name="ingest-aws") as backend:
            assert backend.aws is not None
            run = await run_capacity(
                log_dir,
                label,
                [streams],
                window_s=window_s,
                rate=rate,
                extra=[*extra, "--endpoint", backend.aws.dynamodb_url],
            )
    else:
        run = await run_capacity(
            log_dir, label, [streams], window_s=window_s, rate=rate, extra=extra
        )
    for step in run["steps"]:
        step["offered_per_s"] = streams * rate
    return run
