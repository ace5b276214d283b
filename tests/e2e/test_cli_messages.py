"""`wsfleet messages` as a real subprocess on both built-in sinks: a connection's messages in seq
order, one per seq, from a seq on, page after page, as text or JSON Lines; an unknown
connection refused by name."""

import asyncio
import json
import signal
from pathlib import Path

from adapters.dynamodb.message_sink import DynamoDbMessageSink
from adapters.dynamodb.schema import DEFAULT_MESSAGES_TABLE
from adapters.kinesis import KinesisMessageSink
from adapters.sqlite.message_sink import SqliteMessageSink
from application.ports import StoredMessage
from entrypoints.containers import AwsContainer, provide, shutdown
from entrypoints.devstack.aws import LocalAws
from entrypoints.devstack.aws import client as aws_client
from entrypoints.settings import load_settings
from tests.e2e.cli_process import cli_process, run_cli
from tests.support.deployment import create_deployment_sync

URL = "ws://127.0.0.1:9/stream/feed"
PRIVATE = {"WSFLEET_ALLOW_PRIVATE_UPSTREAMS": "true"}


def stream(token: int, seqs: range, text: str = "m") -> list[StoredMessage]:
    return [
        StoredMessage(
            "feed",
            s,
            f'{{"seq": {s}, "text": "{text}{s}"}}',
            1_700_000_000_000 + s,
            f"w{token}#1",
            token,
            s - 1,
        )
        for s in seqs
    ]


def test_messages_reads_the_sqlite_sink_in_seq_order_from_a_seq_on(tmp_path: Path) -> None:
    assert run_cli(["start", "feed", URL], tmp_path, PRIVATE).returncode == 0

    async def store() -> None:
        async with SqliteMessageSink.open(tmp_path / ".wsfleet" / "messages.sqlite") as sink:
            await sink.write(stream(1, range(1, 6)))

    asyncio.run(store())

    text = run_cli(["messages", "feed", "--page", "2"], tmp_path)
    from_3 = run_cli(["messages", "feed", "--from-seq", "3", "--json"], tmp_path)
    unknown = run_cli(["messages", "nobody"], tmp_path)

    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert [line.split("\t")[0] for line in lines] == ["1", "2", "3", "4", "5"]
    assert lines[0].split("\t")[1:] == [
        "2023-11-14T22:13:20.001+00:00",
        "w1#1",
        '{"seq": 1, "text": "m1"}',
    ]
    rows = [json.loads(line) for line in from_3.stdout.splitlines()]
    assert [r["seq"] for r in rows] == [3, 4, 5]
    assert rows[0] == {
        "connection_id": "feed",
        "seq": 3,
        "prev_seq": 2,
        "received_at_ms": 1_700_000_000_003,
        "worker_session": "w1#1",
        "token": 1,
        "data": '{"seq": 3, "text": "m3"}',
    }
    assert unknown.returncode == 1
    assert "'nobody' was never started" in unknown.stderr


def test_messages_reads_the_dynamodb_sink_one_copy_per_seq_the_newest_owners(
    aws: LocalAws, tmp_path: Path
) -> None:
    deployment = create_deployment_sync(aws)
    flags = ["--backend", "aws", "--endpoint-url", aws.moto_url, "--region", aws.region]
    flags += ["--dynamodb-endpoint-url", aws.dynamodb_url]
    queue = ["--queue-url", deployment["WSFLEET_QUEUE_URL"]]
    assert run_cli(["start", "feed", URL, *flags, *queue], tmp_path, PRIVATE).returncode == 0

    async def store() -> None:
        async with aws_client("dynamodb", aws.dynamodb_url, region=aws.region) as client:
            await DynamoDbMessageSink(client, DEFAULT_MESSAGES_TABLE).write(stream(1, range(1, 5)))
            # A new owner re-received 3 and 4 (the same data) and went on: two copies of each.
            await DynamoDbMessageSink(client, DEFAULT_MESSAGES_TABLE).write(stream(2, range(3, 7)))

    asyncio.run(store())

    result = run_cli(["messages", "feed", "--json", "--page", "2", *flags], tmp_path)

    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(r["seq"], r["token"]) for r in rows] == [
        (1, 1),
        (2, 1),
        (3, 2),
        (4, 2),
        (5, 2),
        (6, 2),
    ]


def test_messages_reads_a_kinesis_stream_sink_once_per_seq(aws: LocalAws, tmp_path: Path) -> None:
    """WSFLEET_MESSAGE_SINK=kinesis: the container's sink puts records on the stream, and the
    command reads them back by the consumer rule (a retried batch's copies dropped)."""
    deployment = create_deployment_sync(aws)
    env = {**deployment, "WSFLEET_MESSAGE_SINK": "kinesis", "WSFLEET_KINESIS_STREAM": "feeds"}

    async def store() -> None:
        container = AwsContainer(settings=load_settings(env))
        try:
            client = await provide(container.kinesis)
            await client.create_stream(StreamName="feeds", ShardCount=1)
            sink = await provide(container.sink)
            assert isinstance(sink, KinesisMessageSink)
            await sink.write(stream(1, range(1, 4)))
            await sink.write(stream(1, range(2, 5)))  # retried: 2 and 3 put twice
        finally:
            await shutdown(container)

    asyncio.run(store())
    flags = ["--backend", "aws", "--endpoint-url", aws.moto_url, "--region", aws.region]
    flags += [
        "--dynamodb-endpoint-url",
        aws.dynamodb_url,
        "--queue-url",
        deployment["WSFLEET_QUEUE_URL"],
    ]
    sink_env = {"WSFLEET_MESSAGE_SINK": "kinesis", "WSFLEET_KINESIS_STREAM": "feeds", **PRIVATE}
    assert run_cli(["start", "feed", URL, *flags], tmp_path, sink_env).returncode == 0

    result = run_cli(["messages", "feed", *flags], tmp_path, sink_env)

    assert result.returncode == 0, result.stderr
    assert [line.split("\t")[0] for line in result.stdout.splitlines()] == ["1", "2", "3", "4"]


async def test_follow_prints_messages_as_they_are_stored_until_interrupted(tmp_path: Path) -> None:
    """`--follow` keeps printing what is stored after it started, in seq order, one per seq,
    and a Ctrl-C (SIGINT) ends it with the interrupted exit code, not a traceback."""
    assert run_cli(["start", "feed", URL], tmp_path, PRIVATE).returncode == 0
    path = tmp_path / ".wsfleet" / "messages.sqlite"
    async with SqliteMessageSink.open(path) as sink:
        await sink.write(stream(1, range(1, 3)))
        follow = await cli_process(
            "follow", ["messages", "feed", "--follow", "--interval", "0.1"], tmp_path, {}
        ).start()
        try:
            await follow.wait_for_line(r"(?m)^2\t", 15)
            await sink.write(stream(1, range(3, 6)))
            await follow.wait_for_line(r"(?m)^5\t", 15)
            follow.signal(signal.SIGINT)
            code = await follow.wait(10)
        finally:
            await follow.kill()

    printed = [line.split("\t")[0] for line in follow.output().splitlines() if "\t" in line]
    assert printed == ["1", "2", "3", "4", "5"], follow.output()
    assert code == 130, follow.output()
    assert "Traceback" not in follow.output()
