"""`python -m bench.bare_clients`: the floor under a worker's memory. One process holds N plain
websockets client connections to the simulator, with the connector's settings (compression
off, 4-frame queue), reading and dropping every message: the library's own cost per
connection here, to compare the worker's against. Prints one JSON line per step."""

import argparse
import asyncio
import json

from websockets.asyncio.client import ClientConnection, connect

from bench.limits import open_files, raise_open_files, self_rss_kib


async def hold(ws: ClientConnection, counter: list[int]) -> None:
    async for _ in ws:
        counter[0] += 1


async def main(args: argparse.Namespace) -> None:
    raise_open_files()
    await asyncio.sleep(0.5)
    baseline = self_rss_kib()
    print(json.dumps({"event": "baseline", "rss_kib": baseline}), flush=True)
    tasks: list[asyncio.Task[None]] = []
    connections: list[ClientConnection] = []
    received = [0]
    for target in args.steps:
        while len(connections) < target:
            url = f"{args.sim_url}/stream/{args.prefix}{len(connections):06d}?from_seq=1"
            ws = await connect(url, compression=None, max_queue=4, ping_interval=20)
            connections.append(ws)
            tasks.append(asyncio.create_task(hold(ws, received)))
        await asyncio.sleep(args.settle)
        print(
            json.dumps(
                {
                    "event": "step",
                    "target": target,
                    "rss_kib": self_rss_kib(),
                    "open_files": open_files(),
                    "per_connection_kib": round((self_rss_kib() - baseline) / target, 1),
                    "received": received[0],
                }
            ),
            flush=True,
        )
    for ws in connections:
        await ws.close()
    await asyncio.gather(*tasks, return_exceptions=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.bare_clients")
    parser.add_argument("--sim-url", required=True)
    parser.add_argument("--steps", type=lambda s: [int(x) for x in s.split(",")], required=True)
    parser.add_argument("--settle", type=float, default=5.0)
    parser.add_argument("--prefix", default="bare")
    asyncio.run(main(parser.parse_args()))
