"""The backend a command runs on: its settings (from the environment the flags were written
into, see options.py) and its container.

The data directory of the embedded backend: commands that write (`worker`, `api`, `start`,
`demo`) create the directory itself when it is missing, never its parents (a missing parent is
more likely a typo than a wish); commands that only read or change what exists (`status`,
`history`, `stop`) refuse a missing directory rather than create an empty database there.
"""

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from application.errors import ConfigurationError
from entrypoints.containers import AwsContainer, shutdown
from entrypoints.embedded import EmbeddedContainer
from entrypoints.settings import Settings, load_settings


def command_settings(
    env: Mapping[str, str], *, writes: bool, needs_queue: bool = False
) -> Settings:
    """Settings for a command. Raises ConfigurationError (SettingsError) with every problem."""
    settings = load_settings(env, aws=False)
    if settings.backend == "aws":
        if needs_queue and not settings.queue_url:
            raise ConfigurationError(
                "the aws backend needs the SQS hint queue for this command: "
                "set WSFLEET_QUEUE_URL or pass --queue-url"
            )
        if not (settings.region or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")):
            raise ConfigurationError(
                "the aws backend needs a region: set WSFLEET_REGION (or AWS_REGION), or pass "
                "--region"
            )
    else:
        ensure_data_dir(Path(settings.data_dir), create=writes)
    return settings


def ensure_data_dir(path: Path, *, create: bool) -> None:
    if path.is_dir():
        return
    if path.exists():
        raise ConfigurationError(f"data directory {path} is not a directory")
    if not create:
        raise ConfigurationError(
            f"data directory {path} does not exist: nothing was started with it. Pass "
            "--data-dir (or set WSFLEET_DATA_DIR) to the directory your workers use, or run "
            "`wsfleet start` or `wsfleet worker` first (they create it)"
        )
    if not path.absolute().parent.is_dir():
        raise ConfigurationError(
            f"cannot create data directory {path}: its parent {path.absolute().parent} does "
            "not exist (only the last component is created)"
        )
    try:
        path.mkdir()
    except FileExistsError:
        pass  # another process created it meanwhile
    except OSError as exc:
        raise ConfigurationError(f"cannot create data directory {path}: {exc}") from exc


def new_container(settings: Settings) -> Any:
    if settings.backend == "aws":
        return AwsContainer(settings=settings)
    return EmbeddedContainer(settings=settings)


@asynccontextmanager
async def open_backend(settings: Settings) -> AsyncIterator[Any]:
    """The backend's container; every resource it opened is closed on exit."""
    container = new_container(settings)
    try:
        yield container
    finally:
        await shutdown(container)
