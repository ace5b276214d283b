"""The backends, one entry each: what a process needs to know to run on one. Adding a backend
is one entry here, its composition root (a sibling of entrypoints/embedded.py), and in
entrypoints/settings its own settings and its built-in sinks (`SINKS_OF_BACKEND`; a test
checks that every entry has them).

Light on purpose: the CLI's `--help` and the settings table read the names, so the heavy parts
(containers, read sides, requirement checks, the dev stack's deployment) are named as
`module:attribute` and imported only when used, as the CLI's command handlers are.

- `container`: the composition root, called as `Container(settings=settings)`;
- `read_side`: `(settings) -> async context manager of a ReadSide` (entrypoints/read_side/):
  the store and the message reader, without the container, for the read-only commands;
- `requirements`: `(settings, env, *, writes, needs_queue) -> None`, what a command needs
  beyond the settings (raises ConfigurationError): a data directory, a queue URL, a region;
- `image_worker`: whether `python -m entrypoints.worker` (the image's command) runs it; the
  dev stack starts that worker where it does, `wsfleet worker` where it does not;
- `devstack`: `(run_dir, settings) -> async context manager of a LocalDeployment`: the backing
  services started for a run on this machine (entrypoints/devstack/backends.py);
- `migrate`: `async (settings) -> (version found, version now)`, what `wsfleet migrate` runs;
  None where there is no versioned schema (SQLite's tables are made when first opened, the
  DynamoDB tables by infra/ or the dev stack).
"""

import importlib
from typing import TYPE_CHECKING, Any

import attrs

from application.errors import ConfigurationError

if TYPE_CHECKING:
    from entrypoints.settings import Settings


@attrs.frozen
class Backend:
    name: str
    summary: str  # what it keeps where, for --help
    container: str
    read_side: str
    requirements: str
    devstack: str
    image_worker: bool
    migrate: str | None = None


BACKENDS: dict[str, Backend] = {
    b.name: b
    for b in (
        Backend(
            "embedded",
            "SQLite files in the data directory, one host (the default)",
            container="entrypoints.embedded:EmbeddedContainer",
            read_side="entrypoints.read_side.embedded:read_side",
            requirements="entrypoints.cli.backend:embedded_requirements",
            devstack="entrypoints.devstack.backends:start_embedded",
            image_worker=False,
        ),
        Backend(
            "aws",
            "DynamoDB, SQS and CloudWatch",
            container="entrypoints.containers:AwsContainer",
            read_side="entrypoints.read_side.aws:read_side",
            requirements="entrypoints.cli.backend:aws_requirements",
            devstack="entrypoints.devstack.backends:start_aws",
            image_worker=True,
        ),
        Backend(
            "postgres",
            "one PostgreSQL database (WSFLEET_POSTGRES_URL), workers on any hosts",
            container="entrypoints.postgres:PostgresContainer",
            read_side="entrypoints.read_side.postgres:read_side",
            requirements="entrypoints.cli.backend:no_requirements",
            devstack="entrypoints.devstack.backends:start_postgres",
            image_worker=True,
            migrate="entrypoints.postgres:migrate",
        ),
    )
}
NAMES: tuple[str, ...] = tuple(BACKENDS)


def backend_of(name: str) -> Backend:
    try:
        return BACKENDS[name]
    except KeyError:
        raise ConfigurationError(
            f"WSFLEET_BACKEND={name!r}: expected one of {', '.join(NAMES)}"
        ) from None


def load(ref: str) -> Any:
    """`"package.module:attribute"` -> the attribute."""
    module, _, attribute = ref.partition(":")
    return getattr(importlib.import_module(module), attribute)


def new_container(settings: "Settings") -> Any:
    """The composition root of the settings' backend (nothing opened yet)."""
    return load(backend_of(settings.backend).container)(settings=settings)
