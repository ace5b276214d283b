"""ChaosRun: one deployment under fire. It starts the upstream simulator (the judge) and a
backend as processes, worker processes with the scaled timings, issues START/STOP through the
EventRouter, injects faults (signals, the chaos control file of each worker) and measures how
long every STARTED connection took to have exactly one active subscriber again.

Everything is timed on the wall clock in epoch milliseconds, as the simulator's records and
the store's history are, so the three can be laid side by side. Violations are collected (not
raised at once), each with the evidence needed to understand it; `tests/chaos/judge.py` adds
the after-the-fact checks over the whole run.
"""

import asyncio
import json
import random
import signal
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from application.worker.session_keeper import worker_of
from domain import DesiredState, LeaseReleased, LeaseTakenOver
from entrypoints.devstack.records import moves_per_fault, wall_ms
from entrypoints.devstack.simulator import SimulatorProcess
from entrypoints.devstack.workers import WorkerProcess
from tests.chaos.backends import BALANCE_ON, CONFIG, Backend, timing_env
from tests.chaos.sockets import SocketOwners

LEASE_S = CONFIG.lease_ms / 1000
HEARTBEAT_S = CONFIG.heartbeat_interval_s
TRUSTED_S = CONFIG.trusted_s
# Recovery bounds, from the fault (or its end) to every STARTED connection having exactly one
# active subscriber. Crash and freeze: the lease runs out (at most lease after the last renew),
# reconciliation wakes when it does, plus one heartbeat; the slack absorbs six processes
# sharing two cores. Handoff and STOP carry the targets plus the same slack.
SLACK_S = 1.5
CRASH_BOUND_S = LEASE_S + HEARTBEAT_S + SLACK_S
HANDOFF_BOUND_S = 1.0 + SLACK_S
STOP_BOUND_S = CONFIG.desired_state_interval_s + 0.5 + SLACK_S
PICKUP_BOUND_S = 0.5 + SLACK_S + 1.0  # START -> subscriber (workers may be busy booting)
# A frozen worker resumed must close its stale subscribers before its next heartbeat.
THAW_CLOSE_BOUND_S = HEARTBEAT_S
now_ms = wall_ms  # epoch ms, the simulator's and the store's clock
CLOCK_TOLERANCE_MS = 300  # worker and simulator stamp the same instant a little apart


@attrs.define
class WorkerHandle:
    name: str
    child: WorkerProcess
    control: Path
    worker_id: str = ""
    revision: int = 0
    frozen_at_ms: int | None = None
    max_skew_ms: int = 0
    gone: bool = False  # killed or terminated by the harness

    @property
    def serving(self) -> bool:
        return not self.gone and self.frozen_at_ms is None and self.child.running


@attrs.frozen
class Mark:
    at_ms: int
    what: str
    detail: str = ""


@attrs.frozen
class Freeze:
    worker: str
    stopped_ms: int
    continued_ms: int


# The marks that end a fault's window for counting moves (`ChaosRun.moves`).
WINDOW_ENDS = frozenset({"SIGKILL", "SIGTERM", "SIGSTOP", "faults set"})


@attrs.define
class Stats:
    faults: dict[str, int] = attrs.Factory(dict)
    recoveries: dict[str, list[float]] = attrs.Factory(dict)
    checks: int = 0
    duplicates: int = 0  # copies a stream sink holds (its reader drops them)
    # Seqs the upstream sent again to a stream sink's new owner, past the checkpoint it
    # resumed from: what the copies are bounded by.
    replayed: int = 0
    # Per SIGKILL / SIGTERM: connections held, moved more than once, most moves of one.
    moves: dict[str, dict[str, int]] = attrs.Factory(dict)

    def fault(self, kind: str) -> None:
        self.faults[kind] = self.faults.get(kind, 0) + 1

    def recovered(self, kind: str, seconds: float) -> None:
        self.recoveries.setdefault(kind, []).append(seconds)


class ChaosRun:
    def __init__(
        self,
        backend: Backend,
        run_dir: Path,
        *,
        rate: float,
        seed: int,
        balance: bool = True,
        balance_by: str = CONFIG.balance_by,
        hot: Mapping[str, float] | None = None,
    ) -> None:
        self.backend = backend
        self.run_dir = run_dir
        self.rate = rate
        # Connections that stream at a rate of their own (connection id -> messages a second).
        self.hot = dict(hot or {})
        # WSFLEET_BALANCE and WSFLEET_BALANCE_BY of every worker
        self.balance = balance and backend.name in BALANCE_ON
        self.balance_by = balance_by
        self.rng = random.Random(seed)
        self.seed = seed
        self.workers: dict[str, WorkerHandle] = {}
        self.wanted: dict[str, DesiredState] = {}
        self.start_times: dict[str, list[int]] = {}  # accepted STARTs (first and restarts)
        self.stop_times: dict[str, list[int]] = {}  # accepted STOPs
        self.timeline: list[Mark] = []
        self.freezes: list[Freeze] = []
        # The faults that ended a worker, with what it held (`moves`).
        self.endings: list[dict[str, Any]] = []
        self.violations: list[str] = []
        # Connections named by a coverage violation: the evidence prints their histories.
        self.suspects: set[str] = set()
        self.notes: list[str] = []  # worth a reader's attention, not a broken promise
        self.stats = Stats()
        self.sim_port = 0
        self._sim: SimulatorProcess | None = None
        self.owners: SocketOwners | None = None
        self._count = 0

    # -- lifecycle ----------------------------------------------------------------------------

    async def open(self) -> None:
        self._sim = await SimulatorProcess(self.run_dir, rate=self.rate).start()
        self.sim_port = self._sim.port
        self.owners = SocketOwners(self.sim_port)
        self.owners.start()
        await self.backend.open(self.run_dir)
        self.mark("deployment open", f"{self.backend.name}, seed {self.seed}")

    async def close(self) -> None:
        for handle in self.workers.values():
            if handle.frozen_at_ms is not None:
                handle.child.signal(signal.SIGCONT)
            await handle.child.kill()
        if self.owners is not None:
            self.owners.stop()
        await self.backend.close()
        if self._sim is not None:
            await self._sim.child.kill()

    def mark(self, what: str, detail: str = "") -> int:
        at = now_ms()
        self.timeline.append(Mark(at, what, detail))
        return at

    def violation(self, text: str, problems: Sequence[str] = ()) -> None:
        """Record a broken promise; `problems` (coverage problems, each naming its connection
        first) make their connections suspects."""
        self.violations.append(f"[{now_ms()}] {text}")
        self.suspects.update(p.split()[0] for p in problems)

    # -- workers ------------------------------------------------------------------------------

    async def add_worker(self) -> WorkerHandle:
        self._count += 1
        name = f"w{self._count}"
        control = self.run_dir / f"{name}.chaos.json"
        env = {
            **self.backend.environment(),
            **timing_env(self.backend.config),
            "WSFLEET_BALANCE": str(self.balance).lower(),
            "WSFLEET_BALANCE_BY": self.balance_by,
            "WSFLEET_CHAOS_CONTROL": str(control),
            "WSFLEET_SERVICE_NAME": "chaos",
        }
        child = await WorkerProcess(name, self.run_dir, env, self.backend.worker_argv(name)).start()
        assert self.owners is not None
        self.owners.watch(child.pid, name)
        handle = WorkerHandle(name, child, control)
        self.workers[name] = handle
        await self._wait_ready(handle)
        self.mark("worker started", f"{name} = {handle.worker_id} (pid {child.pid})")
        return handle

    async def add_workers(self, n: int) -> list[WorkerHandle]:
        return list(await asyncio.gather(*(self.add_worker() for _ in range(n))))

    async def _wait_ready(self, handle: WorkerHandle, timeout_s: float = 30.0) -> None:
        status = await handle.child.wait_healthy(timeout_s, path="/status")
        handle.worker_id = status["worker_id"]

    def serving(self) -> list[WorkerHandle]:
        return [w for w in self.workers.values() if w.serving]

    def by_worker_id(self) -> dict[str, str]:
        return {w.worker_id: w.name for w in self.workers.values()}

    async def kill(self, handle: WorkerHandle) -> int:
        held = await self.owned_by(handle)
        at = self.mark("SIGKILL", handle.name)
        handle.gone = True
        handle.child.signal(signal.SIGKILL)
        self.endings.append({"kind": "SIGKILL", "at_ms": at, "connections": sorted(held)})
        await handle.child.wait(10)
        return at

    async def term(self, handle: WorkerHandle) -> int:
        """SIGTERM, without waiting (a worker hands over long before it exits: its last long
        poll may still be running). Returns when it was sent."""
        held = await self.owned_by(handle)
        at = self.mark("SIGTERM", handle.name)
        handle.gone = True
        handle.child.signal(signal.SIGTERM)
        self.endings.append({"kind": "SIGTERM", "at_ms": at, "connections": sorted(held)})
        return at

    async def moves(self, faults: int) -> dict[str, dict[str, int]]:
        """Of the first `faults` SIGKILLs and SIGTERMs (the schedule's, not the final stop's):
        the connections the worker held, and how many of them moved more than once before the
        next fault (a crash's window includes its replacement's start: a share it takes by
        balancing counts as a second move)."""
        records = await self.records()
        # Each window ends at the next fault of any kind: a freeze or a store fault moves
        # connections of its own.
        bounds = sorted(m.at_ms for m in self.timeline if m.what in WINDOW_ENDS)
        counted = [
            {**f, "moves_until_ms": next((at for at in bounds if at > f["at_ms"]), now_ms())}
            for f in self.endings[:faults]
        ]
        return moves_per_fault(counted, records, now_ms(), ("SIGKILL", "SIGTERM"))

    async def exited(self, handle: WorkerHandle) -> int:
        code = await handle.child.wait(CONFIG.shutdown_budget_s + 10)
        self.mark("exited", f"{handle.name} with {code}")
        return code

    async def terminate(self, handle: WorkerHandle) -> tuple[int, int]:
        """SIGTERM and wait: (time sent, exit code)."""
        at = await self.term(handle)
        return at, await self.exited(handle)

    def freeze(self, handle: WorkerHandle) -> int:
        handle.child.signal(signal.SIGSTOP)
        handle.frozen_at_ms = self.mark("SIGSTOP", handle.name)
        return handle.frozen_at_ms

    def thaw(self, handle: WorkerHandle) -> int:
        handle.child.signal(signal.SIGCONT)
        at = self.mark("SIGCONT", handle.name)
        assert handle.frozen_at_ms is not None
        self.freezes.append(Freeze(handle.name, handle.frozen_at_ms, at))
        handle.frozen_at_ms = None
        return at

    async def set_faults(self, handle: WorkerHandle, **spec: Any) -> None:
        """Write the worker's control file (atomically) and wait until it says it applied it.
        No keyword: every fault cleared."""
        handle.revision += 1
        document = {"revision": handle.revision, **spec}
        tmp = handle.control.with_suffix(".tmp")
        tmp.write_text(json.dumps(document))
        tmp.replace(handle.control)
        handle.max_skew_ms = max(handle.max_skew_ms, abs(int(spec.get("skew_ms", 0))))
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            for line in reversed(await handle.child.log_lines()):
                if line.get("chaos_revision") == handle.revision:
                    self.mark("faults set", f"{handle.name}: {spec or 'none'}")
                    return
            await asyncio.sleep(0.05)
        raise AssertionError(f"{handle.name} did not apply {document}\n{handle.child.tail()}")

    # -- connections --------------------------------------------------------------------------

    def url(self, connection_id: str) -> str:
        assert self._sim is not None
        return self._sim.url(connection_id)

    async def start(self, connection_id: str) -> bool:
        if connection_id not in self.wanted:
            assert self._sim is not None
            await self._sim.create(connection_id, self.hot.get(connection_id))
        began = now_ms()
        outcome = await self.backend.router.start(connection_id, self.url(connection_id))
        self.wanted[connection_id] = DesiredState.STARTED
        self.mark("START", f"{connection_id} ({'accepted' if outcome.changed else 'unchanged'})")
        if outcome.changed:
            self.start_times.setdefault(connection_id, []).append(began)
        return outcome.changed

    async def stop(self, connection_id: str) -> bool:
        began = now_ms()
        outcome = await self.backend.router.stop(connection_id)
        self.mark("STOP", f"{connection_id} ({'accepted' if outcome.changed else 'unchanged'})")
        if outcome.changed:
            self.stop_times.setdefault(connection_id, []).append(began)
        self.wanted[connection_id] = DesiredState.STOPPED
        return outcome.changed

    def rate_of(self, connection_id: str) -> float:
        """Messages a second the simulator streams on this connection."""
        return self.hot.get(connection_id, self.rate)

    def started(self) -> list[str]:
        return sorted(c for c, s in self.wanted.items() if s is DesiredState.STARTED)

    async def owned_by(self, handle: WorkerHandle) -> dict[str, int]:
        """connection id -> token, for every STARTED connection the store says `handle` holds."""
        held = {}
        for cid in self.started():
            conn = await self.backend.router.get(cid)
            if conn is not None and worker_of(conn.owner) == handle.worker_id:
                held[cid] = conn.token
        return held

    # -- observation --------------------------------------------------------------------------

    async def records(self) -> dict[str, dict[str, Any]]:
        assert self._sim is not None
        return await self._sim.records()

    def owner_of(self, connection: dict[str, Any]) -> str | None:
        assert self.owners is not None
        return self.owners.owner_of(
            connection["remote"], connection["connected_at_ms"], connection["disconnected_at_ms"]
        )

    def frozen_names(self) -> set[str]:
        return {w.name for w in self.workers.values() if w.frozen_at_ms is not None}

    def coverage_problems(self, records: dict[str, dict[str, Any]]) -> list[str]:
        """Every STARTED connection: exactly one active subscriber (one whose process is not
        frozen, nor told to go: a worker handing over still streams until it has released,
        and the handoff is done only when someone else streams); every STOPPED one: none."""
        frozen = self.frozen_names() | {w.name for w in self.workers.values() if w.gone}
        problems = []
        for cid, state in sorted(self.wanted.items()):
            live = [
                c
                for c in records.get(cid, {}).get("connections", [])
                if c["disconnected_at_ms"] is None
            ]
            active = [c for c in live if self.owner_of(c) not in frozen]
            want = 1 if state is DesiredState.STARTED else 0
            if len(active) != want:
                owners = [self.owner_of(c) or "?" for c in active]
                problems.append(f"{cid} ({state.value}): {len(active)} active subscribers {owners}")
        return problems

    async def wait_covered(self, kind: str, since_ms: int, bound_s: float) -> float:
        """Wait until coverage holds; record the recovery (seconds since `since_ms`) under
        `kind`, and a violation if it took longer than `bound_s`. Gives up at 4x the bound."""
        self.stats.checks += 1
        limit_ms = since_ms + int(bound_s * 4000)
        problems: list[str] = []
        seen: list[str] = []  # what kept it from being covered, for the report
        while True:
            records = await self.records()
            problems = self.coverage_problems(records)
            at = now_ms()
            if not problems:
                # When it healed, by the simulator's own clock: the last connect or disconnect
                # of a wanted connection. The sample's time also counts the poll's 0.1 s and
                # the records' round trip (a loaded clean clone reported 4.13 s against a 4 s
                # crash bound with no problem seen in any sample after the bound).
                healed_ms = min(at, max(since_ms, self._last_change_ms(records)))
                seconds = max(0.0, (healed_ms - since_ms) / 1000)
                self.stats.recovered(kind, seconds)
                if seconds > bound_s:
                    self.violation(
                        f"{kind}: recovered after {seconds:.2f}s > bound {bound_s}s; "
                        f"meanwhile: {sorted(set(seen))}",
                        seen,
                    )
                return seconds
            if at - since_ms > bound_s * 1000:
                seen += problems
            if at > limit_ms:
                self.violation(
                    f"{kind}: not recovered after {(at - since_ms) / 1000:.1f}s:", problems
                )
                self.violations.extend(f"    {p}" for p in problems)
                raise ChaosAbort(f"{kind} never recovered")
            await asyncio.sleep(0.1)

    def _last_change_ms(self, records: dict[str, dict[str, Any]]) -> int:
        """The latest subscribe or unsubscribe of any wanted connection (0 if none)."""
        return max(
            (
                at
                for cid in self.wanted
                for c in records.get(cid, {}).get("connections", [])
                for at in (c["connected_at_ms"], c["disconnected_at_ms"])
                if at is not None
            ),
            default=0,
        )

    async def hold_covered(self, kind: str, seconds: float, *, required: bool = False) -> bool:
        """Watch coverage for `seconds` (sampled); False if it was lost at some point, which
        is a violation when `required` (faults that must cost no ownership at all). A gap
        that is a balancing handoff (issue 14: a graceful release, no takeover, healed within
        the handoff bound) is no loss of ownership: it is counted, not held against the fault."""
        self.stats.checks += 1
        began = now_ms()
        end = time.monotonic() + seconds
        held = True
        while time.monotonic() < end:
            problems = self.coverage_problems(await self.records())
            if problems and await self.balancing(problems, began):
                continue
            if problems and held and required:
                self.violation(f"{kind}: coverage lost: {problems}", problems)
            held = held and not problems
            await asyncio.sleep(0.1)
        return held

    async def balancing(self, problems: list[str], since_ms: int) -> bool:
        """The connections without a subscriber are being handed off gracefully (released by
        their owner since `since_ms`, never taken over), and each has one again within the
        handoff bound: recorded as a balancing handoff."""
        cids = sorted({p.split()[0] for p in problems})
        gap_began = now_ms()
        # Healed first: the old owner closes its stream before it releases.
        while self.coverage_problems(await self.records()):
            if now_ms() - gap_began > HANDOFF_BOUND_S * 1000:
                return False
            await asyncio.sleep(0.05)
        if not await self.moved_gracefully(cids, since_ms):
            return False
        self.stats.fault("balancing handoff")
        self.stats.recovered("balancing handoff", (now_ms() - gap_began) / 1000)
        return True

    async def moved_gracefully(self, cids: list[str], since_ms: int) -> bool:
        """Each of `cids` released by its owner since `since_ms`, and not taken over after
        that release. The release is stamped by its worker's clock, which may be skewed (the
        clock-skew window's giver is often the skewed worker itself): "since" allows for
        that, and "after" is judged by the history's order, not by time."""
        earliest = since_ms - self.clock_tolerance_ms()
        for cid in cids:
            if self.wanted.get(cid) is not DesiredState.STARTED:
                return False
            history = await self.backend.router.history(cid)
            released = [i for i, e in enumerate(history) if isinstance(e, LeaseReleased)]
            if not released or history[released[-1]].at_ms < earliest:
                return False
            if any(isinstance(e, LeaseTakenOver) for e in history[released[-1] :]):
                return False
        return True

    def clock_tolerance_ms(self) -> int:
        """How far apart two clocks of this run may stamp one instant: a little, plus the
        largest skew injected into any worker."""
        return CLOCK_TOLERANCE_MS + max([w.max_skew_ms for w in self.workers.values()] + [0])


class ChaosAbort(Exception):
    """The run cannot go on (the fleet never recovered): judge what happened so far."""
