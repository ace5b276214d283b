"""`python -m bench.sim`: the scenarios at the sizes asked for, one line of figures each, and
every figure as JSON in --out, with a PNG per size of the AZ loss's and the deploy's
connections not streaming over time (bench/sim/plot.py). Sizes are WORKERSxCONNECTIONS."""

import argparse
import asyncio
import json
import logging
from pathlib import Path
from typing import Any

from bench.sim.fleet import SimSize
from bench.sim.plot import PLOTTED, draw_all
from bench.sim.scenarios import SCENARIOS, run_scenario

_SHOWN = (
    "streaming_again_s",
    "first_streaming_again_s",
    "orphans_streaming_again_s",
    "unowned_gap_s",
    "connections_moved",
    "moves_per_moved_connection_max",
    "two_owners",
    "not_streaming_at_end",
    "store_requests_per_worker_s",
    "throttled_requests",
    "wall_s",
    "cpu_s",
    "peak_rss_mib",
    "at_fault",
)


def _size(text: str) -> SimSize:
    workers, _, connections = text.partition("x")
    return SimSize(int(workers), int(connections))


async def main(args: argparse.Namespace) -> None:
    results: list[dict[str, Any]] = []
    for size in args.sizes:
        for name in args.scenarios:
            figures = await run_scenario(name, size, settle_s=args.settle, window_s=args.window)
            results.append(figures)
            shown = {k: figures[k] for k in _SHOWN}
            print(f"{name} {size.workers}x{size.connections}: {json.dumps(shown)}", flush=True)
            if args.out:
                args.out.mkdir(parents=True, exist_ok=True)
                (args.out / "sim.json").write_text(json.dumps(results, indent=1))
                if name in PLOTTED:
                    _plot(results, args.out)


def _plot(results: list[dict[str, Any]], out: Path) -> None:
    try:
        for path in draw_all(results, out):
            print(f"plot: {path}", flush=True)
    except ImportError:
        print("matplotlib is not installed (pip install -e '.[bench]'): no plot", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.sim", description=__doc__)
    parser.add_argument(
        "--sizes", type=lambda s: [_size(x) for x in s.split(",")], default=[_size("10x200")]
    )
    parser.add_argument("--scenarios", type=lambda s: s.split(","), default=list(SCENARIOS))
    parser.add_argument("--settle", type=float, default=30.0, help="virtual s before the fault")
    parser.add_argument("--window", type=float, default=60.0, help="virtual s measured")
    parser.add_argument("--out", type=Path)
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(main(parser.parse_args()))
