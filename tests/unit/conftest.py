from collections.abc import AsyncIterator

import pytest

from application.config import WorkerConfig
from tests.support.fleet import DEFAULT_CONFIG, Fleet


@pytest.fixture
def fleet_config() -> WorkerConfig:
    """The fleet's worker configuration; a test module overrides this fixture for its own."""
    return DEFAULT_CONFIG


@pytest.fixture
async def fleet(fleet_config: WorkerConfig) -> AsyncIterator[Fleet]:
    fleet = Fleet(fleet_config)
    try:
        yield fleet
    finally:
        await fleet.close()
        # The judge: no stream ever had two subscribers at once, in any test.
        assert all(peak <= 1 for peak in fleet.peak_subscribers().values()), (
            fleet.peak_subscribers()
        )
