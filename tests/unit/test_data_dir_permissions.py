"""The embedded backend's data directory is private: created 0700, the files made in it 0600
whatever the shell's umask, and one that others can already read is named with its fix."""

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from entrypoints.cli.backend import ensure_data_dir


@pytest.fixture(autouse=True)
def shell_umask() -> Iterator[None]:
    """A permissive umask, as many shells have, restored afterwards."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_data_directory_and_the_files_made_in_it_are_private(tmp_path: Path) -> None:
    data = tmp_path / "data"

    ensure_data_dir(data, create=True)
    (data / "connections.sqlite").write_text("")

    assert mode(data) == 0o700
    assert mode(data / "connections.sqlite") == 0o600


def test_a_data_directory_others_can_read_is_named_with_its_fix(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    data.chmod(0o755)
    (data / "messages.sqlite").write_text("")
    (data / "messages.sqlite").chmod(0o644)

    with caplog.at_level(logging.WARNING):
        ensure_data_dir(data, create=False)

    warnings = [r.getMessage() for r in caplog.records]
    assert any(f"run `chmod 700 {data}`" in w and "mode 755" in w for w in warnings), warnings
    assert any(f"chmod 600 {data / 'messages.sqlite'}" in w for w in warnings), warnings


def test_a_private_data_directory_is_not_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ensure_data_dir(tmp_path / "data", create=True)
    (tmp_path / "data" / "messages.sqlite").write_text("")

    with caplog.at_level(logging.WARNING):
        ensure_data_dir(tmp_path / "data", create=False)

    assert caplog.records == []


async def test_the_dev_stacks_embedded_deployment_is_as_private(tmp_path: Path) -> None:
    """The chaos suite, the benchmarks and the demo open their embedded deployment through
    the dev stack: made with the shell's umask, every worker started on it warned that its
    data directory and SQLite files were readable by others."""
    from entrypoints.devstack.backends import open_embedded

    data = tmp_path / "run" / "data"
    async with open_embedded(data):
        files = {path.name: mode(path) for path in data.glob("*.sqlite*")}
    assert mode(data) == 0o700
    assert files
    assert files == dict.fromkeys(files, 0o600)
