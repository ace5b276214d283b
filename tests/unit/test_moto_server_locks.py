"""entrypoints/devstack/moto_server.py serves a locked service's requests one at a time and
every other service's side by side (moto's Kinesis gives two concurrent puts the same sequence
number; SQS long polls must not queue behind each other)."""

import threading
import time
from collections.abc import Iterable
from typing import Any

from entrypoints.devstack.moto_server import OneRequestAtATime


class Overlaps:
    """A WSGI app that records how many of its requests ran at once."""

    def __init__(self) -> None:
        self.running = self.most = 0
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        with self._lock:
            self.running += 1
            self.most = max(self.most, self.running)
        time.sleep(0.05)
        with self._lock:
            self.running -= 1
        return [b"{}"]


def most_at_once(target: str) -> int:
    inner = Overlaps()
    app = OneRequestAtATime(inner, ["Kinesis_"])
    threads = [
        threading.Thread(target=lambda: list(app({"HTTP_X_AMZ_TARGET": target}, None)))
        for _ in range(6)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return inner.most


def test_kinesis_requests_are_served_one_at_a_time() -> None:
    assert most_at_once("Kinesis_20131202.PutRecords") == 1


def test_other_requests_are_served_side_by_side() -> None:
    assert most_at_once("AmazonSQS.ReceiveMessage") > 1
