"""TakeLimit: how many lease acquisitions one worker has in flight, adapted to the store.

Parallel takes move a dead worker's share in a few store round trips when the store answers
fast. When it is overloaded they overload it further: more acquisitions, slower renewals,
self-fences, connections handed back and taken again — a churn that did not stop by itself
on an overloaded store (bench/RESULTS.md, section 1). So the limit starts at one and doubles
after every wave of acquisitions that all answered well within the trust window, up to
`take_concurrency`; it halves after a wave with a slow or failed one, and falls back to one
whenever a session of this worker fences itself.
"""

from application.config import WorkerConfig

# An acquisition is "answered well" within this share of the time a session is trusted: 0.6 s
# at the default timings (lease 4 s, margin 1 s), 0.3 s at half of them. A fifth, not the
# twentieth it was with a lease per connection: an acquisition now takes three round trips
# (the item and both sessions, then the transaction), and a slow one no longer delays any
# lease's renewal (one hedged heartbeat per worker); but a dead worker's whole share becomes
# orphans at one instant, so taking it one at a time would be waited out on every crash.
HEALTHY_SHARE = 0.2


class TakeLimit:
    def __init__(self, config: WorkerConfig) -> None:
        self._ceiling = config.take_concurrency
        self._healthy_s = config.trusted_s * HEALTHY_SHARE
        self.current = 1

    def after_wave(self, slowest_s: float | None) -> None:
        """`slowest_s`: the slowest acquisition round trip of the wave; None if one failed."""
        if slowest_s is not None and slowest_s <= self._healthy_s:
            self.current = min(self._ceiling, self.current * 2)
        else:
            self.current = max(1, self.current // 2)

    def fenced(self) -> None:
        self.current = 1
