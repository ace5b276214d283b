"""The packages whose re-exports are imported on first use (adapters/lazy.py) still export
every name they list, and nothing else."""

import importlib

import pytest

LAZY = [
    "adapters.websocket",
    "adapters.kinesis",
    "adapters.sqs",
    "adapters.cloudwatch",
    "entrypoints.api",
]


@pytest.mark.parametrize("package", LAZY)
def test_every_listed_name_resolves_from_its_submodule(package: str) -> None:
    module = importlib.import_module(package)

    missing = [name for name in module.__all__ if getattr(module, name, None) is None]

    assert missing == []


@pytest.mark.parametrize("package", LAZY)
def test_an_unlisted_name_is_an_attribute_error(package: str) -> None:
    module = importlib.import_module(package)

    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        module.Nope  # noqa: B018 (the access is the test)
