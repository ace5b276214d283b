"""The backend registry (entrypoints/backends.py): every entry's parts resolve, and everything
that names backends reads it, so a new backend is one entry."""

import inspect

import pytest
from dependency_injector import containers

from application.errors import ConfigurationError
from entrypoints.backends import BACKENDS, NAMES, backend_of, load
from entrypoints.cli.main import build_parser
from entrypoints.settings import BY_NAME
from entrypoints.settings.load import SINKS_OF_BACKEND


@pytest.mark.parametrize("name", NAMES)
def test_every_entry_names_parts_that_exist(name: str) -> None:
    backend = BACKENDS[name]

    container = load(backend.container)
    assert issubclass(container, containers.DeclarativeContainer)
    for provider in ("store", "queue", "sink", "prometheus", "core"):
        assert hasattr(container, provider), (name, provider)
    assert callable(load(backend.read_side))
    assert callable(load(backend.requirements))
    assert callable(load(backend.devstack))
    if backend.migrate is not None:
        assert inspect.iscoroutinefunction(load(backend.migrate))


def test_the_settings_and_the_cli_offer_exactly_the_registered_backends() -> None:
    assert BY_NAME["WSFLEET_BACKEND"].kind.describe() == "one of " + ", ".join(NAMES)
    assert set(SINKS_OF_BACKEND) == set(NAMES)
    [backend_flag] = [a for a in build_parser()._actions if "--backend" in a.option_strings]
    assert tuple(backend_flag.choices or ()) == NAMES


def test_an_unknown_backend_is_refused_by_name() -> None:
    with pytest.raises(ConfigurationError, match="WSFLEET_BACKEND='sqlite': expected one of"):
        backend_of("sqlite")
