"""The PNG: latency distributions against their targets, per-worker capacity along the ramp,
and for each fleet a timeline of live subscribers with every fault marked (a dip is a
connection without a subscriber; a spike above the connection count would be two at once)."""

from pathlib import Path
from typing import Any

from bench.report import LATENCY_TARGETS_S

FAULT_COLORS = {"crash": "tab:red", "handoff": "tab:blue", "stop": "tab:gray"}


def draw(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fleets = results.get("fleet", [])
    rows = 1 + len(fleets)
    fig = plt.figure(figsize=(13, 3.6 * rows), layout="constrained")
    grid = fig.add_gridspec(rows, 2)
    _latencies(fig.add_subplot(grid[0, 0]), fleets)
    _capacity(fig.add_subplot(grid[0, 1]), results.get("capacity", []))
    for row, fleet in enumerate(fleets, start=1):
        _timeline(fig.add_subplot(grid[row, :]), fleet)
    fig.suptitle(f"wsfleet benchmarks, commit {results['machine']['commit']}")
    fig.savefig(path, dpi=72)
    plt.close(fig)


def _latencies(ax: Any, fleets: list[dict[str, Any]]) -> None:
    kinds = list(LATENCY_TARGETS_S)
    data, labels, positions = [], [], []
    for k, kind in enumerate(kinds):
        for b, fleet in enumerate(fleets):
            data.append(fleet["samples_s"][kind] or [0.0])
            labels.append(f"{kind}\n{fleet['backend']}")
            positions.append(k * (len(fleets) + 1) + b)
    if data:
        ax.boxplot(data, positions=positions, widths=0.7, whis=(1, 99))
        ax.set_xticks(positions, labels, fontsize=7)
    for k, kind in enumerate(kinds):
        x0 = k * (len(fleets) + 1) - 0.5
        ax.hlines(LATENCY_TARGETS_S[kind], x0, x0 + len(fleets), colors="tab:red", linestyles="--")
    ax.set_ylabel("seconds (whiskers p1-p99; red: p99 target)")
    ax.set_title("Latency per connection, 1/10 timings")


def _capacity(ax: Any, runs: list[dict[str, Any]]) -> None:
    for run in runs:
        steps = run["steps"]
        xs = [s["streaming"] for s in steps]
        ax.plot(xs, [s["per_connection_kib"] for s in steps], marker="o", label=run["label"])
    ax.axhline(32, color="tab:red", linestyle="--", label="target 32 KiB")
    ax.set_xlabel("connections in one worker process")
    ax.set_ylabel("KiB RSS per connection")
    ax.set_title("Per-worker capacity (1 msg/s each); x = streaming at each step")
    ax.legend(fontsize=7)


def _timeline(ax: Any, fleet: dict[str, Any]) -> None:
    timeline = fleet["timeline"]
    t0 = timeline["began_ms"]
    points: list[tuple[int, int]] = []
    for spans in timeline["intervals"].values():
        for start, end in spans:
            points += [(start, 1), (end, -1)]
    points.sort()
    xs, ys, live = [0.0], [0], 0
    for at, step in points:
        xs.append((at - t0) / 1000)
        ys.append(live)
        live += step
        xs.append((at - t0) / 1000)
        ys.append(live)
    ax.plot(xs, ys, color="black", linewidth=0.8, label="live subscribers")
    ax.axhline(fleet["connections"], color="tab:green", linestyle=":", label="connections")
    for fault in fleet["faults"]:
        color = FAULT_COLORS.get(fault["kind"], "black")
        ax.axvline((fault["at_ms"] - t0) / 1000, color=color, alpha=0.6)
    for kind, color in FAULT_COLORS.items():
        ax.plot([], [], color=color, label=kind)
    ax.set_xlabel("seconds since the first worker started")
    ax.set_ylabel("subscribers")
    ax.set_title(f"{fleet['backend']}: subscribers around each fault (simulator's records)")
    ax.legend(fontsize=7, loc="lower left", ncols=5)
