"""Jittered exponential back-off for the retries botocore does not do for us (unprocessed
batch items, transaction conflicts)."""

import asyncio
import random


def delay_s(attempt: int, base_s: float, cap_s: float) -> float:
    """ "Full jitter": uniform in [0, min(cap, base * 2**attempt)], so that many callers that
    failed together do not retry together."""
    return random.uniform(0.0, min(cap_s, base_s * 2**attempt))


async def pause(attempt: int, base_s: float, cap_s: float) -> None:
    await asyncio.sleep(delay_s(attempt, base_s, cap_s))
