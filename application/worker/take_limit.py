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

# An acquisition is "answered well" within this share of the time a lease is trusted: 0.7 s
# at the default timings (lease 20 s, margin 6 s), 70 ms at a tenth of them.
HEALTHY_SHARE = 0.05


class TakeLimit:
    def __init__(self, config: WorkerConfig) -> None:
        self._ceiling = config.take_concurrency
        self._healthy_s = (config.lease_ms - config.self_fence_margin_ms) / 1000 * HEALTHY_SHARE
        self.current = 1

    def after_wave(self, slowest_s: float | None) -> None:
        """`slowest_s`: the slowest acquisition round trip of the wave; None if one failed."""
        if slowest_s is not None and slowest_s <= self._healthy_s:
            self.current = min(self._ceiling, self.current * 2)
        else:
            self.current = max(1, self.current // 2)

    def fenced(self) -> None:
        self.current = 1
