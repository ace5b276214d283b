"""ChaosControl: steers a FaultInjectingStore, a FaultInjectingSink and a SkewedClock inside a
real worker process from a small JSON file that a chaos harness rewrites (tests/chaos). Test
and chaos runs only: the entrypoints wire it when WSFLEET_CHAOS_CONTROL names the file, and
never otherwise.

The file says which faults are wanted NOW; a key left out means "no such fault":

    {"revision": 7, "outage": false, "severed": false, "latency_s": 0.3, "error_rate": 0.2,
     "timeout_s": 0.4, "timeout_rate": 0.3, "skew_ms": -500, "fail": {"RenewSession": 1},
     "lose_responses": {"Acquire": 2, "stop_requested": 1}, "sink_outage": false,
     "sink_unnamed_outage": false,
     "sink_latency_s": 0.5, "sink_fail": {"partial": 2, "applied": 1}}

`fail` (calls refused unapplied) and `lose_responses` (calls applied whose response is lost)
name store operations as the FaultInjectingStore does: a command by its class name, a query by
its method name (`adapters.faults.store.OPERATIONS`). They and `sink_fail` (sink writes failing
after storing nothing, some or all of the batch: see adapters/faults/sink.py) are one-shot
plans, set when `revision` grows: they replace whatever an earlier revision planned and was
not used yet (a plan for a call a worker rarely makes must not linger into the next fault). A
missing file means no faults. The file is polled every `interval_s` and read in a thread (the
loop never waits on the disk); a writer should replace it atomically (write, then rename).
Each applied revision is logged once ("chaos faults applied", with `chaos_revision`), which is
how a harness knows it took effect.
"""

import asyncio
import json
import logging
import os
from collections.abc import Collection
from pathlib import Path
from typing import Any

import attrs

from adapters.faults.clock import SkewedClock
from adapters.faults.sink import FaultInjectingSink, SinkFault
from adapters.faults.store import OPERATIONS, FaultInjectingStore

log = logging.getLogger(__name__)

_KEYS = frozenset(
    {
        "revision",
        "outage",
        "severed",
        "latency_s",
        "error_rate",
        "timeout_s",
        "timeout_rate",
        "skew_ms",
        "fail",
        "lose_responses",
        "sink_outage",
        "sink_unnamed_outage",
        "sink_latency_s",
        "sink_fail",
    }
)
SINK_FAULTS = {fault.value: fault for fault in SinkFault}


class InvalidChaosSpec(ValueError):
    pass


@attrs.frozen
class ChaosSpec:
    revision: int = 0
    outage: bool = False
    severed: bool = False
    latency_s: float = 0.0
    error_rate: float = 0.0
    timeout_s: float = 0.0
    timeout_rate: float = 1.0
    skew_ms: int = 0
    fail: dict[str, int] = attrs.field(factory=dict)
    lose_responses: dict[str, int] = attrs.field(factory=dict)
    sink_outage: bool = False
    sink_unnamed_outage: bool = False
    sink_latency_s: float = 0.0
    sink_fail: dict[str, int] = attrs.field(factory=dict)

    @classmethod
    def parse(cls, raw: bytes) -> "ChaosSpec":
        """Raises InvalidChaosSpec naming what is wrong."""
        try:
            doc = json.loads(raw)
        except ValueError as exc:
            raise InvalidChaosSpec(f"not JSON: {exc}") from exc
        if not isinstance(doc, dict):
            raise InvalidChaosSpec("expected a JSON object")
        unknown = sorted(set(doc) - _KEYS)
        if unknown:
            raise InvalidChaosSpec(f"unknown keys {unknown}; allowed: {sorted(_KEYS)}")
        return cls(
            revision=_number(doc, "revision", int, 0),
            outage=_flag(doc, "outage"),
            severed=_flag(doc, "severed"),
            latency_s=_number(doc, "latency_s", float, 0.0),
            error_rate=min(1.0, _number(doc, "error_rate", float, 0.0)),
            timeout_s=_number(doc, "timeout_s", float, 0.0),
            timeout_rate=min(1.0, _number(doc, "timeout_rate", float, 1.0)),
            skew_ms=_number(doc, "skew_ms", int, 0, signed=True),
            fail=_plans(doc, "fail"),
            lose_responses=_plans(doc, "lose_responses"),
            sink_outage=_flag(doc, "sink_outage"),
            sink_unnamed_outage=_flag(doc, "sink_unnamed_outage"),
            sink_latency_s=_number(doc, "sink_latency_s", float, 0.0),
            sink_fail=_plans(doc, "sink_fail", SINK_FAULTS.keys(), "sink failure modes"),
        )


def _flag(doc: dict[str, Any], key: str) -> bool:
    value = doc.get(key, False)
    if not isinstance(value, bool):
        raise InvalidChaosSpec(f"{key} must be true or false")
    return value


def _number(doc: dict[str, Any], key: str, kind: type, default: Any, signed: bool = False) -> Any:
    value = doc.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidChaosSpec(f"{key} must be a number")
    if kind is int and value != int(value):
        raise InvalidChaosSpec(f"{key} must be an integer")
    if not signed and value < 0:
        raise InvalidChaosSpec(f"{key} must not be negative")
    return kind(value)


def _plans(
    doc: dict[str, Any],
    key: str,
    allowed: Collection[str] = OPERATIONS,
    what: str = "store operations",
) -> dict[str, int]:
    value = doc.get(key, {})
    if not isinstance(value, dict):
        raise InvalidChaosSpec(f"{key} must map {what} to counts")
    for op, count in value.items():
        if op not in allowed:
            raise InvalidChaosSpec(f"{key}: unknown {what[:-1]} {op!r}; allowed: {sorted(allowed)}")
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise InvalidChaosSpec(f"{key}.{op} must be a count >= 0")
    return dict(value)


_Version = tuple[int, int, int]  # inode, size, mtime: a renamed-in file is a new version
_ABSENT: _Version = (0, 0, 0)
_GONE = b"\0gone"  # never valid JSON, so never a real file's content


class ChaosControl:
    def __init__(
        self,
        path: Path,
        store: FaultInjectingStore,
        clock: SkewedClock,
        interval_s: float = 0.1,
        sink: FaultInjectingSink | None = None,
    ) -> None:
        self._path = path
        self._store = store
        self._sink = sink
        self._clock = clock
        self._interval_s = interval_s
        self._seen: _Version | None = None
        self.applied = ChaosSpec()

    async def run(self) -> None:
        """Poll until cancelled."""
        while True:
            await self.poll()
            await self._clock.sleep(self._interval_s)

    async def poll(self) -> None:
        """Read the file if it changed and apply it; a bad file is logged and skipped."""
        try:
            changed = await asyncio.to_thread(self._read_if_changed)
        except OSError as exc:
            log.warning("chaos control file unreadable: %s", exc)
            return
        if changed is None:
            return
        if changed is _GONE:
            self.apply(ChaosSpec(revision=self.applied.revision))
            return
        try:
            spec = ChaosSpec.parse(changed)
        except InvalidChaosSpec as exc:
            log.warning("chaos control file %s ignored: %s", self._path, exc)
            return
        self.apply(spec)

    def _read_if_changed(self) -> bytes | None:
        """The file's bytes if it changed since the last look, `_GONE` once it disappeared,
        None if nothing changed."""
        try:
            st = os.stat(self._path)
        except FileNotFoundError:
            gone, self._seen = self._seen not in (None, _ABSENT), _ABSENT
            return _GONE if gone else None
        version = (st.st_ino, st.st_size, st.st_mtime_ns)
        if version == self._seen:
            return None
        self._seen = version
        return self._path.read_bytes()

    def apply(self, spec: ChaosSpec) -> None:
        store, previous = self._store, self.applied
        store.outage = spec.outage
        store.severed = spec.severed
        store.latency_s = spec.latency_s
        store.error_rate = spec.error_rate
        store.timeout_s = spec.timeout_s
        store.timeout_rate = spec.timeout_rate
        self._clock.skew_ms = spec.skew_ms
        sink = self._sink
        if sink is not None:
            sink.outage = spec.sink_outage
            sink.unnamed_outage = spec.sink_unnamed_outage
            sink.latency_s = spec.sink_latency_s
        if spec.revision > previous.revision:
            store.clear_plans()
            for op, count in spec.fail.items():
                store.fail_next(op, count)
            for op, count in spec.lose_responses.items():
                store.fail_next(op, count, applied=True)
            if sink is not None:
                sink.clear_plans()
                for mode, count in spec.sink_fail.items():
                    sink.fail_next(count, SINK_FAULTS[mode])
        self.applied = spec
        log.warning(
            "chaos faults applied",
            extra={"chaos_revision": spec.revision, "chaos": attrs.asdict(spec)},
        )
