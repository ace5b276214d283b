"""`python -m bench --only kinesis-batch`: one full batch (500 messages) through
KinesisMessageSink on moto's Kinesis, over 500, 17 and 1 connections.

What it shows is the per-connection rate: a connection's records of a batch must land in
order under PutRecords' partial failures, so how many requests a batch takes depends on how
its messages fall over connections (500 x 1 is a fleet of transcripts, 17 x ~29 the demo's
worker at 1,000 msg/s, 1 x 500 a fast market-data feed). Per shape, `batches` batches, each
on fresh seqs, into a 2-shard stream of its own: requests per batch (PutRecords, counted at
`before-send`: every HTTP attempt), time per batch, stored messages/s and this process's CPU
per message (moto is another process; its time per request is not the service's, so the
request count and the client CPU are the figures that carry over)."""

import statistics
import time
from pathlib import Path
from typing import Any

from adapters.kinesis import KinesisMessageSink, create_stream
from application.ports.sink import StoredMessage
from entrypoints.devstack.aws import client as aws_client
from entrypoints.devstack.aws import open_local_aws

BATCH = 500
SHAPES = (500, 17, 1)  # connections per batch
T0 = 1_700_000_000_000


def batch(connections: int, index: int) -> list[StoredMessage]:
    """BATCH messages of ~200 bytes of JSON round-robin over `connections`, each connection's
    seqs ascending and carrying on from batch `index - 1`."""
    per = -(-BATCH // connections)
    out = []
    for i in range(BATCH):
        cid = f"k{connections}-c{i % connections:03d}"
        seq = index * per + i // connections + 1
        data = f'{{"seq": {seq}, "text": "{"x" * 150}", "speaker": "s{i % 7}"}}'
        out.append(StoredMessage(cid, seq, data, T0 + seq, "bench#1", 1, seq - 1))
    return out


async def run_kinesis_batches(log_dir: Path, batches: int = 3) -> dict[str, Any]:
    shapes: dict[str, dict[str, float]] = {}
    async with (
        open_local_aws(log_dir / "kinesis-batch", engine="moto") as aws,
        aws_client("kinesis", aws.moto_url, region=aws.region) as kinesis,
    ):
        sent = [0]

        def count(**_: Any) -> None:
            sent[0] += 1

        kinesis.meta.events.register("before-send.kinesis.PutRecords", count)
        for connections in SHAPES:
            stream = f"bench-batch-{connections}"
            await create_stream(kinesis, stream, shards=2)
            sink = KinesisMessageSink(kinesis, stream)
            runs = []
            for index in range(batches):
                messages = batch(connections, index)
                before = sent[0]
                wall, cpu = time.perf_counter(), time.process_time()
                await sink.write(messages)
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                runs.append((sent[0] - before, wall, cpu))
            await kinesis.delete_stream(StreamName=stream)
            wall_s = statistics.median(r[1] for r in runs)
            cpu_s = statistics.median(r[2] for r in runs)
            shapes[f"{connections}"] = {
                "connections": connections,
                "requests_per_batch": statistics.median(r[0] for r in runs),
                "ms_per_batch": round(wall_s * 1000, 1),
                "ms_per_batch_max": round(max(r[1] for r in runs) * 1000, 1),
                "stored_per_s": round(BATCH / wall_s),
                "cpu_ms_per_message": round(cpu_s * 1000 / BATCH, 4),
            }
    return {"batch": BATCH, "batches": batches, "shapes": shapes}


def render(result: dict[str, Any]) -> str:
    lines = [
        f"KinesisMessageSink on moto, a batch of {result['batch']} "
        f"(median of {result['batches']} batches, max time in brackets)",
        "| batch of 500 over | requests per batch | time per batch | stored/s "
        "| client CPU per message |",
        "|---|---|---|---|---|",
    ]
    for s in result["shapes"].values():
        lines.append(
            f"| {s['connections']} connection{'s' if s['connections'] > 1 else ''} | "
            f"{s['requests_per_batch']:.0f} | "
            f"{s['ms_per_batch']:,.0f} ms ({s['ms_per_batch_max']:,.0f}) | "
            f"{s['stored_per_s']:,.0f} | {s['cpu_ms_per_message']:.3f} ms |"
        )
    return "\n".join(lines)
