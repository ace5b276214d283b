"""The benchmark runner works end to end (`python -m bench --quick`): a simulator process and
a capacity worker process, a table, a JSON file. Nothing here judges speed: the figures
themselves are `make bench`'s business (bench/RESULTS.md)."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_quick_capacity_run_reports_every_connection_streaming(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--only", "capacity", "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "connections sustained" in done.stdout
    results = json.loads((tmp_path / "results.json").read_text())
    (run,) = results["capacity"]
    (step,) = run["steps"]
    assert step["streaming"] == step["target"] == 20, step
    assert step["stored"] > 0, step
    assert results["machine"]["nproc"] >= 1
