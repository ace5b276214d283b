"""`python -m bench --only scale`: the simulation as a bench suite, its command line (issue
31's `--workers N --connections M --scenario NAME --seed S --json PATH`) and its verdicts."""

import json
from pathlib import Path

from bench.__main__ import parse_args
from bench.scale import render, run_scale, verdict
from bench.sim.fleet import SimSize


def test_the_scale_command_line_reads_the_size_the_scenarios_the_seed_and_the_json_path() -> None:
    args = parse_args(
        [
            *("--only", "scale", "--workers", "300", "--connections", "30000"),
            *("--scenario", "az-loss,deploy", "--seed", "7", "--json", "out/scale.json"),
        ]
    )

    assert (args.workers, args.scale_connections, args.seed) == (300, 30_000, 7)
    assert args.scenario == ["az-loss", "deploy"]
    assert args.json == Path("out/scale.json")


def test_connections_keep_their_meaning_for_the_fleet_suite() -> None:
    assert parse_args([]).fleet["connections"] == 36
    assert parse_args([]).scale_connections == 200
    assert parse_args(["--connections", "12"]).fleet["connections"] == 12


async def test_a_small_run_writes_its_figures_and_is_judged(tmp_path: Path) -> None:
    path = tmp_path / "scale.json"
    results = await run_scale(
        SimSize(10, 200), ["az-loss"], settle_s=10, window_s=20, json_path=path, plot_dir=None
    )

    assert json.loads(path.read_text())[0]["scenario"] == "az-loss"
    assert "| 10 x 200 | az-loss |" in render(results)
    assert verdict(results[0]) == "ok"


def test_a_miss_is_named() -> None:
    figures = {
        "scenario": "az-loss",
        "two_owners": 1,
        "not_streaming_at_end": 0,
        "orphans_streaming_again_s": {"p99": 12.5},
        "moves_per_moved_connection_max": 2,
        "hottest_keys": [{"share_of_limit": 0.6}],
    }

    assert verdict(figures) == "TWO OWNERS, p99 > 10 s, moved twice, key > 50 %"
