"""The chaos control file steers a worker's fault injectors: what it says now is what is
injected, one-shot plans fire once per revision, a bad file changes nothing. And the
fault-injecting store: faults are planned per command (by class name) and per query."""

import json
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from adapters.faults.clock import SkewedClock
from adapters.faults.control import ChaosControl, ChaosSpec, InvalidChaosSpec
from adapters.faults.sink import FaultInjectingSink
from adapters.faults.store import (
    COMMANDS,
    OPERATIONS,
    QUERIES,
    FaultInjectingStore,
    UnknownOperation,
)
from adapters.memory.clock import FakeClock
from adapters.memory.sink import InMemoryMessageSink
from adapters.memory.store import InMemoryConnectionStore
from application.errors import SinkUnavailable, StoreUnavailable
from application.ports import ConnectionStore, StoredMessage


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
    write(path, {"revision": 1, "lose_responses": {"Start": 1}})
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
        ('{"fail": {"renew": 1}}', "unknown store operation 'renew'"),  # the old menu's name
        ('{"lose_responses": {"start": 1}}', "unknown store operation 'start'"),
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
    write(path, {"revision": 1, "fail": {"Start": 1}})
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


# -- the fault-injecting store: faults are planned per command and per query -----------------

NOW = 1_000


async def _held() -> tuple[InMemoryConnectionStore, FaultInjectingStore]:
    """c1 started and held by live session s1 (token 1); s2 live too."""
    inner = InMemoryConnectionStore()
    store = FaultInjectingStore(inner, FakeClock())
    await store.start("c1", "ws://upstream.test/c1", NOW)
    for sid in ("s1", "s2"):
        await store.open_session(sid, 10_000, 10, NOW)
    assert await store.try_acquire("c1", "s1", NOW) is not None
    return inner, store


NamedCall = Callable[[FaultInjectingStore], Awaitable[object]]
NAMED_OPERATIONS: list[tuple[str, NamedCall]] = [
    ("Start", lambda s: s.start("c2", "ws://upstream.test/c2", NOW)),
    ("Stop", lambda s: s.stop("c1", NOW)),
    ("Acquire", lambda s: s.try_acquire("c1", "s2", NOW)),
    ("Checkpoint", lambda s: s.checkpoint("c1", "s1", 1, 5, NOW)),
    ("Release", lambda s: s.release("c1", "s1", 1, 5, NOW)),
    ("EndStream", lambda s: s.end_stream("c1", "s1", 1, 5, NOW)),
    ("ReportUpstreamFailure", lambda s: s.report_upstream_failure("c1", "s1", 1, 5, NOW, "x", NOW)),
    ("OpenSession", lambda s: s.open_session("s3", 10_000, 10, NOW)),
    ("RenewSession", lambda s: s.renew_session("s1", 10_000, 1, 10, NOW)),
    ("EndSession", lambda s: s.end_session("s1", "bye", NOW)),
    ("NoteExpiry", lambda s: s.note_expiry("s1", "s2", NOW + 20_000)),  # s1 expired by then
]


def test_the_menu_is_every_command_by_class_name_and_every_query_by_method_name() -> None:
    assert {op for op, _ in NAMED_OPERATIONS} == COMMANDS
    assert ConnectionStore.__abstractmethods__ - {"execute", "execute_session"} == QUERIES
    assert OPERATIONS == COMMANDS | QUERIES
    assert not COMMANDS & QUERIES


@pytest.mark.parametrize(("op", "call"), NAMED_OPERATIONS, ids=[op for op, _ in NAMED_OPERATIONS])
async def test_a_named_operation_meets_the_failure_planned_for_its_command(
    op: str, call: NamedCall
) -> None:
    """The port's named operations reach the faults through `execute`: a refusal they turn
    into None or False (try_acquire, checkpoint…) must never swallow a store failure."""
    inner, store = await _held()
    before = (await inner.get("c1"), await inner.list_sessions())
    store.fail_next(op)

    with pytest.raises(StoreUnavailable, match=rf"^injected failure \({op}\)$"):
        await call(store)

    assert (await inner.get("c1"), await inner.list_sessions()) == before  # unapplied
    assert store.injected == 1
    await call(store)  # the plan is used up


async def test_a_lost_session_renewal_was_applied_though_the_worker_was_told_it_failed() -> None:
    inner, store = await _held()
    store.fail_next("RenewSession", applied=True)

    with pytest.raises(StoreUnavailable, match="lost response"):
        await store.renew_session("s1", 10_000, 1, 10, NOW + 5_000)

    renewed = await inner.get_session("s1")
    assert renewed is not None
    assert renewed.expires_at_ms == NOW + 15_000


async def _orphans(store: ConnectionStore) -> object:
    return [page async for page in store.iter_orphans(NOW + 20_000, 10)]  # s1 has expired


QUERY_CALLS: dict[str, Callable[[ConnectionStore], Awaitable[object]]] = {
    "get": lambda s: s.get("c1"),
    "get_session": lambda s: s.get_session("s1"),
    "list_sessions": lambda s: s.list_sessions(),
    "iter_orphans": _orphans,
    "next_available_at": lambda s: s.next_available_at(NOW),
    "stop_requested": lambda s: s.stop_requested("s1"),
    "owned_by": lambda s: s.owned_by("s1"),
    "forget_session": lambda s: s.forget_session("s2", NOW + 20_000),
    "history": lambda s: s.history("c1"),
    "session_history": lambda s: s.session_history("s1"),
    "list_connections": lambda s: s.list_connections(),
}


@pytest.mark.parametrize("query", sorted(QUERY_CALLS))
async def test_each_query_fails_by_its_own_name_and_otherwise_answers_as_the_inner_store(
    query: str,
) -> None:
    assert set(QUERY_CALLS) == QUERIES
    call = QUERY_CALLS[query]
    _, store = await _held()
    store.fail_next(query)

    with pytest.raises(StoreUnavailable, match=rf"^injected failure \({query}\)$"):
        await call(store)
    twin, _ = await _held()  # the same state, with no fault injector in front
    assert await call(store) == await call(twin)


def test_a_plan_for_an_operation_not_on_the_menu_is_refused() -> None:
    store = FaultInjectingStore(InMemoryConnectionStore(), FakeClock())

    with pytest.raises(UnknownOperation, match=r"unknown store operation 'renew'; allowed: \["):
        store.fail_next("renew")
