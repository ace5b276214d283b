"""`/metrics` on a real `wsfleet worker` process (embedded backend): scraped while it streams,
then again after the faults that move the rest — a dead upstream, a failed renew, a store
outage long enough to self-fence (and so a takeover of its own expired lease), a STOP."""

import asyncio
import json
import os
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from adapters.prometheus import prometheus_name
from application.ports import metrics as names
from application.ports.metrics import CATALOGUE, Kind
from entrypoints.devstack.service import free_port
from entrypoints.simulator import UpstreamSimulator
from tests.e2e.cli_process import cli_process, run_cli
from tests.support.simulator import simulator

__all__ = ["simulator"]

ENV = {
    "WSFLEET_LEASE_MS": "2000",
    "WSFLEET_HEARTBEAT_INTERVAL_S": "0.4",
    "WSFLEET_SELF_FENCE_MARGIN_MS": "600",
    "WSFLEET_DESIRED_STATE_INTERVAL_S": "0.5",
    "WSFLEET_RECONCILE_INTERVAL_S": "1",
    "WSFLEET_POLL_WAIT_S": "1",
    "WSFLEET_SHUTDOWN_BUDGET_S": "3",
    "WSFLEET_METRICS_INTERVAL_S": "0.5",
    "WSFLEET_INGEST_FLUSH_INTERVAL_S": "0.05",
    "WSFLEET_RECONNECT_BASE_S": "0.05",
    "WSFLEET_RECONNECT_ATTEMPTS": "3",
    "WSFLEET_ALLOW_PRIVATE_UPSTREAMS": "true",
}

# What the scenario moves. The rest are exported (checked below) but need what one worker on
# one host cannot do here: a rival worker (AcquisitionConflicts, LeasesLost), a failing sink
# (SinkErrors), a malformed hint, an upstream that skips seqs, an upstream message rejected
# (MessagesRejected), and HandoffLatencyMs, recorded only during a graceful shutdown
# (tests/unit/test_worker_metrics.py).
MOVED = {
    names.ACTIVE_CONNECTIONS,
    names.LEASE_ACQUISITIONS,
    names.LEASE_RELEASES,
    names.TAKEOVERS,
    names.RENEW_LATENCY_MS,
    names.MESSAGES_RECEIVED,
    names.MESSAGES_INGESTED,
    names.INGEST_LAG_MS,
    names.STORE_ERRORS,
    names.UPSTREAM_RECONNECTS,
    names.UPSTREAM_GIVE_UPS,
    names.SELF_FENCES,
    names.LOOP_LAG_MS,
}


def page(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return str(response.read().decode())


def scrape(port: int) -> dict[str, float]:
    """Sample name (`_count` for histograms) -> value, plus the build info's labels."""
    text = page(port)
    samples: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "wsfleet_build_info":
                assert sample.labels["version"]
                assert sample.labels["backend"] == "embedded"
                samples[sample.name] = sample.value
            elif not sample.labels:
                samples[sample.name] = sample.value
    return samples


def series(spec_name: str) -> str:
    spec = next(s for s in CATALOGUE if s.name == spec_name)
    name = prometheus_name(spec)
    return name.removesuffix("_seconds") + "_seconds_count" if spec.kind is Kind.TIMING else name


def faults(control: Path, revision: int, **wanted: object) -> None:
    part = control.with_suffix(".part")
    part.write_text(json.dumps({"revision": revision, **wanted}))
    os.replace(part, control)


async def until(predicate: object, what: str, timeout_s: float = 20.0) -> None:
    assert callable(predicate)
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not await asyncio.to_thread(predicate):
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting: {what}"
        await asyncio.sleep(0.1)


async def test_a_streaming_workers_metrics_are_scraped_and_each_one_moves(
    tmp_path: Path, simulator: UpstreamSimulator
) -> None:
    port = free_port()
    control = tmp_path / "chaos.json"
    env = {**ENV, "WSFLEET_CHAOS_CONTROL": str(control)}
    worker = await cli_process(
        "worker", ["worker", "--name", "w1", "--health-port", str(port)], tmp_path, env
    ).start()
    try:
        await worker.wait_for_line(r"worker starting")
        base = f"ws://{simulator.host}:{simulator.port}/stream"
        for cid, url in (("a", f"{base}/a"), ("b", f"{base}/b")):
            started = await asyncio.to_thread(run_cli, ["start", cid, url], tmp_path, ENV)
            assert started.returncode == 0, started.stderr
        await until(lambda: scrape(port).get(series(names.INGEST_LAG_MS), 0) > 0, "ingest")
        await until(lambda: scrape(port).get(series(names.ACTIVE_CONNECTIONS), 0) == 2, "gauge")
        first = await asyncio.to_thread(scrape, port)

        # An upstream that never answers: reconnects, then gives up.
        dead = await asyncio.to_thread(
            run_cli, ["start", "dead", "ws://127.0.0.1:9/stream/x"], tmp_path, ENV
        )
        assert dead.returncode == 0, dead.stderr
        await until(lambda: scrape(port)[series(names.UPSTREAM_GIVE_UPS)] > 0, "give-up")
        # One failed session renew, then an outage past the session's trust: self-fence; once
        # the store is back, the connections of the expired session are taken over.
        faults(control, 1, fail={"RenewSession": 1})
        await until(lambda: scrape(port)[series(names.STORE_ERRORS)] > 0, "store error")
        faults(control, 2, outage=True)
        await until(lambda: scrape(port)[series(names.SELF_FENCES)] > 0, "self-fence")
        # Past the hand-back's retries and the lease's end: the leases expire, not released.
        await asyncio.sleep(int(ENV["WSFLEET_LEASE_MS"]) / 1000)
        faults(control, 3)
        await until(lambda: scrape(port)[series(names.TAKEOVERS)] > 0, "takeover")
        stopped = await asyncio.to_thread(run_cli, ["stop", "b"], tmp_path, ENV)
        assert stopped.returncode == 0, stopped.stderr
        await until(lambda: scrape(port)[series(names.ACTIVE_CONNECTIONS)] == 1, "release")
        second = await asyncio.to_thread(scrape, port)

        for spec in CATALOGUE:
            assert series(spec.name) in first, f"{spec.name} not exported"
        assert first["wsfleet_build_info"] == 1
        for name in MOVED:
            assert second[series(name)] != first[series(name)], f"{name} did not move"
        assert first[series(names.ACTIVE_CONNECTIONS)] == 2
    finally:
        await worker.kill()


async def test_a_scrape_is_current_and_shows_the_process_without_created_series(
    tmp_path: Path, simulator: UpstreamSimulator
) -> None:
    """GIVEN a worker whose metrics loop publishes once a minute, WHEN it streams, THEN each
    scrape's received count is already at least the stored count (it is read at scrape time,
    not published every interval), and the page has process_* and GC series but no _created."""
    port = free_port()
    env = {**ENV, "WSFLEET_METRICS_INTERVAL_S": "60"}
    worker = await cli_process(
        "worker", ["worker", "--name", "w1", "--health-port", str(port)], tmp_path, env
    ).start()
    try:
        await worker.wait_for_line(r"worker starting")
        url = f"ws://{simulator.host}:{simulator.port}/stream/a"
        started = await asyncio.to_thread(run_cli, ["start", "a", url], tmp_path, env)
        assert started.returncode == 0, started.stderr
        ingested = series(names.MESSAGES_INGESTED)
        received = series(names.MESSAGES_RECEIVED)
        await until(lambda: scrape(port).get(ingested, 0) > 0, "ingest")
        first = await asyncio.to_thread(scrape, port)
        await until(lambda: scrape(port)[ingested] > first[received], "more stored")
        second = await asyncio.to_thread(scrape, port)
        text = await asyncio.to_thread(page, port)
    finally:
        await worker.kill()
    for sample in (first, second):
        assert sample[received] >= sample[ingested] > 0, sample
    assert second[received] > first[received]
    assert "\nprocess_resident_memory_bytes " in text
    assert "\npython_gc_objects_collected_total{" in text
    assert "_created" not in text
