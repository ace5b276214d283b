"""The extension points, loaded from configuration exactly as the worker loads them (through
the AWS container, and the postgres one for its sink), using the working examples in
examples/."""

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from application.errors import ConfigurationError
from application.ports import StoredMessage
from entrypoints.containers import AwsContainer, provide, shutdown
from entrypoints.read_side import open_read_side
from entrypoints.settings import load_settings
from entrypoints.simulator import UpstreamSimulator
from examples.file_sink import FileSink
from examples.subscribe_hook import SubscribeHook

AWS = {
    "WSFLEET_BACKEND": "aws",
    "WSFLEET_QUEUE_URL": "http://127.0.0.1:9/queue",
    "WSFLEET_REGION": "eu-west-1",
}


@pytest.fixture
async def container_for() -> AsyncIterator[Any]:
    """container_for(**WSFLEET_settings) -> an AwsContainer; all are shut down afterwards."""
    made: list[AwsContainer] = []

    def build(**settings: str) -> AwsContainer:
        env = {**AWS, **{f"WSFLEET_{k}": v for k, v in settings.items()}}
        made.append(AwsContainer(settings=load_settings(env)))
        return made[-1]

    yield build
    for container in made:
        await shutdown(container)


def message(seq: int) -> StoredMessage:
    return StoredMessage("m1", seq, f"m1:{seq}", 1_700_000_000_000, "w1", 1, seq - 1)


async def test_example_sink_replaces_the_default_and_writes_idempotently(
    container_for: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FILE_SINK_DIR", str(tmp_path))
    container = container_for(MESSAGE_SINK="examples.file_sink:create", SERVICE_NAME="svc")

    sink = await provide(container.sink)
    await sink.write([message(1), message(2)])
    await sink.write([message(2), message(3)])  # a retried batch overlaps

    assert isinstance(sink, FileSink)
    assert sink.directory == tmp_path / "svc"
    assert sink.seqs("m1") == [1, 2, 3]
    stored = json.loads((tmp_path / "svc" / "m1" / f"{2:012d}.json").read_text())
    assert stored["data"] == "m1:2"
    assert stored["token"] == 1


async def test_example_hook_subscribes_and_parses_through_the_connector(
    container_for: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UPSTREAM_TOKEN", "t0ken")
    container = container_for(UPSTREAM_HOOK="examples.subscribe_hook:SubscribeHook")
    upstream = await provide(container.upstream)

    async with UpstreamSimulator(rate=200.0) as simulator:
        simulator.create_stream("m1")
        seqs = []
        async with upstream.open(simulator.url("m1"), 5, ["127.0.0.1"]) as stream:
            async for item in stream.messages():
                seqs.append(item.seq)
                if len(seqs) == 3:
                    break
        record = simulator.record("m1")

    assert seqs == [5, 6, 7]
    assert record["connections"][0]["received"] == 1  # the subscribe frame
    assert SubscribeHook().headers("ws://x") == {"Authorization": "Bearer t0ken"}


async def test_default_sink_is_the_messages_table_when_none_is_configured(
    container_for: Any,
) -> None:
    from adapters.dynamodb.message_sink import DynamoDbMessageSink

    sink = await provide(container_for().sink)
    assert isinstance(sink, DynamoDbMessageSink)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"MESSAGE_SINK": "no_such_pkg.sinks:Sink"}, "cannot import 'no_such_pkg.sinks'"),
        ({"MESSAGE_SINK": "examples.file_sink:Missing"}, "has no attribute 'Missing'"),
        ({"MESSAGE_SINK": "examples.subscribe_hook:SubscribeHook"}, "is not a MessageSink"),
        ({"UPSTREAM_HOOK": "examples.file_sink:create"}, "is not an UpstreamHook"),
    ],
)
async def test_a_bad_extension_is_a_configuration_error_naming_the_variable(
    container_for: Any, settings: dict[str, str], message: str
) -> None:
    container = container_for(**settings)
    variable = "WSFLEET_" + next(iter(settings))

    with pytest.raises(ConfigurationError) as caught:
        await provide(container.sink if "MESSAGE_SINK" in settings else container.upstream)

    assert str(caught.value).startswith(f"{variable}=")
    assert message in str(caught.value)


async def test_the_postgres_backend_takes_a_sink_of_your_own_as_the_others_do(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its own sink by default (the database's messages table), the user's when named, and
    `wsfleet messages` refused by name for the user's."""
    from adapters.postgres.db import migrate_database
    from adapters.postgres.message_sink import PostgresMessageSink
    from entrypoints.postgres import PostgresContainer

    await migrate_database(postgres_url)
    monkeypatch.setenv("FILE_SINK_DIR", str(tmp_path))
    where = {"WSFLEET_BACKEND": "postgres", "WSFLEET_POSTGRES_URL": postgres_url}
    own = PostgresContainer(settings=load_settings(where))
    users = PostgresContainer(
        settings=load_settings({**where, "WSFLEET_MESSAGE_SINK": "examples.file_sink:create"})
    )
    try:
        default = await provide(own.sink)
        sink = await provide(users.sink)
        await sink.write([message(1)])
        async with open_read_side(own.settings()) as read_side:
            reader = await read_side.reader()
        async with open_read_side(users.settings()) as read_side:
            with pytest.raises(ConfigurationError, match="reads the built-in sinks only"):
                await read_side.reader()
    finally:
        await shutdown(own)
        await shutdown(users)

    assert isinstance(default, PostgresMessageSink)
    assert isinstance(reader, PostgresMessageSink)
    assert isinstance(sink, FileSink)
    assert sink.seqs("m1") == [1]
