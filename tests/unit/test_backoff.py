import random

from application.worker.backoff import Backoff


def test_backoff_grows_doubles_and_stays_under_the_cap_for_any_attempt() -> None:
    backoff = Backoff(0.5, 15.0, random.Random(1))
    delays = [backoff.delay(n) for n in (1, 2, 3, 10, 10_000)]
    assert 0.25 <= delays[0] <= 0.5
    assert 0.5 <= delays[1] <= 1.0
    assert all(7.5 <= d <= 15.0 for d in delays[3:])


def test_backoff_is_jittered() -> None:
    backoff = Backoff(1.0, 100.0, random.Random(7))
    assert len({backoff.delay(4) for _ in range(20)}) > 1
