"""`python -m bench --only sink`: what storing a message costs the worker, sink by sink.

The same items (200-byte JSON messages over 50 connections, batches of 25, one batch in
flight) through: the project's DynamoDB sink; raw BatchWriteItem (the floor: no fencing);
raw TransactWriteItems of 25 conditional puts (the fenced alternative the design was measured
against); the Kinesis sink on moto's Kinesis (client CPU only: moto is not the service); and
the SQLite sink on a temporary file. Each writer gets a table (or file) of its
own on one DynamoDB Local, and the writers take turns round after round so that drift on the
shared machine falls on all of them alike.

Per writer: stored messages/s, requests per message (counted at `before-send`, every HTTP
attempt), client CPU per message (this process's CPU time: DynamoDB Local is another
process; SQLite's threads are this process's and counted) and write units per message (from
ReturnConsumedCapacity). The project sink's count includes its one mark read per connection
(`messages` per run / 50 connections). The sink also runs at its own batch size (100: four
requests side by side), which is what a worker sends."""

import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from adapters.dynamodb import schema
from adapters.dynamodb.items import message_to_item
from adapters.dynamodb.message_sink import DynamoDbMessageSink
from adapters.dynamodb.tables import create_tables
from adapters.kinesis import KinesisMessageSink
from adapters.sqlite.message_sink import SqliteMessageSink
from application.ports.sink import StoredMessage
from bench.store_cost import local_dynamodb
from entrypoints.devstack.aws import client as aws_client

CONNECTIONS = 50
BATCH = 25
T0 = 1_700_000_000_000

Writer = Callable[[list[StoredMessage]], Awaitable[float]]  # writes one batch, returns WRU


def messages(count: int, run: int) -> list[StoredMessage]:
    """`count` messages round-robin over the connections, each connection's seqs ascending,
    ~200 bytes of JSON each."""
    out = []
    for i in range(count):
        seq = i // CONNECTIONS + 1
        data = f'{{"seq": {seq}, "text": "{"x" * 150}", "speaker": "s{i % 7}"}}'
        cid = f"r{run}-c{i % CONNECTIONS:03d}"
        out.append(StoredMessage(cid, seq, data, T0 + i, "bench#1", 1, seq - 1))
    return out


def _raw_batch(client: Any, table: str) -> Writer:
    async def write(batch: list[StoredMessage]) -> float:
        requests: list[Any] = [{"PutRequest": {"Item": message_to_item(m, None)}} for m in batch]
        response = await client.batch_write_item(
            RequestItems={table: requests}, ReturnConsumedCapacity="TOTAL"
        )
        assert not response.get("UnprocessedItems"), "DynamoDB Local left items unprocessed"
        return sum(float(c["CapacityUnits"]) for c in response.get("ConsumedCapacity", ()))

    return write


def _raw_transaction(client: Any, table: str) -> Writer:
    async def write(batch: list[StoredMessage]) -> float:
        items: list[Any] = [
            {
                "Put": {
                    "TableName": table,
                    "Item": message_to_item(m, None),
                    "ConditionExpression": "attribute_not_exists(#pk) OR #token <= :token",
                    "ExpressionAttributeNames": {"#pk": schema.PK, "#token": schema.FENCING_TOKEN},
                    "ExpressionAttributeValues": {":token": {"N": str(m.token)}},
                }
            }
            for m in batch
        ]
        response = await client.transact_write_items(
            TransactItems=items, ReturnConsumedCapacity="TOTAL"
        )
        return sum(float(c["CapacityUnits"]) for c in response.get("ConsumedCapacity", ()))

    return write


def _sink_writer(sink: DynamoDbMessageSink) -> Writer:
    async def write(batch: list[StoredMessage]) -> float:
        before = sink.consumed_wcu
        await sink.write(batch)
        return sink.consumed_wcu - before

    return write


async def _measure(
    write: Writer, batches: list[list[StoredMessage]], requests: list[int]
) -> dict[str, float]:
    sent = requests[0]
    wall, cpu = time.perf_counter(), time.process_time()
    wru = 0.0
    for batch in batches:
        wru += await write(batch)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    count = sum(len(b) for b in batches)
    return {
        "stored_per_s": count / wall,
        "requests_per_message": (requests[0] - sent) / count,
        "cpu_ms_per_message": cpu * 1000 / count,
        "wru_per_message": wru / count,
    }


async def run_sink_bench(log_dir: Path, count: int = 10_000, rounds: int = 3) -> dict[str, Any]:
    results: dict[str, list[dict[str, float]]] = {}
    async with (
        local_dynamodb(log_dir, "sink-aws") as (client, engine, aws),
        aws_client("kinesis", aws.moto_url, region=aws.region) as kinesis,
    ):
        requests = [0]

        def sent(**_: Any) -> None:
            requests[0] += 1

        client.meta.events.register("before-send.dynamodb", sent)
        kinesis.meta.events.register("before-send.kinesis", sent)
        with tempfile.TemporaryDirectory() as tmp:
            for run in range(rounds):
                stream = messages(count, run)
                batches = [stream[i : i + BATCH] for i in range(0, len(stream), BATCH)]
                names = {w: f"bench-{w}-{run}" for w in ("sink", "batch", "transaction")}
                for table in names.values():
                    await create_tables(client, schema.TableNames(messages=table))
                writers: dict[str, Writer] = {
                    "wsfleet DynamoDbMessageSink (batches of 25)": _sink_writer(
                        DynamoDbMessageSink(client, names["sink"])
                    ),
                    "raw BatchWriteItem": _raw_batch(client, names["batch"]),
                    "raw TransactWriteItems (25 conditional puts)": _raw_transaction(
                        client, names["transaction"]
                    ),
                }
                for name, write in writers.items():
                    results.setdefault(name, []).append(await _measure(write, batches, requests))
                # Its own batch size: four requests of 25 side by side, still one batch in
                # flight for the writer.
                await create_tables(client, schema.TableNames(messages=f"bench-sink100-{run}"))
                wide = DynamoDbMessageSink(client, f"bench-sink100-{run}")
                wide_batches = [
                    stream[i : i + wide.max_batch] for i in range(0, len(stream), wide.max_batch)
                ]
                results.setdefault(
                    f"wsfleet DynamoDbMessageSink (batches of {wide.max_batch})", []
                ).append(await _measure(_sink_writer(wide), wide_batches, requests))
                await kinesis.create_stream(StreamName=f"bench-{run}", ShardCount=4)
                streamed = KinesisMessageSink(kinesis, f"bench-{run}")
                kinesis_batches = [
                    stream[i : i + streamed.max_batch]
                    for i in range(0, len(stream), streamed.max_batch)
                ]

                async def put_records(
                    batch: list[StoredMessage], sink: KinesisMessageSink = streamed
                ) -> float:
                    await sink.write(batch)
                    return 0.0

                measured_kinesis = await _measure(put_records, kinesis_batches, requests)
                measured_kinesis["wru_per_message"] = float("nan")
                results.setdefault(
                    f"wsfleet KinesisMessageSink on moto (batches of {streamed.max_batch})", []
                ).append(measured_kinesis)
                async with SqliteMessageSink.open(Path(tmp) / f"sink-{run}.sqlite") as sqlite:
                    sqlite_batches = [
                        stream[i : i + sqlite.max_batch]
                        for i in range(0, len(stream), sqlite.max_batch)
                    ]

                    async def write_sqlite(batch: list[StoredMessage]) -> float:
                        await sqlite.write(batch)
                        return 0.0

                    measured = await _measure(write_sqlite, sqlite_batches, requests)
                    measured["wru_per_message"] = float("nan")
                    results.setdefault(
                        f"wsfleet SqliteMessageSink (batches of {sqlite.max_batch})", []
                    ).append(measured)
    summary = {name: _summarize(runs) for name, runs in results.items()}
    floor = summary["raw BatchWriteItem"]
    ours = summary["wsfleet DynamoDbMessageSink (batches of 25)"]
    return {
        "engine": engine,
        "messages_per_run": count,
        "rounds": rounds,
        "writers": summary,
        "sink_vs_batch": {
            "cpu_ratio": round(
                ours["cpu_ms_per_message"]["median"] / floor["cpu_ms_per_message"]["median"], 2
            ),
            "throughput_ratio": round(
                ours["stored_per_s"]["median"] / floor["stored_per_s"]["median"], 2
            ),
        },
    }


def _summarize(runs: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    return {
        key: {
            "median": round(statistics.median(r[key] for r in runs), 4),
            "min": round(min(r[key] for r in runs), 4),
            "max": round(max(r[key] for r in runs), 4),
        }
        for key in runs[0]
    }


def render(result: dict[str, Any]) -> str:
    lines = [
        f"sink writers on {result['engine']}: {result['messages_per_run']} messages per run, "
        f"{result['rounds']} rounds (median, min-max)",
        "| writer | stored/s | requests per message | client CPU per message | WRU per message |",
        "|---|---|---|---|---|",
    ]
    for name, s in result["writers"].items():

        def cell(key: str, fmt: str, s: dict[str, dict[str, float]] = s) -> str:
            v = s[key]
            return f"{v['median']:{fmt}} ({v['min']:{fmt}}-{v['max']:{fmt}})"

        lines.append(
            f"| {name} | {cell('stored_per_s', ',.0f')} | {cell('requests_per_message', '.3f')} | "
            f"{cell('cpu_ms_per_message', '.3f')} ms | {cell('wru_per_message', '.2f')} |"
        )
    ratio = result["sink_vs_batch"]
    lines.append(
        f"DynamoDbMessageSink against raw BatchWriteItem: CPU x{ratio['cpu_ratio']}, "
        f"throughput x{ratio['throughput_ratio']}"
    )
    return "\n".join(lines)
