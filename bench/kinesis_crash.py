"""`python -m bench --only kinesis-crash`: a SIGKILL at 1,000 msg/s with Kinesis as the sink
(issue 30's target: 0 lost; duplicates per affected connection at most its rate x the
checkpoint interval).

The run is `wsfleet demo --backend aws --sink kinesis` (its scenario, its judge: every record
of the stream read back, the reader's rule applied, copies counted), at 50 connections x 20
messages/s: 1,000 msg/s over the fleet, the crash's victim holding its share. (At 10 x 100/s
the demo's balancing phase timed out here: a worker hands off only while its sink keeps up,
and at 100 msg/s per connection each batch is many PutRecords rounds on moto.) Per connection
the crash moved: the copies the stream holds, against rate x the demo's checkpoint interval
(entrypoints/demo/options.py), the most a takeover from the last checkpoint can replay."""

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from entrypoints.devstack.service import child_env

CONNECTIONS = 50
RATE = 20.0
CHECKPOINT_INTERVAL_S = 3.0  # the demo's WSFLEET_CHECKPOINT_INTERVAL_S
WSFLEET = Path(sys.executable).with_name("wsfleet")


async def run_kinesis_crash(log_dir: Path, steady_s: float = 5.0) -> dict[str, Any]:
    argv = [
        str(WSFLEET),
        "demo",
        "--backend",
        "aws",
        "--sink",
        "kinesis",
        "--json",
        "--no-live",
        "--connections",
        str(CONNECTIONS),
        "--rate",
        str(RATE),
        "--steady",
        str(steady_s),
    ]
    log = log_dir / "kinesis-crash-demo.log"
    with log.open("wb") as stderr:
        process = await asyncio.create_subprocess_exec(
            *argv, env=child_env(), stdout=asyncio.subprocess.PIPE, stderr=stderr
        )
        out, _ = await process.communicate()
    if not out.strip():
        raise RuntimeError(f"the demo printed no summary (exit {process.returncode}); see {log}")
    summary = json.loads(out)
    results = {c["connection_id"]: c for c in summary["connections"]}
    crash = next(m for m in summary["moves"] if m["kind"] == "crash")
    bound = int(RATE * CHECKPOINT_INTERVAL_S)
    affected = [
        {
            "connection_id": cid,
            "duplicated": results[cid]["duplicated"],
            "redelivered": results[cid]["redelivered"],
            "lost": results[cid]["lost"],
        }
        for cid in crash["connection_ids"]
    ]
    return {
        "ok": summary["ok"],
        "exit_code": process.returncode,
        "violations": summary["violations"],
        "rate_per_connection": RATE,
        "connections": CONNECTIONS,
        "checkpoint_interval_s": CHECKPOINT_INTERVAL_S,
        "bound_per_connection": bound,
        "totals": summary["totals"],
        "affected": affected,
        "log": str(log),
    }


def render(result: dict[str, Any]) -> str:
    totals = result["totals"]
    dups = [a["duplicated"] for a in result["affected"]]
    return "\n".join(
        [
            f"SIGKILL at {result['connections'] * result['rate_per_connection']:,.0f} msg/s "
            f"({result['connections']} x {result['rate_per_connection']:g}/s), Kinesis sink on "
            f"moto, checkpoint every {result['checkpoint_interval_s']:g} s",
            "| emitted | lost | copies in the stream (all) | affected connections | copies per "
            "affected connection (max) | bound: rate x interval | demo verdict |",
            "|---|---|---|---|---|---|---|",
            f"| {totals['emitted']:,} | {totals['lost']} | {totals['duplicated']:,} | "
            f"{len(dups)} | {max(dups, default=0)} | {result['bound_per_connection']} | "
            f"{'OK' if result['ok'] else 'BROKEN: ' + '; '.join(result['violations'][:3])} |",
        ]
    )
