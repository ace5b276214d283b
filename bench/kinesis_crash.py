"""`python -m bench --only kinesis-crash`: issue 30's crash target for a sink without a resume
point. The demo (`wsfleet demo --backend=aws --sink=kinesis`, the dev stack's own script and
judge: moto's Kinesis, DynamoDB Local, the simulator, real worker processes) at 10 connections
x 100 msg/s, 1,000 msg/s over the fleet, SIGKILLs its busiest worker and judges the stream read
back by the reader's rule (adapters/kinesis/message_reader.py).

Per run: messages lost (the bar: 0), and for each connection the killed worker held, the copies
in the stream against what bounds them. A new owner resumes from the checkpoint recorded with
the connection, so the copies are what the old owner had put past it: at most what arrived in
one checkpoint interval plus the lag from a message's arrival to the checkpoint that covers it
(the ingest flush interval and the batch's write, since a checkpoint records only what the sink
has stored). `bound_s` is therefore the checkpoint interval plus the flush interval; the table
also shows the issue's plainer "rate x interval" beside it."""

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from application.config import WorkerConfig
from entrypoints.cli.options import PREFIX
from entrypoints.demo.options import DemoOptions
from entrypoints.devstack.service import child_env

WSFLEET = Path(sys.executable).with_name("wsfleet")
DEMO_TIMEOUT_S = 300.0


async def _demo(log: Path, connections: int, rate: float) -> dict[str, Any]:
    argv = [str(WSFLEET), "demo", "--backend=aws", "--sink=kinesis"]
    argv += ["--connections", str(connections), "--rate", str(rate), "--json"]
    with log.open("wb") as stderr:
        process = await asyncio.create_subprocess_exec(
            *argv, env=child_env(), stdout=asyncio.subprocess.PIPE, stderr=stderr
        )
        try:
            async with asyncio.timeout(DEMO_TIMEOUT_S):
                out, _ = await process.communicate()
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    if not out.strip():  # it failed before judging (a phase timed out, a process died)
        raise RuntimeError(f"the demo exited {process.returncode} without a verdict: {log}")
    summary: dict[str, Any] = json.loads(out)  # exit 1 with a verdict: a violation, shown
    return summary


def _judged(
    summary: dict[str, Any], rate: float, interval_s: float, flush_s: float
) -> dict[str, Any]:
    crashed = {cid for m in summary["moves"] if m["kind"] == "crash" for cid in m["connection_ids"]}
    per = [c for c in summary["connections"] if c["connection_id"] in crashed]
    copies = sorted(c["duplicated"] for c in per)
    bound = rate * (interval_s + flush_s)
    return {
        "ok": summary["ok"],
        "violations": summary["violations"],
        "emitted": summary["totals"]["emitted"],
        "lost": summary["totals"]["lost"],
        "affected": len(per),
        "copies": copies,
        "copies_elsewhere": sum(
            c["duplicated"] for c in summary["connections"] if c["connection_id"] not in crashed
        ),
        "beyond_replay": sum(c["copies_beyond_replay"] for c in summary["connections"]),
        "rate_x_interval": rate * interval_s,
        "bound": bound,
        "within_bound": all(n <= bound for n in copies),
        "takeover": summary["takeover"]["crash"],
    }


async def run_kinesis_crash(
    log_dir: Path, runs: int = 2, connections: int = 10, rate: float = 100.0
) -> dict[str, Any]:
    env = DemoOptions().worker_environment()
    interval_s = float(env[PREFIX + "CHECKPOINT_INTERVAL_S"])
    flush_s = WorkerConfig().ingest_flush_interval_s
    results = []
    for i in range(1, runs + 1):
        summary = await _demo(log_dir / f"kinesis-crash-{i}.log", connections, rate)
        results.append(_judged(summary, rate, interval_s, flush_s))
    return {
        "connections": connections,
        "rate": rate,
        "checkpoint_interval_s": interval_s,
        "flush_interval_s": flush_s,
        "runs": results,
    }


def render(result: dict[str, Any]) -> str:
    rate, interval = result["rate"], result["checkpoint_interval_s"]
    lines = [
        f"Kinesis sink, SIGKILL at {result['connections'] * rate:,.0f} msg/s "
        f"({result['connections']} x {rate:g}/s), checkpoint every {interval:g} s, "
        f"flush every {result['flush_interval_s']:g} s",
        "| run | emitted | lost | connections of the killed worker | copies per connection "
        "(min-max) | rate x interval | bound: rate x (interval + flush) | copies no replay "
        "explains | crash takeover median |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(result["runs"], 1):
        copies = r["copies"]
        spread = f"{copies[0]}-{copies[-1]}" if copies else "-"
        takeover = r["takeover"]
        median = f"{takeover['median_ms'] / 1000:.2f} s" if takeover else "-"
        lines.append(
            f"| {i} | {r['emitted']:,} | {r['lost']} | {r['affected']} | {spread} | "
            f"{r['rate_x_interval']:.0f} | {r['bound']:.0f} "
            f"({'within' if r['within_bound'] else 'PAST IT'}) | {r['beyond_replay']} | {median} |"
        )
    return "\n".join(lines)
