"""`wsfleet status --watch`: the fleet view (entrypoints/cli/fleet_view.py), refreshed in place
every --interval seconds until Ctrl-C (or --count refreshes). On a terminal the frame is
redrawn where it stands; into a pipe or a file each refresh is printed whole, one after the
other (like `top -b`), so a log of it reads as a history.

Ingest lag comes from the workers themselves, where the operator names their health endpoints
(`--scrape http://host:8081`, repeatable): each refresh reads a worker's `/status` (its id) and
`/metrics` (the ingest-lag histogram) and shows the mean lag of the messages stored since the
previous refresh. A worker that does not answer within a second shows "unreachable"; the store
alone cannot know the lag.
"""

import argparse
import asyncio
import json
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console, RenderableType
from rich.live import Live
from rich.rule import Rule

from adapters.prometheus import prometheus_name
from application.ports.metrics import CATALOGUE, INGEST_LAG_MS
from entrypoints.cli import fleet_view, tables
from entrypoints.cli.backend import command_settings, open_backend
from entrypoints.containers import provide

EXIT_OK = 0
_PROBE_TIMEOUT_S = 1.0
_LAG = prometheus_name(next(spec for spec in CATALOGUE if spec.name == INGEST_LAG_MS))


async def watch(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    settings = command_settings(env, writes=False)
    probes = [WorkerProbe(url) for url in args.scrape or ()]
    console = tables.console()
    async with open_backend(settings) as container:
        store = await provide(container.store)
        clock = container.core.clock()
        with _screen(console) as show:
            refreshes = 0
            while True:
                connections = await store.list_connections(limit=args.limit)
                sessions = {s.session_id: s for s in await store.list_sessions()}
                lags = dict(await asyncio.gather(*(p.lag() for p in probes)))
                show(
                    fleet_view.render(
                        connections,
                        clock.now_ms(),
                        top=args.top,
                        lags=lags,
                        truncated=len(connections) >= args.limit,
                        sessions=sessions,
                    )
                )
                refreshes += 1
                if args.count and refreshes >= args.count:
                    return EXIT_OK
                await asyncio.sleep(args.interval)


@contextmanager
def _screen(console: Console) -> Iterator[Callable[[RenderableType], None]]:
    if not console.is_terminal:

        def print_frame(frame: RenderableType) -> None:
            console.print(frame)
            console.print(Rule())

        yield print_frame
        return
    with Live(console=console, auto_refresh=False, vertical_overflow="crop") as live:
        yield lambda frame: live.update(frame, refresh=True)


class WorkerProbe:
    """One worker's health endpoint: its id and the mean ingest lag since the last probe."""

    def __init__(self, base_url: str) -> None:
        self._base = base_url.rstrip("/")
        self._worker_id = base_url
        self._last: tuple[float, float] | None = None  # the histogram's (count, sum)

    async def lag(self) -> tuple[str, str]:
        try:
            status, metrics = await asyncio.gather(
                asyncio.to_thread(_get, self._base + "/status"),
                asyncio.to_thread(_get, self._base + "/metrics"),
            )
            self._worker_id = str(json.loads(status)["worker_id"])
            count, total = _histogram(metrics.decode(), _LAG)
        except (OSError, ValueError, KeyError):
            self._last = None
            return self._worker_id, "unreachable"
        last, self._last = self._last, (count, total)
        if last is None or count < last[0]:  # first look, or the worker restarted
            return self._worker_id, "-"
        stored = count - last[0]
        if stored == 0:
            return self._worker_id, "idle"
        return self._worker_id, f"{(total - last[1]) / stored * 1000:.0f} ms"


def _get(url: str) -> bytes:
    # A 503 (unhealthy) still has a body worth reading.
    try:
        with urllib.request.urlopen(url, timeout=_PROBE_TIMEOUT_S) as response:
            body: bytes = response.read()
    except urllib.error.HTTPError as exc:
        body = exc.read()
    return body


def _histogram(text: str, name: str) -> tuple[float, float]:
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in (name + "_count", name + "_sum"):
                found[sample.name] = sample.value
    return found[name + "_count"], found[name + "_sum"]
