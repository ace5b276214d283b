"""`python -m bench --only read-back`: `wsfleet messages ID` on a connection with 100,000
stored messages, on SQLite and on DynamoDB Local (issue 30's target: the first page in under
1 s).

Per backend: the connection is STARTed through the deployment's router (the command looks it
up first), its messages written through the backend's own sink in its batch size (~200-byte
JSON each, seqs 1..N, one token), then `wsfleet messages ID` is run as a real process in the
default page size (1,000) and timed from spawn to its first line and to the 1,000th line on
its stdout (the first page, as a user sees it: interpreter start and imports included), then
killed. `--from-seq` in the middle is timed the same way (the page that starts there). The
process start alone is timed too (`wsfleet --help`) to show how much of it is Python's, and the
read alone: the command's reader (the backend's read side, what the command opens) asked for
the first page in this process, and the command's CPU time (user + system of the child).
Each figure is the p50 and p99 (nearest rank, bench/stats.py) of `repeats` runs."""

import asyncio
import os
import signal
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from application.ports.sink import StoredMessage
from bench.backends import HARNESS, Backend, open_aws_backend, open_embedded_backend
from bench.stats import percentile
from entrypoints.containers import provide
from entrypoints.devstack.service import child_env
from entrypoints.read_side import open_read_side

CONNECTION = "long-meeting"
PAGE = 1000
T0 = 1_700_000_000_000
WSFLEET = Path(sys.executable).with_name("wsfleet")


def _messages(first: int, last: int) -> list[StoredMessage]:
    return [
        StoredMessage(
            CONNECTION,
            seq,
            f'{{"seq": {seq}, "text": "{"x" * 150}", "speaker": "s{seq % 7}"}}',
            T0 + seq,
            "bench-w1#1",
            1,
            seq - 1,
        )
        for seq in range(first, last + 1)
    ]


async def _fill(backend: Backend, count: int) -> float:
    """Seconds to store `count` messages through the backend's sink."""
    sink = await provide(backend.container.sink)
    began = time.perf_counter()
    batch = backend.sink_max_batch
    for first in range(1, count + 1, batch):
        await sink.write(_messages(first, min(count, first + batch - 1)))
    return time.perf_counter() - began


async def _time_lines(argv: list[str], env: dict[str, str], lines: int) -> dict[str, float]:
    """Seconds from spawn to the first and to the `lines`-th line of stdout."""
    began = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        *argv, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    assert process.stdout is not None
    first = page = float("nan")
    seen = 0
    try:
        async with asyncio.timeout(120):
            while seen < lines:
                line = await process.stdout.readline()
                if not line:
                    break
                seen += 1
                if seen == 1:
                    first = time.perf_counter() - began
            page = time.perf_counter() - began if seen == lines else float("nan")
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGKILL)
        stderr = await process.stderr.read() if process.stderr else b""
        await process.wait()
    if seen < lines:
        raise RuntimeError(f"{argv[1:]} printed {seen} lines: {stderr.decode()[-2000:]}")
    return {"first_line_s": first, "first_page_s": page}


def _children_cpu() -> float:
    """CPU seconds of every reaped child so far: one child runs at a time here, so the
    difference across one run is that child's."""
    times = os.times()
    return times.children_user + times.children_system


async def _one(backend: Backend, count: int, repeats: int) -> dict[str, Any]:
    # No worker runs: the connection only has to exist for the command to read it.
    await backend.router.start(CONNECTION, f"ws://127.0.0.1:9/stream/{CONNECTION}")
    fill_s = await _fill(backend, count)
    env = child_env({**backend.env, **HARNESS})
    reads = []
    async with open_read_side(backend.container.settings()) as read_side:
        reader = await read_side.reader()
        for _ in range(repeats):
            began = time.perf_counter()
            assert len(await reader.messages(CONNECTION, 0, PAGE)) == PAGE
            reads.append(time.perf_counter() - began)
    runs: dict[str, list[dict[str, float]]] = {"from the start": [], "from the middle": []}
    startup = []
    for _ in range(repeats):
        startup.append((await _time_lines([str(WSFLEET), "--help"], env, 1))["first_line_s"])
        middle = ["--from-seq", str(count // 2)]
        for name, extra in (("from the start", []), ("from the middle", middle)):
            argv = [str(WSFLEET), "messages", CONNECTION, *extra]
            cpu_before = _children_cpu()
            timed = await _time_lines(argv, env, PAGE)
            runs[name].append({**timed, "cpu_s": _children_cpu() - cpu_before})
    return {
        "backend": backend.name,
        "engine": backend.engine,
        "stored": count,
        "fill_s": round(fill_s, 1),
        "process_start_s": _summary(startup),
        "reader_first_page_s": _summary(reads),
        "runs": {
            name: {
                key: _summary([r[key] for r in got])
                for key in ("first_line_s", "first_page_s", "cpu_s")
            }
            for name, got in runs.items()
        },
        "repeats": repeats,
    }


def _summary(values: list[float]) -> dict[str, float]:
    return {
        "median": statistics.median(values),
        "p50": percentile(values, 50) or 0.0,
        "p99": percentile(values, 99) or 0.0,
        "max": max(values),
    }


async def run_read_back(log_dir: Path, count: int = 100_000, repeats: int = 20) -> list[Any]:
    results = []
    async with open_embedded_backend(log_dir / "read-back-embedded-data") as backend:
        results.append(await _one(backend, count, repeats))
    async with open_aws_backend(log_dir, name="read-back-local-aws") as backend:
        results.append(await _one(backend, count, repeats))
    return results


def render(results: list[dict[str, Any]]) -> str:
    def cell(
        figure: dict[str, float], unit: float = 1.0, fmt: str = ".2f", suffix: str = " s"
    ) -> str:
        return f"{figure['p50'] * unit:{fmt}}{suffix} / {figure['p99'] * unit:{fmt}}{suffix}"

    lines = [
        f"`wsfleet messages` on one connection holding {results[0]['stored']:,} messages, page "
        f"{PAGE} (p50 / p99 of {results[0]['repeats']}, from spawn; `wsfleet --help` alone)",
        "| backend | first line | first page | first page from the middle | command CPU | "
        "process start | the read alone (in-process) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        start, middle = r["runs"]["from the start"], r["runs"]["from the middle"]
        lines.append(
            f"| {r['engine']} | {cell(start['first_line_s'])} | {cell(start['first_page_s'])} | "
            f"{cell(middle['first_page_s'])} | {cell(start['cpu_s'])} | "
            f"{cell(r['process_start_s'])} | "
            f"{cell(r['reader_first_page_s'], 1000, '.0f', ' ms')} |"
        )
    return "\n".join(lines)
