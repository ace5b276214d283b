"""Reading the upstream simulator's records (entrypoints/simulator): subscriber intervals per
stream, on its wall clock (epoch ms), and what it sent. Latencies are differences between a
fault's time in the runner and these timestamps: the same host, the same clock."""

import asyncio
import time
from collections.abc import Awaitable, Callable, Collection, Iterator, Mapping, Sequence
from typing import Any

Record = Mapping[str, Any]


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


def connects_since(record: Record, since_ms: int) -> list[int]:
    return sorted(
        c["connected_at_ms"] for c in record["connections"] if c["connected_at_ms"] >= since_ms
    )


def moves_per_fault(
    faults: Sequence[Mapping[str, Any]],
    streams: Mapping[str, Record | None],
    ended_ms: int,
    kinds: Collection[str],
) -> dict[str, dict[str, int]]:
    """Per kind of fault that ends a worker (each fault with "kind", "at_ms" and the
    "connections" the worker held; those of `kinds` are counted): how many were subscribed to
    again, and how many more than once, before the next fault of any kind (or the fault's
    "moves_until_ms"). A second subscription is a second move: placement, then balancing."""
    out: dict[str, dict[str, int]] = {}
    for fault, connects in _connects_per_fault(faults, streams, ended_ms, kinds):
        counts = out.setdefault(fault["kind"], {"moved": 0, "moved_twice": 0, "most": 0})
        counts["moved"] += 1
        counts["moved_twice"] += len(connects) > 1
        counts["most"] = max(counts["most"], len(connects))
    return out


def settled_per_fault(
    faults: Sequence[Mapping[str, Any]],
    streams: Mapping[str, Record | None],
    ended_ms: int,
    kinds: Collection[str],
) -> dict[str, list[float]]:
    """Per kind of fault (as `moves_per_fault` reads them): for each connection the worker
    held, seconds from the fault to its last subscription in the fault's window, the owner it
    settled with (issue 27's "settled owner"). A connection moved twice settles at its
    second move; one never subscribed to again in the window is left out (the first-owner
    latency counts it as a timeout)."""
    out: dict[str, list[float]] = {}
    for fault, connects in _connects_per_fault(faults, streams, ended_ms, kinds):
        samples = out.setdefault(fault["kind"], [])
        if connects:
            samples.append((connects[-1] - fault["at_ms"]) / 1000)
    return out


def _connects_per_fault(
    faults: Sequence[Mapping[str, Any]],
    streams: Mapping[str, Record | None],
    ended_ms: int,
    kinds: Collection[str],
) -> Iterator[tuple[Mapping[str, Any], list[int]]]:
    """(fault, subscriptions of one of its connections within the fault's window), for each
    connection of each fault of `kinds`: the window ends at the next fault of any kind (or
    the fault's "moves_until_ms")."""
    timed = sorted(faults, key=lambda f: f["at_ms"])
    for fault, after in zip(timed, [*timed[1:], None], strict=True):
        if fault["kind"] not in kinds:
            continue
        until = ended_ms if after is None else after["at_ms"]
        until = min(until, fault.get("moves_until_ms", until))
        for cid in fault["connections"]:
            record = streams.get(cid) or {"connections": []}
            yield fault, [t for t in connects_since(record, fault["at_ms"]) if t < until]


def first_connect_since(record: Record | None, since_ms: int) -> int | None:
    found = connects_since(record, since_ms) if record else []
    return found[0] if found else None


def disconnect_of_live_at(record: Record | None, at_ms: int) -> int | None:
    """When the subscriber(s) connected at `at_ms` had all gone (None while one remains)."""
    if record is None:
        return None
    ends = []
    for c in record["connections"]:
        if c["connected_at_ms"] <= at_ms and (
            c["disconnected_at_ms"] is None or c["disconnected_at_ms"] >= at_ms
        ):
            if c["disconnected_at_ms"] is None:
                return None
            ends.append(c["disconnected_at_ms"])
    return max(ends, default=at_ms)


def live_count(record: Record | None) -> int:
    return int(record["subscribers"]) if record else 0


def intervals(record: Record, end_ms: int) -> list[tuple[int, int]]:
    return [
        (c["connected_at_ms"], c["disconnected_at_ms"] or end_ms) for c in record["connections"]
    ]


def overlap_ms(record: Record, end_ms: int) -> int:
    """Total time two or more subscribers were connected at once (0 = never)."""
    points = sorted(
        [(a, 1) for a, _ in intervals(record, end_ms)]
        + [(b, -1) for _, b in intervals(record, end_ms)],
        key=lambda p: (p[0], p[1]),  # a disconnect at the same ms as a connect goes first
    )
    total, depth, since = 0, 0, 0
    for at, step in points:
        if depth >= 2:
            total += at - since
        depth += step
        since = at
    return total


def redelivered(record: Record) -> int:
    """Seqs the upstream sent more than once (to successive subscribers): a new owner resuming
    from a checkpoint older than what its predecessor had received."""
    ranges: list[tuple[int, int]] = sorted(
        (int(c["first_seq"]), int(c["last_seq"])) for c in record["connections"] if c["first_seq"]
    )
    sent = sum(last - first + 1 for first, last in ranges)
    union, reach = 0, 0
    for first, last in ranges:
        if last > reach:
            union += last - max(first, reach + 1) + 1
            reach = last
    return sent - union


async def poll_each(
    refresh: Callable[[], Awaitable[object]],
    ids: Sequence[str],
    when: Callable[[str], int | None],
    wait_s: float,
    interval_s: float = 0.05,
) -> tuple[dict[str, int], int]:
    """Refresh every `interval_s` until `when(id)` gives a time for each id, or `wait_s`
    passed: the times found, and how many ids never came."""
    found: dict[str, int] = {}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    while len(found) < len(ids) and loop.time() < deadline:
        await asyncio.sleep(interval_s)
        await refresh()
        for cid in ids:
            at = when(cid)
            if cid not in found and at is not None:
                found[cid] = at
    return found, len(ids) - len(found)
