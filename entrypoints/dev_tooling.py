"""The dev tooling is a distribution of its own, wsfleet-dev (dev/pyproject.toml): the upstream
simulator, the demo, the devstack that starts backing services and workers, and the
fault-injecting adapters. The service's wheel, the worker image and the Lambda zip do not hold
it, so what needs it asks here first, and a service-only install answers with one line naming
what to install rather than a traceback."""

import importlib.util

from application.errors import ConfigurationError

INSTALL = "from a clone of the repository: `pip install ./dev`, or `make install`"


class DevToolingMissing(ConfigurationError):
    """Something asked for the dev tooling and this install does not have it."""


def installed(package: str) -> bool:
    """Whether `package` (one of wsfleet-dev's, e.g. "entrypoints.demo") can be imported."""
    return importlib.util.find_spec(package) is not None


def require(package: str, needed_by: str) -> None:
    """Raise DevToolingMissing, naming `needed_by` (a command, a setting), unless `package`
    can be imported."""
    if not installed(package):
        raise DevToolingMissing(
            f"{needed_by} needs the dev tooling (wsfleet-dev), not installed here; {INSTALL}"
        )
