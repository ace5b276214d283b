"""Network namespaces for the multi-host tests (entrypoints/devstack/netns.py). Where they
cannot be made the test is skipped, saying why. Under CI=true, a root that cannot make them
is a failure (the kernel or `ip` is broken there, and the partition test would never run);
not being root stays a skip, its reason in the summary (docs/decisions.md)."""

import os
from typing import NoReturn

import pytest

from entrypoints.devstack import netns


def require_namespaces() -> None:
    reason = netns.unavailable()
    if reason is not None:
        missing_namespaces(reason)


def missing_namespaces(reason: str) -> NoReturn:
    """Skips the test, or fails it under CI=true when this process is root."""
    if os.geteuid() == 0 and os.environ.get("CI", "").lower() == "true":
        pytest.fail(
            f"CI=true, running as root, and network namespaces cannot be made: {reason}",
            pytrace=False,
        )
    pytest.skip(f"network namespaces cannot be made here: {reason}")
