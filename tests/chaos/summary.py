"""The chaos summary printed at the end of a test session (faults injected, invariant checks,
worst recovery per fault), from every chaos run of the session. Under pytest-xdist (`make
test` runs the chaos tests on a worker) each worker sends its totals to the controller, which
prints them: tests/conftest.py wires the hooks, since the controller loads only that one."""

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tests.chaos.scenarios import Outcome

OUTCOMES: list["Outcome"] = []  # this process's runs (the chaos_outcomes fixture's list)


def totals(outcomes: list["Outcome"]) -> dict[str, Any]:
    """What the summary shows, in a form an xdist worker can send to the controller."""
    return merged(
        [
            {
                "runs": 1,
                "failed": int(not o.ok),
                "backends": [o.backend],
                "checks": o.stats.checks + o.verdict.checks,
                "faults": o.stats.faults,
                "recoveries": o.stats.recoveries,
                "stream_copies": o.stats.duplicates,
                "stream_replayed": o.stats.replayed,
                "moves": o.stats.moves,
            }
            for o in outcomes
        ]
    )


def merged(parts: list[dict[str, Any]]) -> dict[str, Any]:
    faults: dict[str, int] = {}
    recoveries: dict[str, list[float]] = {}
    moves: dict[str, dict[str, int]] = {}
    for part in parts:
        for kind, counts in part.get("moves", {}).items():
            total = moves.setdefault(kind, {"moved": 0, "moved_twice": 0, "most": 0})
            total["moved"] += counts["moved"]
            total["moved_twice"] += counts["moved_twice"]
            total["most"] = max(total["most"], counts["most"])
        for kind, n in part["faults"].items():
            faults[kind] = faults.get(kind, 0) + n
        for kind, seconds in part["recoveries"].items():
            recoveries.setdefault(kind, []).extend(seconds)
    return {
        "runs": sum(p["runs"] for p in parts),
        "failed": sum(p["failed"] for p in parts),
        "backends": sorted({b for p in parts for b in p["backends"]}),
        "checks": sum(p["checks"] for p in parts),
        "faults": faults,
        "recoveries": recoveries,
        "stream_copies": sum(p.get("stream_copies", 0) for p in parts),
        "stream_replayed": sum(p.get("stream_replayed", 0) for p in parts),
        "moves": moves,
    }


def write(terminalreporter: pytest.TerminalReporter, parts: list[dict[str, Any]]) -> None:
    """The summary of `parts` (this process's totals and the workers'), if any run."""
    parts = [p for p in parts if p["runs"]]
    if not parts:
        return
    total = merged(parts)
    faults, recoveries = total["faults"], total["recoveries"]
    line = terminalreporter.write_line
    terminalreporter.section("chaos summary")
    line(f"runs: {total['runs']} ({', '.join(total['backends'])}), failed: {total['failed']}")
    line(f"faults injected: {sum(faults.values())}, invariant checks: {total['checks']}")
    if total["stream_copies"] or total["stream_replayed"]:
        line(
            f"copies in a stream sink: {total['stream_copies']}, of "
            f"{total['stream_replayed']} seqs replayed after a checkpoint"
        )
    for kind in sorted(faults):
        line(f"  {faults[kind]:5d} x {kind}")
    if total["moves"]:
        line("moves per fault (of the connections the worker held):")
        for kind, m in sorted(total["moves"].items()):
            twice, most = m["moved_twice"], m["most"]
            line(f"  {kind}: {m['moved']} held, {twice} moved more than once (most {most})")
    line("recovery (worst observed, seconds; n = times measured):")
    for kind in sorted(recoveries):
        seconds = recoveries[kind]
        line(f"  {max(seconds, default=0.0):6.2f}  {kind} (n={len(seconds)})")
