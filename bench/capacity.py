"""Per-worker capacity: the simulator (1 message/s per stream) and ONE worker process
(bench/capacity_worker.py), ramped step by step until a step fails: fewer than 99 % of the
connections streaming, or fewer than 99.9 % of the messages stored within 2 s. Also the
floor under it: plain websockets clients holding as many connections (bench/bare_clients.py)."""

import json
import ssl
from pathlib import Path
from typing import Any

from bench.procs import rss_kib
from bench.upstream import simulator
from entrypoints.devstack.process import Process
from entrypoints.devstack.service import child_env


def _events(child: Process) -> list[dict[str, Any]]:
    found = []
    for line in child.stdout.read_text().splitlines():
        if line.startswith("{"):
            found.append(json.loads(line))
    return found


def judge_step(step: dict[str, Any], baseline_kib: int, rate: float) -> dict[str, Any]:
    streaming = step["streaming"]
    expected = streaming * rate
    within = step["within_target"] / step["stored"] if step["stored"] else 0.0
    reasons = []
    if streaming < 0.99 * step["target"]:
        reasons.append(f"only {streaming} of {step['target']} streaming")
    if within < 0.999:
        reasons.append(f"{within:.2%} stored within 2 s")
    if step["stored_per_s"] < 0.98 * expected:
        reasons.append(f"stored {step['stored_per_s']}/s of {expected:.0f}/s emitted")
    return {
        **step,
        "per_connection_kib": round((step["rss_kib"] - baseline_kib) / max(1, streaming), 1),
        "within_target_share": round(within, 5),
        "ok": not reasons,
        "why_not": reasons,
    }


async def run_capacity(
    log_dir: Path,
    label: str,
    steps: list[int],
    *,
    window_s: float = 20.0,
    rate: float = 1.0,
    extra: list[str] | None = None,
    tls: tuple[Path, Path, Path] | None = None,
    timeout_s: float = 1200.0,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """`tls`: (ca, cert, key) to serve wss:// and trust it; `env`: more of the worker's
    environment. Returns the judged steps."""
    context = ssl.create_default_context(cafile=str(tls[0])) if tls else None
    sim = simulator(
        log_dir,
        rate=rate,
        name=f"{label}-simulator",
        certfile=tls[1] if tls else None,
        keyfile=tls[2] if tls else None,
        client_context=context,
    )
    await sim.start()
    args = ["--sim-url", sim.base_url, "--steps", ",".join(map(str, steps))]
    args += ["--window", str(window_s), "--data-dir", str(log_dir), "--prefix", label]
    args += ["--ca-file", str(tls[0])] if tls else []
    worker = Process.python(
        label, "bench.capacity_worker", args + (extra or []), log_dir, child_env(env)
    )
    try:
        await worker.start()
        finished = await worker.exit_code(timeout_s) is not None
        sim_rss = rss_kib(sim.child.pid)
    finally:
        await worker.stop()
        await sim.stop()
    events = _events(worker)
    baseline = next((e for e in events if e["event"] == "baseline"), None)
    if baseline is None:
        raise RuntimeError(f"{label}: the capacity worker reported nothing:\n{worker.tail()}")
    judged = [judge_step(e, baseline["rss_kib"], rate) for e in events if e["event"] == "step"]
    # Sustained = every step up to the first that failed: a later step passing again (a
    # transient at the failed one) is reported beside it, never instead of it.
    first_bad = next((i for i, s in enumerate(judged) if not s["ok"]), len(judged))
    passing = [s["streaming"] for s in judged[:first_bad]]
    failing = judged[first_bad] if first_bad < len(judged) else None
    return {
        "label": label,
        "tls": tls is not None,
        "tls_read_buffer": baseline.get("tls_read_buffer"),
        "rate": rate,
        "finished": finished,
        "baseline_rss_kib": baseline["rss_kib"],
        "open_files_limit": baseline["files"],
        "simulator_rss_kib": sim_rss,
        "steps": judged,
        "max_sustained": max(passing, default=0),
        "broke_at": failing["target"] if failing else None,
        "why": failing["why_not"] if failing else [],
        "passed_after_breaking": [s["target"] for s in judged[first_bad + 1 :] if s["ok"]],
    }


async def run_floor(log_dir: Path, steps: list[int]) -> list[dict[str, Any]]:
    sim = simulator(log_dir, rate=1.0, name="floor-simulator")
    await sim.start()
    args = ["--sim-url", sim.base_url, "--steps", ",".join(map(str, steps))]
    clients = Process.python("floor", "bench.bare_clients", args, log_dir, child_env({}))
    try:
        await clients.start()
        await clients.exit_code(600)
    finally:
        await clients.stop()
        await sim.stop()
    return [e for e in _events(clients) if e["event"] == "step"]
