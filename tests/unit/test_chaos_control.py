"""The chaos control file steers a worker's fault injectors: what it says now is what is
injected, one-shot plans fire once per revision, a bad file changes nothing."""

import json
from pathlib import Path

import pytest

from adapters.faults.clock import SkewedClock
from adapters.faults.control import ChaosControl, ChaosSpec, InvalidChaosSpec
from adapters.faults.sink import FaultInjectingSink
from adapters.faults.store import FaultInjectingStore
from adapters.memory.clock import FakeClock
from adapters.memory.sink import InMemoryMessageSink
from adapters.memory.store import InMemoryConnectionStore
from application.errors import SinkUnavailable, StoreUnavailable
from application.ports import StoredMessage


@pytest.fixture
def parts(tmp_path: Path) -> tuple[Path, FaultInjectingStore, SkewedClock, ChaosControl]:
    clock = SkewedClock(FakeClock(), 0)
    store = FaultInjectingStore(InMemoryConnectionStore(), clock)
    path = tmp_path / "chaos.json"
    return path, store, clock, ChaosControl(path, store, clock)


def write(path: Path, spec: dict[str, object]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(spec))
    tmp.replace(path)


async def test_the_file_sets_store_faults_and_clock_skew_and_a_new_file_replaces_them(
    parts: tuple[Path, FaultInjectingStore, SkewedClock, ChaosControl],
) -> None:
    path, store, clock, control = parts
    write(path, {"revision": 1, "outage": True, "latency_s": 0.3, "skew_ms": -500})
    await control.poll()
    assert (store.outage, store.latency_s, clock.skew_ms) == (True, 0.3, -500)

    write(path, {"revision": 2, "error_rate": 0.5})
    await control.poll()
    assert (store.outage, store.latency_s, store.error_rate, clock.skew_ms) == (
        False,
        0.0,
        0.5,
        0,
    )


async def test_one_shot_plans_fire_once_per_revision(
    parts: tuple[Path, FaultInjectingStore, SkewedClock, ChaosControl],
) -> None:
    path, store, _, control = parts
    await store.start("c1", "ws://upstream.test/c1", 1_000)
    write(path, {"revision": 1, "lose_responses": {"start": 1}})
    await control.poll()
    await control.poll()  # unchanged file: nothing planned twice
    with pytest.raises(StoreUnavailable, match="lost response"):
        await store.start("c2", "ws://upstream.test/c2", 1_000)
    assert await store.get("c2") is not None  # applied, though the caller was told it failed
    await store.start("c3", "ws://upstream.test/c3", 1_000)


async def test_a_removed_file_clears_every_fault(
    parts: tuple[Path, FaultInjectingStore, SkewedClock, ChaosControl],
) -> None:
    path, store, clock, control = parts
    write(path, {"revision": 1, "outage": True, "skew_ms": 500})
    await control.poll()
    path.unlink()
    await control.poll()
    assert (store.outage, clock.skew_ms) == (False, 0)


async def test_an_invalid_file_is_ignored_and_the_last_faults_stay(
    parts: tuple[Path, FaultInjectingStore, SkewedClock, ChaosControl],
) -> None:
    path, store, _, control = parts
    write(path, {"revision": 1, "outage": True})
    await control.poll()
    write(path, {"revision": 2, "outage": "yes"})
    await control.poll()
    assert store.outage is True
    assert control.applied.revision == 1


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ("[]", "expected a JSON object"),
        ('{"outrage": true}', "unknown keys"),
        ('{"latency_s": -1}', "latency_s must not be negative"),
        ('{"fail": {"renw": 1}}', "unknown store operation 'renw'"),
        ('{"skew_ms": 0.5}', "skew_ms must be an integer"),
        ('{"sink_fail": {"half": 1}}', "unknown sink failure mode 'half'"),
        ('{"sink_outage": 1}', "sink_outage must be true or false"),
        ('{"sink_latency_s": -0.1}', "sink_latency_s must not be negative"),
        ("{", "not JSON"),
    ],
)
def test_spec_errors_say_what_is_wrong(doc: str, message: str) -> None:
    with pytest.raises(InvalidChaosSpec, match=message):
        ChaosSpec.parse(doc.encode())


async def test_a_new_revision_replaces_the_plans_an_earlier_one_left_unused(
    parts: tuple[Path, FaultInjectingStore, SkewedClock, ChaosControl],
) -> None:
    path, store, _, control = parts
    write(path, {"revision": 1, "fail": {"start": 1}})
    await control.poll()
    write(path, {"revision": 2})
    await control.poll()

    await store.start("c1", "ws://upstream.test/c1", 1_000)  # the old plan is gone
    assert store.injected == 0


async def test_the_file_steers_the_sink_outage_latency_and_one_shot_failures(
    tmp_path: Path,
) -> None:
    clock = SkewedClock(FakeClock(), 0)
    store = FaultInjectingStore(InMemoryConnectionStore(), clock)
    inner = InMemoryMessageSink()
    sink = FaultInjectingSink(inner, clock)
    path = tmp_path / "chaos.json"
    control = ChaosControl(path, store, clock, sink=sink)
    batch = [StoredMessage("c1", seq, f"m{seq}", 1_000, "w1", 1, seq - 1) for seq in (1, 2, 3)]

    write(path, {"revision": 1, "sink_outage": True, "sink_latency_s": 0.5})
    await control.poll()
    assert (sink.outage, sink.latency_s) == (True, 0.5)

    write(path, {"revision": 2, "sink_fail": {"partial": 1, "applied": 1}})
    await control.poll()
    await control.poll()  # unchanged file: nothing planned twice
    assert (sink.outage, sink.latency_s, sink.planned) == (False, 0.0, 2)
    with pytest.raises(SinkUnavailable, match="partial"):
        await sink.write(batch)
    assert inner.seqs("c1") == [1, 3]  # some items stored, not a prefix
    with pytest.raises(SinkUnavailable, match="applied"):
        await sink.write(batch)
    assert inner.seqs("c1") == [1, 2, 3]
    await sink.write(batch)  # the plans are used up
    assert sink.injected == 2
