"""What only the SQLite sink has (the port's behaviour is in tests/contract): a file of its own,
the rewrite count the demo reports, and configuration errors that name the path."""

from pathlib import Path

import pytest

from adapters.sqlite.message_sink import SqliteMessageSink
from application.errors import ConfigurationError
from application.ports import StoredMessage


def message(seq: int, cid: str = "c1", token: int = 1) -> StoredMessage:
    return StoredMessage(cid, seq, f"data {seq}", 1_700_000_000_000, f"w{token}", token, seq - 1)


async def test_rewrites_of_stored_seqs_are_counted_per_connection(tmp_path: Path) -> None:
    async with SqliteMessageSink.open(tmp_path / "messages.sqlite") as sink:
        await sink.write([message(1), message(2), message(3), message(1, "c2")])
        # A new owner re-receives what the crashed one stored after its last checkpoint.
        await sink.write([message(2, token=2), message(3, token=2), message(4, token=2)])

        assert await sink.seqs("c1") == [1, 2, 3, 4]
        assert await sink.rewrites() == {"c1": 2}
        assert [m.token for m in await sink.read("c1")] == [1, 2, 2, 2]


async def test_two_sinks_on_one_file_see_each_others_writes(tmp_path: Path) -> None:
    path = tmp_path / "messages.sqlite"
    async with SqliteMessageSink.open(path) as one, SqliteMessageSink.open(path) as two:
        await one.write([message(1)])
        await two.write([message(1, token=2), message(2, token=2)])

        assert await one.seqs("c1") == [1, 2]
        assert await one.rewrites() == {"c1": 1}


async def test_a_missing_directory_is_a_configuration_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"

    with pytest.raises(ConfigurationError, match=str(missing)):
        await SqliteMessageSink.connect(missing / "messages.sqlite")

    assert not missing.exists()


async def test_max_batch_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="max_batch"):
        await SqliteMessageSink.connect(tmp_path / "messages.sqlite", max_batch=0)
