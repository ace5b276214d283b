"""The demo's script: simulator, API and workers up; START every connection through the API;
SIGKILL the busiest worker (as a supervisor would, the demo reaps it and ends its session at
once, so its connections move without waiting out the lease, then starts a replacement, which
receives its share of the fleet's connections by graceful handoffs); SIGTERM the next
busiest (its replacement started first, as in a rolling deploy); end every stream; judge.

Every wait has a deadline (a phase that overruns raises TimeoutError, naming what it waited
for), and every process is ended by the caller's `Processes.close`, whatever happens here.
"""

import asyncio
import signal
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import Any

from application.deaths import WorkerDeaths
from application.worker.session_keeper import worker_of
from entrypoints.containers import provide
from entrypoints.demo import backends
from entrypoints.demo.judge import (
    Move,
    Summary,
    judge_connection,
    rebalances,
    takeovers,
    violations,
)
from entrypoints.demo.monitor import Monitor, Snapshot
from entrypoints.demo.options import DemoError, DemoOptions
from entrypoints.demo.view import Reporter
from entrypoints.devstack import http
from entrypoints.devstack.process import Process, ProcessError, Processes
from entrypoints.devstack.records import wall_ms as now_ms

READY_S = 30.0  # for a process to print that it listens (imports take a second or two)
PARALLEL_REQUESTS = 8
WORKER_READY = r'"worker starting"|worker \S+ running'


class Scenario:
    def __init__(
        self,
        options: DemoOptions,
        env: dict[str, str],
        children: Processes,
        reporter: Reporter,
        run_dir: Path,
    ) -> None:
        self.options = options
        self.env = env
        self.children = children
        self.reporter = reporter
        self.run_dir = run_dir
        self.ids = [f"demo-{i:02d}" for i in range(1, options.connections + 1)]
        self.workers: list[Process] = []
        self.sim_http = ""

    async def run(self) -> Summary:
        opts, children = self.options, self.children
        self.reporter.phase(
            f"starting: {opts.backend} backend, simulator, API, {opts.workers} workers"
        )
        async with backends.prepare(opts, children, self.run_dir, self.env) as probe:
            self.reporter.event(f"state in {probe.where}")
            sim = await children.spawn(
                "simulator",
                ["simulate-upstream", "--port", "0", "--rate", str(opts.rate)],
                self.env,
            )
            sim_ws = (await sim.wait_for_line(r"listening on (ws://\S+)", READY_S))[1]
            self.sim_http = "http://" + sim_ws.removeprefix("ws://")
            api = await children.spawn("api", ["api", "--port", "0"], self.env)
            api_url = (await api.wait_for_line(r"listening on (http://\S+)", READY_S))[1]
            self.reporter.event(f"simulator {sim_ws}, API {api_url}")
            for _ in range(opts.workers):
                await self._start_worker()
            for worker in self.workers:  # all polling before the STARTs: they share them
                await worker.wait_for_line(WORKER_READY, READY_S)
            monitor = Monitor(
                probe,
                f"{self.sim_http}/records",
                self.ids,
                lambda: self.workers,
                self.reporter.update,
            )
            watching = asyncio.create_task(monitor.run(), name="demo-monitor")
            try:
                return await self._script(monitor, probe, api_url, sim_ws)
            finally:
                watching.cancel()
                await asyncio.gather(watching, return_exceptions=True)

    async def _script(
        self, monitor: Monitor, probe: backends.Probe, api_url: str, sim_ws: str
    ) -> Summary:
        opts = self.options
        self.reporter.phase(f"START {len(self.ids)} connections through the API")
        await self._start_connections(api_url, sim_ws)
        snapshot = await self._settle(monitor, "every connection has one owner and one subscriber")
        self.reporter.event("owners: " + _load_text(snapshot))
        await self._steady()

        self.reporter.phase("crash: SIGKILL the busiest worker")
        crash = await self._crash(monitor, probe)
        await self._settle(monitor, "every connection of the crashed worker is taken over")
        self.reporter.event("owners: " + _load_text(monitor.latest))

        self.reporter.phase("balance: the replacement worker receives its share")
        began = now_ms()
        snapshot = await monitor.wait_until(
            self._balanced,
            opts.recovery_timeout_s,
            "every worker within 10 % (or one connection) of the mean",
        )
        self.reporter.event(
            f"balanced {(now_ms() - began) / 1000:.1f}s after the takeover: " + _load_text(snapshot)
        )
        await self._steady()

        self.reporter.phase("graceful handoff: SIGTERM the next busiest worker")
        handoff = await self._handoff(monitor)
        await self._settle(monitor, "every connection of the stopped worker is taken")
        self.reporter.event("owners: " + _load_text(monitor.latest))
        await self._steady()

        self.reporter.phase("ending every stream (the upstream closes them normally)")
        for cid in self.ids:
            await self._expect(http.call("POST", f"{self.sim_http}/streams/{cid}/end"), 200)
        await monitor.wait_until(
            lambda s: all(_ended(s, cid) for cid in self.ids),
            opts.recovery_timeout_s,
            "every stream ended and every lease was released",
        )
        self.reporter.event("every stream ended; judging from the simulator's records and the sink")
        return await self._judge(probe, [crash, handoff])

    async def _start_worker(self) -> Process:
        name = f"w{len(self.workers) + 1}"
        child = await self.children.spawn(name, ["worker", "--name", name], self.env)
        self.workers.append(child)
        self.reporter.event(f"started worker {name} (pid {child.pid})")
        return child

    async def _start_connections(self, api_url: str, sim_ws: str) -> None:
        limit = asyncio.Semaphore(PARALLEL_REQUESTS)

        async def start(cid: str) -> None:
            async with limit:
                # The meeting exists before anyone streams it: seq 1 is due from now on.
                await self._expect(http.call("POST", f"{self.sim_http}/streams/{cid}"), 201)
                body = {
                    "event_type": "START",
                    "connection_id": cid,
                    "ws_url": f"{sim_ws}/stream/{cid}",
                }
                await self._expect(http.call("POST", f"{api_url}/events", body), 202)

        await asyncio.gather(*(start(cid) for cid in self.ids))
        self.reporter.event(f"{len(self.ids)} STARTs accepted (202)")

    async def _crash(self, monitor: Monitor, probe: backends.Probe) -> Move:
        victim, owned = await self._busiest(monitor, exclude=())
        worker_ids = {
            worker_of(c.owner)
            for cid, c in (monitor.latest.connections.items() if monitor.latest else ())
            if cid in owned
        }
        signal_at = now_ms()
        self.children.send(victim, signal.SIGKILL)
        self.reporter.event(
            f"SIGKILL {victim.name} (pid {victim.pid}) holding {len(owned)} connections"
        )
        code = await victim.exit_code(10)
        # As the supervisor that reaped it would (`wsfleet fleet` and `wsfleet
        # end-session` do the same): the death is certain, so its session ends now and its
        # connections are hinted, instead of waiting for the lease to run out.
        deaths: WorkerDeaths = await provide(probe.container.core.deaths)
        for worker_id in sorted(worker_ids):
            await deaths.worker_died(worker_id, f"the demo reaped {victim.name}")
        self.reporter.event(
            f"{victim.name} reaped {(now_ms() - signal_at) / 1000:.2f}s after the SIGKILL: "
            "its session ended, its connections hinted"
        )
        replacement = await self._start_worker()  # the supervisor replaces it
        return Move("crash", victim.name, signal_at, tuple(owned), code, replacement.name)

    async def _handoff(self, monitor: Monitor) -> Move:
        replacement = await self._start_worker()  # a rolling deploy starts the new one first
        try:
            await replacement.wait_for_line(WORKER_READY, READY_S)
        except ProcessError as exc:
            raise DemoError(f"the replacement worker did not start: {exc}") from exc
        target, owned = await self._busiest(monitor, exclude=(replacement,))
        signal_at = now_ms()
        self.children.send(target, signal.SIGTERM)
        self.reporter.event(
            f"SIGTERM {target.name} (pid {target.pid}) holding {len(owned)} connections"
        )
        code = await target.exit_code(20)
        self.reporter.event(f"{target.name} exited with code {code}")
        return Move("handoff", target.name, signal_at, tuple(owned), code)

    async def _busiest(
        self, monitor: Monitor, exclude: Sequence[Process]
    ) -> tuple[Process, list[str]]:
        snapshot = await monitor.refresh()
        load = snapshot.load()
        candidates = [
            w for w in self.workers if w.running and w.signalled is None and w not in exclude
        ]
        if not candidates:
            raise DemoError("no running worker left to stop")
        chosen = max(candidates, key=lambda w: load.get(w.name, 0))
        owned = [cid for cid in self.ids if snapshot.held_by(cid) == chosen.name]
        return chosen, owned

    async def _settle(self, monitor: Monitor, what: str) -> Snapshot:
        return await monitor.wait_until(
            lambda s: all(
                s.held_by(cid) in self._live_names() and s.subscribers(cid) == 1 for cid in self.ids
            ),
            self.options.recovery_timeout_s,
            what,
        )

    def _balanced(self, snapshot: Snapshot) -> bool:
        """Every connection streamed once, by a live worker, each worker within its band."""
        live = self._live_names()
        if not all(
            snapshot.held_by(cid) in live and snapshot.subscribers(cid) == 1 for cid in self.ids
        ):
            return False
        load = snapshot.load()
        mean = len(self.ids) / max(1, len(live))
        return all(abs(load.get(name, 0) - mean) <= max(1.0, mean / 10) for name in live)

    def _live_names(self) -> set[str]:
        return {w.name for w in self.workers if w.running and w.signalled is None}

    async def _steady(self) -> None:
        await asyncio.sleep(self.options.steady_s)

    async def _judge(self, probe: backends.Probe, moves: list[Move]) -> Summary:
        status, body = await http.call("GET", f"{self.sim_http}/records")
        if status != 200 or not isinstance(body, dict):
            raise DemoError(f"the simulator's records: {status} {body!r}")
        streams = body["streams"]
        final = {c.connection_id: c for c in await probe.store.list_connections(limit=10_000)}
        rewrites = await probe.rewrites()
        results = [
            judge_connection(
                cid,
                streams.get(cid),
                final.get(cid),
                await probe.seqs(cid),
                None if rewrites is None else rewrites.get(cid, 0),
            )
            for cid in self.ids
        ]
        histories = {cid: await probe.store.history(cid) for cid in self.ids}
        judged_moves = [(m, takeovers(m, streams, histories)) for m in moves]
        copies = probe.sink_keeps_copies
        return Summary(
            probe.name,
            results,
            judged_moves,
            violations(results, judged_moves, sink_keeps_copies=copies),
            rebalances(streams, histories),
            sink=probe.sink,
            sink_keeps_copies=copies,
        )

    async def _expect(self, request: Awaitable[tuple[int, Any]], status: int) -> None:
        got, body = await request
        if got != status:
            raise DemoError(f"expected HTTP {status}, got {got}: {body!r}")


def _ended(snapshot: Snapshot, cid: str) -> bool:
    conn = snapshot.connections.get(cid)
    return conn is not None and conn.desired_state.value == "STOPPED" and conn.owner == ""


def _load_text(snapshot: Snapshot | None) -> str:
    if snapshot is None:
        return "-"
    load = snapshot.load()
    return ", ".join(f"{name} {count}" for name, count in sorted(load.items())) or "none"
