"""Capped exponential back-off with jitter, so retrying workers never move in lock-step."""

import random

import attrs


@attrs.frozen
class Backoff:
    base_s: float
    max_s: float
    rng: random.Random = attrs.field(factory=random.Random, eq=False)

    def delay(self, attempt: int) -> float:
        """Delay before retry number `attempt` (1-based): uniform in [cap/2, cap]."""
        cap = min(self.max_s, self.base_s * 2.0 ** min(max(0, attempt - 1), 60))
        return cap / 2 + self.rng.random() * cap / 2
