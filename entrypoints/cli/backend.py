"""The backend a command runs on: its settings (from the environment the flags were written
into, see options.py), what the command needs of it, and its container (entrypoints/
backends.py, the registry), or, for a command that only reads, its read side.

The data directory of the embedded backend: commands that write (`worker`, `api`, `start`,
`demo`) create the directory itself when it is missing, never its parents (a missing parent is
more likely a typo than a wish); commands that only read or change what exists (`status`,
`history`, `stop`) refuse a missing directory rather than create an empty database there.
"""

import logging
import os
import stat
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from application.errors import ConfigurationError
from entrypoints.backends import backend_of, load, new_container
from entrypoints.settings import Settings, load_settings

log = logging.getLogger(__name__)


def command_settings(
    env: Mapping[str, str], *, writes: bool, needs_queue: bool = False
) -> Settings:
    """Settings for a command, and what the command needs of its backend (the registry's
    `requirements`). Raises ConfigurationError (SettingsError) with every problem."""
    settings = load_settings(env, aws=False)
    requirements = load(backend_of(settings.backend).requirements)
    requirements(settings, env, writes=writes, needs_queue=needs_queue)
    return settings


def aws_requirements(
    settings: Settings, env: Mapping[str, str], *, writes: bool, needs_queue: bool
) -> None:
    if needs_queue and not settings.queue_url:
        raise ConfigurationError(
            "the aws backend needs the SQS hint queue for this command: "
            "set WSFLEET_QUEUE_URL or pass --queue-url"
        )
    if not (settings.region or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")):
        raise ConfigurationError(
            "the aws backend needs a region: set WSFLEET_REGION (or AWS_REGION), or pass --region"
        )


def embedded_requirements(
    settings: Settings, env: Mapping[str, str], *, writes: bool, needs_queue: bool
) -> None:
    ensure_data_dir(Path(settings.data_dir), create=writes)


def no_requirements(
    settings: Settings, env: Mapping[str, str], *, writes: bool, needs_queue: bool
) -> None:
    """A backend whose settings say all it needs (the postgres one: its URL)."""


# The data directory holds every upstream URL with its credentials and every message: only
# its owner may read it. With this umask every file the process creates (SQLite's database,
# -wal and -shm files) is 0600 and the directory 0700, whatever the shell's umask was.
PRIVATE_UMASK = 0o077


def ensure_data_dir(path: Path, *, create: bool) -> None:
    """The embedded backend's data directory, private to its owner (see PRIVATE_UMASK): an
    existing one that others can read is kept as it is, with a warning that says the fix."""
    os.umask(PRIVATE_UMASK)
    if path.is_dir():
        _warn_if_shared(path)
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
        path.mkdir(mode=0o700)
    except FileExistsError:
        pass  # another process created it meanwhile
    except OSError as exc:
        raise ConfigurationError(f"cannot create data directory {path}: {exc}") from exc


def _warn_if_shared(path: Path) -> None:
    shared = [p for p in (path, *sorted(path.glob("*.sqlite*"))) if p.stat().st_mode & 0o077]
    for found in shared:
        mode = stat.S_IMODE(found.stat().st_mode)
        fix = "700" if found.is_dir() else "600"
        log.warning(
            "%s is readable by other users (mode %o): it holds upstream URLs with their "
            "credentials and the messages; run `chmod %s %s`",
            found,
            mode,
            fix,
            found,
        )


@asynccontextmanager
async def open_backend(settings: Settings) -> AsyncIterator[Any]:
    """The backend's container; every resource it opened is closed on exit. A command that only
    reads opens the backend's read side instead (entrypoints/read_side/: no container)."""
    from entrypoints.containers import shutdown  # the composition root: only when asked

    container = new_container(settings)
    try:
        yield container
    finally:
        await shutdown(container)
