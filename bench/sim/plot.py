"""The simulation's PNGs: per size, for each scenario run (the AZ loss and the rolling deploy
above all), the connections not streaming over the fault's window in virtual seconds, and
the acquisitions granted and refused each second beneath.

`python -m bench.sim.plot SIM_JSON OUT_DIR` draws them again from a run's sim.json."""

import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

PLOTTED = ("az-loss", "deploy")


def draw_all(results: list[dict[str, Any]], out: Path) -> list[Path]:
    """One PNG per size, `sim-<workers>x<connections>.png` in `out`; returns their paths."""
    by_size: defaultdict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for figures in results:
        if figures["scenario"] in PLOTTED:
            by_size[figures["workers"], figures["connections"]].append(figures)
    paths = []
    for (workers, connections), runs in sorted(by_size.items()):
        path = out / f"sim-{workers}x{connections}.png"
        draw(runs, path, f"{workers} workers x {connections:,} connections")
        paths.append(path)
    return paths


def draw(runs: list[dict[str, Any]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(
        2,
        len(runs),
        figsize=(6.5 * len(runs), 6.5),
        squeeze=False,
        layout="constrained",
        height_ratios=(2, 1),
    )
    for col, figures in enumerate(runs):
        _unowned(axes[0][col], figures)
        _acquires(axes[1][col], figures)
    fig.suptitle(f"Simulation (virtual time): {title}")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)


def _unowned(ax: Any, figures: dict[str, Any]) -> None:
    series = figures["unowned_series"]
    ax.step([s for s, _ in series], [n for _, n in series], where="post", color="black")
    again, gap = figures["streaming_again_s"], figures["unowned_gap_s"]
    if figures["scenario"] == "az-loss" and again["p99"] is not None:
        # From the kill: the target's measure. A deploy's moves start all along its waves.
        ax.axvline(again["p99"], color="tab:orange", linestyle="--", label=f"p99 {again['p99']} s")
        ax.axvline(10.0, color="tab:red", linestyle=":", label="target 10 s")
    ax.plot([], [], " ", label=f"each move's gap p99 {gap['p99']} s, {figures['moves']} moves")
    ax.set_title(f"{figures['scenario']}: {'; '.join(figures['notes'])}", fontsize=8)
    ax.set_ylabel("connections not streaming")
    ax.legend(fontsize=7)


def _acquires(ax: Any, figures: dict[str, Any]) -> None:
    rows = figures.get("acquires_per_s", [])
    xs = [s for s, _, _ in rows]
    ax.bar(xs, [g for _, g, _ in rows], width=0.9, color="tab:green", label="granted")
    ax.bar(
        xs,
        [r for _, _, r in rows],
        width=0.9,
        bottom=[g for _, g, _ in rows],
        color="tab:gray",
        label="refused",
    )
    ax.set_xlabel("virtual seconds since the fault")
    ax.set_ylabel("acquisitions / s")
    ax.legend(fontsize=7)


if __name__ == "__main__":
    for drawn in draw_all(json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2])):
        print(drawn)
