"""The demo's closing summary, for people (rich tables) and for scripts (`--json`)."""

import statistics

from rich.console import Console
from rich.table import Table

from entrypoints.demo.judge import Move, Summary, Takeover


def print_summary(console: Console, summary: Summary, *, per_connection: bool = True) -> None:
    if per_connection:
        console.print(_connection_table(summary))
        for line in LEGEND:
            console.print(line, style="dim", highlight=False, markup=False)
    for move, moved in summary.moves:
        what = "crash (SIGKILL)" if move.kind == "crash" else "graceful handoff (SIGTERM)"
        times = sorted(t.ms for t in moved if t.ms is not None)
        console.print(
            f"{what} of {move.worker}: {len(moved)} connections moved; takeover time from the "
            f"signal to the new owner's connect (simulator's clock): {_spread(times)}",
            highlight=False,
        )
        if moved:
            per = ", ".join(f"{t.connection_id} {_ms(t.ms)}" for t in moved)
            console.print(f"  {per}", style="dim", highlight=False)
    rewrites = summary.sink_rewrites
    rewrite_text = "" if rewrites is None else f", rewritten in the sink {rewrites}"
    if summary.sink_keeps_copies:
        stored = (
            f"duplicates in the stream {summary.total('duplicated')} (dropped on reading: one "
            "per seq, the highest token), at most what the upstream sent again: "
            f"{summary.total('redelivered')}"
        )
    else:
        stored = (
            f"duplicated {summary.total('duplicated')}; re-sent by the upstream after "
            f"takeovers at least {summary.total('resent')}{rewrite_text} (each stored once, "
            "by key)"
        )
    console.print(
        f"messages ({summary.sink} sink): emitted {summary.total('emitted')}, stored "
        f"{summary.total('stored')}, lost {summary.total('lost')}, {stored}",
        highlight=False,
    )
    console.print(
        f"most subscribers any stream had at once: {summary.max_peak_subscribers}",
        highlight=False,
    )
    if summary.ok and summary.sink_keeps_copies:
        console.print(
            "[bold green]OK[/]: every invariant held (no loss, duplicates only of what the "
            "upstream replayed, one owner)"
        )
    elif summary.ok:
        console.print("[bold green]OK[/]: every invariant held (no loss, no duplicate, one owner)")
    else:
        console.print("[bold red]INVARIANT BROKEN[/]:")
        for problem in summary.violations:
            console.print(f"  - {problem}", highlight=False, markup=False)


def _connection_table(summary: Summary) -> Table:
    table = Table(title="per connection", title_justify="left", show_edge=False, pad_edge=False)
    for column in ("connection", "emitted", "stored", "lost", "dup", "checkpoint", "peak subs"):
        table.add_column(column, justify="left" if column == "connection" else "right")
    table.add_column("re-sent", justify="right")
    table.add_column("takeover", justify="right")
    taken: dict[str, list[tuple[int, str]]] = {}  # in the order they happened
    for move, moved in summary.moves:
        for t in moved:
            cell = f"{move.kind} {_ms(t.ms)}{_cause(move, t)}"
            taken.setdefault(t.connection_id, []).append((move.signal_at_ms, cell))
    for r in summary.rebalanced:
        taken.setdefault(r.connection_id, []).append((r.released_at_ms, f"balance {_ms(r.ms)}"))
    for c in summary.connections:
        table.add_row(
            c.connection_id,
            str(c.emitted),
            str(c.stored),
            _flag(c.lost),
            _flag(c.duplicated, limit=c.redelivered if summary.sink_keeps_copies else 0),
            str(c.checkpoint),
            _flag(c.peak_subscribers, limit=1),
            str(c.resent),
            ", ".join(cell for _, cell in sorted(taken.get(c.connection_id, []))) or "-",
        )
    return table


# What the takeover column means, printed under the table.
LEGEND = (
    "takeover: from the SIGKILL (crash) or SIGTERM (handoff) of its worker, or from its "
    "release to a worker short of its share (balance), to the next owner's connect; "
    "- : never moved (its worker was not signalled and balancing left it where it was)",
    "crash takeovers fall in two clusters, by who took them. (survivor): a survivor with room "
    "took it from the hint sent when the death was reported (the demo reaps the killed worker "
    "as a supervisor would: its session ends and its connections are hinted at once), within "
    "tenths of a second. (replacement): the survivors were full (the demo caps each worker at "
    "one more than an even share, WSFLEET_MAX_CONNECTIONS), so it waited for the worker the "
    "supervisor starts in the killed one's place, which takes the rest as soon as it is up: "
    "that cluster is the new process's start-up, not a lease running out",
)


def _cause(move: Move, t: Takeover) -> str:
    if move.kind != "crash" or not t.taken_by:
        return ""
    return " (replacement)" if t.taken_by == move.replacement else " (survivor)"


def _flag(value: int, limit: int = 0) -> str:
    return f"[bold red]{value}[/]" if value > limit else str(value)


def _ms(ms: int | None) -> str:
    return "never" if ms is None else f"{ms / 1000:.2f}s"


def _spread(times: list[int]) -> str:
    if not times:
        return "none measured"
    median = statistics.median(times)
    return (
        f"min {min(times) / 1000:.2f}s, median {median / 1000:.2f}s, max {max(times) / 1000:.2f}s"
    )
