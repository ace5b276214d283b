"""`wsfleet status`'s table of worker sessions: a shutting-down worker's session (its renews
report a capacity of 0) is shown as leaving while it lives, and as its status says after."""

from rich.console import Console

from domain import LEAVING_CAPACITY, WorkerSession
from entrypoints.cli.tables import sessions_table

NOW = 100_000


def rows(*sessions: WorkerSession) -> list[str]:
    console = Console(record=True, width=200)
    console.print(sessions_table(sessions, NOW, {}))
    return console.export_text().splitlines()


def test_a_leaving_session_is_shown_as_leaving_while_it_lives() -> None:
    staying = WorkerSession("w1#1", 1, expires_at_ms=NOW + 2_000, capacity=100)
    leaving = WorkerSession("w2#1", 1, expires_at_ms=NOW + 2_000, capacity=LEAVING_CAPACITY)
    ended = WorkerSession(
        "w3#1", 1, expires_at_ms=NOW + 2_000, capacity=LEAVING_CAPACITY, ended_reason="shutdown"
    )

    lines = rows(staying, leaving, ended)

    row = {line.split()[0]: line for line in lines if line.strip().startswith("w")}
    assert "leaving" not in row["w1#1"]
    assert "live (leaving)" in row["w2#1"]
    assert "in 2.0s" in row["w2#1"]
    assert "ended (shutdown)" in row["w3#1"]
    assert "leaving" not in row["w3#1"]
