"""`wsfleet demo --quick` (what `make demo` runs, shortened) on every backend and with the
Kinesis sink: it finishes by itself, ends every process it started, and its own summary,
computed from the simulator's records and the sink, reports no loss, one subscriber at a time,
and no duplicate (a table) or only copies of what the upstream replayed (a stream, read back
by the consumer rule)."""

import json
import os
from pathlib import Path
from typing import Any

import pytest

from entrypoints.devstack.postgres import locate
from tests.e2e.cli_process import run_cli
from tests.support.postgres import missing_server


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# Judged on end-of-stream checkpoints and takeover times across five processes: under two
# xdist workers on a loaded machine (load 9) one run of three saw "not ended cleanly
# (checkpoint 85, emitted 86)", so it runs with the `serial` tests (Makefile, `test`).
@pytest.mark.serial
@pytest.mark.parametrize(
    ("backend", "sink"),
    [("embedded", "sqlite"), ("aws", "dynamodb"), ("aws", "kinesis"), ("postgres", "postgres")],
)
def test_quick_demo_reports_no_loss_no_duplicate_and_one_owner_at_a_time(
    tmp_path: Path, backend: str, sink: str
) -> None:
    if backend == "postgres" and isinstance(missing := locate(), str):
        missing_server(missing)
    # aws: the demo starts (and warms up) its own DynamoDB Local, 20-30 s on a loaded machine.
    argv = ["demo", "--quick", "--json", "--backend", backend, "--sink", sink]
    result = run_cli(argv, tmp_path, timeout_s=240)

    assert result.returncode == 0, result.stderr[-3000:]
    summary: dict[str, Any] = json.loads(result.stdout)
    assert summary["ok"], summary["violations"]
    assert summary["sink"] == sink
    totals = summary["totals"]
    assert totals["lost"] == 0
    if sink == "kinesis":  # the crash's replay is put again; the reader keeps one per seq
        assert totals["duplicated"] <= totals["redelivered_by_upstream"]
    else:
        assert totals["duplicated"] == 0
    assert totals["max_peak_subscribers"] == 1
    assert totals["stored"] == totals["emitted"] > 0
    for kind in ("crash", "handoff"):
        assert summary["takeover"][kind]["count"] >= 1, kind
    assert {p["name"] for p in summary["processes"]} >= {"simulator", "api", "w1", "w2", "w3"}
    assert not [p for p in summary["processes"] if alive(p["pid"])]
    assert "OK: every invariant held" in result.stderr
