"""How the demo shows itself: a live terminal view (rich), or plain timestamped lines when the
output is not a terminal, in --quick mode and with --no-live."""

import collections
import time
from typing import Protocol

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from entrypoints.demo.monitor import Snapshot

_COLORS = ("cyan", "magenta", "green", "yellow", "blue", "red", "bright_cyan", "bright_magenta")


def color(worker: str) -> str:
    digits = "".join(ch for ch in worker if ch.isdigit())
    return _COLORS[int(digits) % len(_COLORS)] if digits else "white"


class Reporter(Protocol):
    def __enter__(self) -> "Reporter": ...

    def __exit__(self, *exc: object) -> None: ...

    def phase(self, name: str) -> None: ...

    def event(self, text: str) -> None: ...

    def update(self, snapshot: Snapshot) -> None: ...


class PlainReporter:
    def __init__(self, console: Console) -> None:
        self._console = console
        self._began = time.monotonic()

    def __enter__(self) -> "PlainReporter":
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def phase(self, name: str) -> None:
        self.event(f"== {name}")

    def event(self, text: str) -> None:
        elapsed = time.monotonic() - self._began
        self._console.print(f"[{elapsed:6.1f}s] {text}", highlight=False, markup=False)

    def update(self, snapshot: Snapshot) -> None:
        return None


class LiveReporter:
    """A screen that fits 80x24: workers, every connection as a small tile, the last events."""

    def __init__(self, console: Console, title: str) -> None:
        self._console = console
        self._title = title
        self._began = time.monotonic()
        self._phase = "starting"
        self._events: collections.deque[str] = collections.deque(maxlen=_EVENTS)
        self._snapshot: Snapshot | None = None
        self._live = Live(console=console, refresh_per_second=4, get_renderable=self._render)

    def __enter__(self) -> "LiveReporter":
        self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._live.stop()

    def phase(self, name: str) -> None:
        self._phase = name
        self.event(f"== {name}")

    def event(self, text: str) -> None:
        self._events.append(f"[{time.monotonic() - self._began:6.1f}s] {text}")

    def update(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot

    def _render(self) -> RenderableType:
        elapsed = time.monotonic() - self._began
        head = Text.assemble(
            (f"{self._title}  ", "bold"), (f"t+{elapsed:5.1f}s  ", "dim"), (self._phase, "bold")
        )
        parts: list[RenderableType] = [head]
        if self._snapshot is not None:
            parts += [_workers(self._snapshot), Text(_LEGEND, "dim")]
            parts.append(_tiles(self._snapshot, max(1, self._console.width // _TILE_WIDTH)))
        parts.append(Text("\n".join(self._events), "dim"))
        return Group(*parts)


_EVENTS = 5
_TILE_WIDTH = 24
_LEGEND = "connection  owner  token  checkpoint  (subscribers: . none, ! more than one)"


def _workers(snapshot: Snapshot) -> Table:
    load = snapshot.load()
    table = Table.grid(padding=(0, 2))
    for child in snapshot.workers:
        if child.running:
            state = Text("running", "green")
        else:
            signalled = f" after {child.signalled}" if child.signalled else ""
            state = Text(f"exited {child.returncode}{signalled}", "red")
        table.add_row(
            Text(child.name, f"bold {color(child.name)}"),
            state,
            Text(f"pid {child.pid}", "dim"),
            f"holds {load.get(child.name, 0)}",
        )
    return table


def _tiles(snapshot: Snapshot, per_row: int) -> Table:
    grid = Table.grid(padding=(0, 1))
    tiles = [_tile(snapshot, cid) for cid in sorted(snapshot.connections)]
    for i in range(0, len(tiles), per_row):
        grid.add_row(*tiles[i : i + per_row])
    return grid


def _tile(snapshot: Snapshot, cid: str) -> Text:
    conn = snapshot.connections[cid]
    owner = snapshot.held_by(cid)
    subscribers = snapshot.subscribers(cid)
    mark = (" ", "")
    if subscribers != 1:
        mark = (".", "dim") if subscribers == 0 else ("!", "bold red")
    return Text.assemble(
        (f"{cid.removeprefix('demo-'):>3} ", "bold"),
        (f"{owner or '-':<4}", color(owner) if owner else "dim"),
        (f"{conn.token:>3} ", "dim"),
        (f"{conn.checkpoint_seq:>6}", ""),
        mark,
    )
