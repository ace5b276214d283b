from collections.abc import AsyncIterator

import pytest

from tests.support.fleet import Fleet


@pytest.fixture
async def fleet() -> AsyncIterator[Fleet]:
    fleet = Fleet()
    try:
        yield fleet
    finally:
        await fleet.close()
        # The judge: no stream ever had two subscribers at once, in any test.
        assert all(peak <= 1 for peak in fleet.peak_subscribers().values()), (
            fleet.peak_subscribers()
        )
