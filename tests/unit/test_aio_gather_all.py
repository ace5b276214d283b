"""application.aio.gather_all: every awaitable ends before the first error is raised (what
the takes of a wave, the puts of a sink batch and the reads of a death report rely on)."""

import asyncio

import pytest

from application.aio import gather_all
from application.errors import StoreUnavailable


async def test_results_come_back_in_the_order_given() -> None:
    async def value(v: int, delay: float) -> int:
        await asyncio.sleep(delay)
        return v

    assert await gather_all(value(1, 0.02), value(2, 0.0), value(3, 0.01)) == [1, 2, 3]


async def test_the_first_error_is_raised_only_after_every_other_has_ended() -> None:
    ended: list[str] = []

    async def fails(name: str) -> None:
        ended.append(name)
        raise StoreUnavailable(name)

    async def slow() -> None:
        await asyncio.sleep(0.05)
        ended.append("slow")

    with pytest.raises(StoreUnavailable, match="first"):
        await gather_all(fails("first"), slow(), fails("second"))
    assert sorted(ended) == ["first", "second", "slow"]
