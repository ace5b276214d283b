"""The chaos suite's switches: the long soak is marked `soak` and runs only with `--soak`
(`make chaos`); its length comes from CHAOS_MINUTES. Every run is added to the session's
chaos summary (tests/chaos/summary.py)."""

import pytest

from tests.chaos import summary
from tests.chaos.scenarios import Outcome


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--soak", action="store_true", help="run the chaos soak (make chaos)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "soak: the long chaos soak, run only with --soak")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--soak", default=False):
        return
    skip = pytest.mark.skip(reason="the chaos soak runs with --soak (make chaos)")
    for item in items:
        if "soak" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def chaos_outcomes() -> list[Outcome]:
    return summary.OUTCOMES
