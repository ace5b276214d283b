"""The demo's closing table (entrypoints/demo/report.py) on a judged run made up here: every
connection's takeover cell says how it moved, or that it never did, and the legend says why
crash takeovers fall in two clusters."""

from rich.console import Console

from domain import LeaseAcquired, LeaseReleased, LeaseTakenOver
from entrypoints.demo.judge import (
    ConnectionResult,
    Move,
    Rebalanced,
    Summary,
    Takeover,
    rebalances,
    takeovers,
)
from entrypoints.demo.report import print_summary

T = 1_700_000_000_000
SIGNAL = T + 10_000


def result(cid: str) -> ConnectionResult:
    return ConnectionResult(
        connection_id=cid,
        emitted=10,
        stored=10,
        lost=0,
        duplicated=0,
        beyond_emitted=0,
        checkpoint=10,
        peak_subscribers=1,
        connects=2,
        resent=0,
        redelivered=0,
        copies_beyond_replay=0,
        rewrites=0,
        ended=True,
    )


def rendered(summary: Summary) -> str:
    console = Console(record=True, width=240)
    print_summary(console, summary)
    return console.export_text()


def cells(text: str) -> dict[str, str]:
    """connection -> its takeover cell, from the table's rows."""
    rows = [line for line in text.splitlines() if line.startswith("c-")]
    return {row.split("│")[0].strip(): row.split("│")[-1].strip() for row in rows}


def test_every_takeover_cell_says_how_the_connection_moved_or_that_it_never_did() -> None:
    crash = Move("crash", "w1", SIGNAL, ("c-hint", "c-waited"), -9, replacement="w4")
    handoff = Move("handoff", "w2", SIGNAL + 9_000, ("c-hint",), 0)
    summary = Summary(
        "embedded",
        [result(c) for c in ("c-balanced", "c-hint", "c-stayed", "c-waited")],
        [
            (
                crash,
                [
                    Takeover("c-hint", 40, "LeaseTakenOver", "w2"),
                    Takeover("c-waited", 1_400, "LeaseTakenOver", "w4"),
                ],
            ),
            (handoff, [Takeover("c-hint", 100, "LeaseAcquired", "w3")]),
        ],
        [],
        [Rebalanced("c-balanced", SIGNAL + 4_000, 120)],
    )

    shown = cells(rendered(summary))

    assert shown == {
        "c-balanced": "balance 0.12s",
        "c-hint": "crash 0.04s (survivor), handoff 0.10s",
        "c-stayed": "-",
        "c-waited": "crash 1.40s (replacement)",
    }


def test_the_legend_says_what_the_column_and_the_two_crash_clusters_are() -> None:
    text = rendered(Summary("embedded", [result("c-stayed")], [], []))

    assert "- : never moved" in text
    assert "(survivor): a survivor with room took it from the hint" in text
    assert "(replacement): the survivors were full" in text
    assert "that cluster is the new process's start-up, not a lease running out" in text


def test_a_release_for_balance_is_timed_to_the_next_connect_and_other_releases_are_not() -> None:
    histories = {
        "c1": [
            LeaseAcquired(connection_id="c1", version=2, at_ms=T, owner="a#1", token=1),
            LeaseReleased(
                connection_id="c1",
                version=3,
                at_ms=T + 500,
                owner="a#1",
                token=1,
                checkpoint_seq=4,
                reason="rebalance",
            ),
            LeaseAcquired(connection_id="c1", version=4, at_ms=T + 560, owner="b#1", token=2),
            LeaseReleased(
                connection_id="c1",
                version=5,
                at_ms=T + 900,
                owner="b#1",
                token=2,
                checkpoint_seq=9,
                reason="shutdown",
            ),
        ]
    }
    streams = {"c1": {"connections": [{"connected_at_ms": T}, {"connected_at_ms": T + 620}]}}

    assert rebalances(streams, histories) == [Rebalanced("c1", T + 500, 120)]


def test_a_takeover_names_the_worker_that_took_it() -> None:
    move = Move("crash", "w1", SIGNAL, ("c1",), -9, replacement="w4")
    taken = LeaseTakenOver(
        connection_id="c1",
        version=4,
        at_ms=SIGNAL + 30,
        owner="w4-0badcafe#1",
        token=2,
        previous_owner="a#1",
        previous_token=1,
    )
    streams = {"c1": {"connections": [{"connected_at_ms": SIGNAL + 35}]}}

    assert takeovers(move, streams, {"c1": [taken]}) == [Takeover("c1", 35, "LeaseTakenOver", "w4")]
