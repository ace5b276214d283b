"""The upstream simulator on its own: streams, replay window, records, control endpoints.
A plain websockets client plays the subscriber, so these tests do not depend on the adapter."""

import asyncio
import json
import signal
import sys
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from entrypoints.simulator import CLOSE_GONE, UpstreamSimulator
from tests.support.simulator import http, simulator

__all__ = ["simulator"]


async def receive(ws: ClientConnection, count: int) -> list[dict[str, Any]]:
    return [json.loads(await ws.recv()) for _ in range(count)]


async def receive_all(ws: ClientConnection) -> tuple[list[int], int | None]:
    """Every seq until the server closes, and the close code it sent."""
    seqs = []
    try:
        async for raw in ws:
            seqs.append(json.loads(raw)["seq"])
    except ConnectionClosed:
        pass
    return seqs, ws.close_code


async def test_stream_emits_numbered_messages_from_seq_1(simulator: UpstreamSimulator) -> None:
    async with connect(simulator.url("s1", from_seq=1)) as ws:
        messages = await receive(ws, 5)

    assert messages == [{"seq": n, "data": f"s1:{n}"} for n in range(1, 6)]


async def test_stream_advances_with_nobody_connected_and_new_subscribers_start_from_now(
    simulator: UpstreamSimulator,
) -> None:
    assert simulator.create_stream("live")
    await asyncio.sleep(0.1)  # about 10 messages at 100/s
    emitted = simulator.emitted("live")
    async with connect(simulator.url("live")) as ws:
        (first,) = await receive(ws, 1)

    assert emitted >= 5
    assert first["seq"] > emitted - 1


async def test_replay_serves_the_window_and_closes_with_gone_before_it() -> None:
    async with UpstreamSimulator(rate=200.0, buffer_size=10) as sim:
        sim.create_stream("w")
        await asyncio.sleep(0.15)  # about 30 emitted, seqs 1..~20 out of the window
        sim.end_stream("w")  # freezes the window, so the test does not race the clock
        record = sim.record("w")
        oldest, emitted = record["oldest_retained"], record["emitted"]
        async with connect(sim.url("w", from_seq=oldest)) as ws:
            replayed, replay_code = await receive_all(ws)
        async with connect(sim.url("w", from_seq=oldest - 1)) as ws:
            _, gone_code = await receive_all(ws)

    assert oldest == emitted - 10 + 1 > 1
    assert replayed == list(range(oldest, emitted + 1))
    assert (replay_code, gone_code) == (1000, CLOSE_GONE)
    assert sim.record("w")["connections"][-1]["server_action"] == "gone"


async def test_records_every_connect_and_disconnect_and_the_peak(
    simulator: UpstreamSimulator,
) -> None:
    async with connect(simulator.url("r")) as a, connect(simulator.url("r", from_seq=1)) as b:
        await receive(a, 1)
        await receive(b, 1)
        during = simulator.record("r")
    await simulator.wait_for_subscribers("r", 0)
    after = simulator.record("r")

    assert (during["subscribers"], during["peak_subscribers"]) == (2, 2)
    assert (after["subscribers"], after["peak_subscribers"], after["connects"]) == (0, 2, 2)
    first, second = after["connections"]
    assert second["from_seq"] == 1
    assert second["first_seq"] == 1
    assert first["from_seq"] is None
    for c in (first, second):
        assert c["connected_at_ms"] <= c["disconnected_at_ms"]
        assert c["close_code"] == 1000
        assert c["server_action"] is None
        assert c["sent"] >= 1
        assert c["last_seq"] == c["first_seq"] + c["sent"] - 1
    assert after["sent"] == first["sent"] + second["sent"]
    assert after["emitted"] >= after["oldest_retained"] == 1


async def test_connection_records_are_bounded() -> None:
    async with UpstreamSimulator(max_records_per_stream=3) as sim:
        for _ in range(5):
            async with connect(sim.url("b")):
                await sim.wait_for_subscribers("b", 1)
        await sim.wait_for_subscribers("b", 0)
        record = sim.record("b")

    assert record["connects"] == 5
    assert record["peak_subscribers"] == 1  # one after the other, never two at once
    assert [c["number"] for c in record["connections"]] == [3, 4, 5]


async def test_end_over_http_sends_everything_due_then_closes_normally(
    simulator: UpstreamSimulator,
) -> None:
    async with connect(simulator.url("m", from_seq=1)) as ws:
        await receive(ws, 2)
        status, record = await http(simulator, "POST", "/streams/m/end")
        seqs, code = await receive_all(ws)

    assert status == 200
    assert record["ended"]
    assert [1, 2, *seqs] == list(range(1, record["emitted"] + 1))
    assert code == 1000
    await asyncio.sleep(0.3)
    assert simulator.emitted("m") == record["emitted"]  # an ended stream stops emitting


async def test_total_caps_the_stream_then_ends_it_normally(simulator: UpstreamSimulator) -> None:
    async with connect(simulator.url("t", total=4, from_seq=1)) as ws:
        seqs, code = await receive_all(ws)
    async with connect(simulator.url("t", from_seq=3)) as ws:
        replay, _ = await receive_all(ws)

    assert (seqs, code, replay) == ([1, 2, 3, 4], 1000, [3, 4])
    record = simulator.record("t")
    assert record["ended"]
    assert record["total"] == 4
    assert record["emitted"] == 4


async def test_refuse_path_answers_403(simulator: UpstreamSimulator) -> None:
    with pytest.raises(InvalidStatus) as refused:
        async with connect(simulator.url("x", path="refuse")):
            pass

    assert refused.value.response.status_code == 403


async def test_flaky_path_aborts_connections_without_a_close_frame(
    simulator: UpstreamSimulator,
) -> None:
    async with connect(simulator.url("f", path="flaky", drop_after=0.1)) as ws:
        seqs, code = await receive_all(ws)
    await simulator.wait_for_subscribers("f", 0)

    assert seqs
    assert code == 1006
    assert simulator.record("f")["connections"][0]["server_action"] == "flaky"


async def test_drop_over_http_aborts_the_subscribers(simulator: UpstreamSimulator) -> None:
    async with connect(simulator.url("d")) as ws:
        await receive(ws, 1)
        status, body = await http(simulator, "POST", "/streams/d/drop")
        _, code = await receive_all(ws)

    assert (status, body, code) == (200, {"dropped": 1}, 1006)


async def test_http_endpoints_create_and_report_streams(simulator: UpstreamSimulator) -> None:
    created = await http(simulator, "POST", "/streams/c?rate=7&total=3")
    again = await http(simulator, "POST", "/streams/c")
    one = await http(simulator, "GET", "/records/c")
    every = await http(simulator, "GET", "/records")

    assert created[0] == 201
    assert created[1]["rate"] == 7.0
    assert created[1]["total"] == 3
    assert again[0] == 200
    assert one[0] == 200
    assert one[1]["stream_id"] == "c"
    assert every[0] == 200
    assert set(every[1]["streams"]) == {"c"}
    assert await http(simulator, "GET", "/health") == (200, "ok\n")


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/records/unknown", 404),
        ("POST", "/streams/unknown/end", 404),
        ("GET", "/streams/c/end", 405),
        ("POST", "/records", 405),
        ("GET", "/nowhere", 404),
        ("POST", "/streams/c?rate=fast", 400),
        ("POST", "/streams/c?total=0", 400),
        ("GET", "/stream/c?from_seq=-1", 400),
        ("GET", "/stream/bad$id", 400),
    ],
)
async def test_http_errors(
    simulator: UpstreamSimulator, method: str, path: str, status: int
) -> None:
    assert (await http(simulator, method, path))[0] == status


async def test_unknown_streams_are_404_when_auto_create_is_off() -> None:
    async with UpstreamSimulator(auto_create=False) as sim:
        with pytest.raises(InvalidStatus) as unknown:
            async with connect(sim.url("nope")):
                pass
        sim.create_stream("yes", rate=50.0)
        async with connect(sim.url("yes", from_seq=1)) as ws:
            (first,) = await receive(ws, 1)

    assert unknown.value.response.status_code == 404
    assert first["seq"] == 1


async def test_runs_as_a_process_and_stops_on_sigterm() -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "entrypoints.simulator",
        "--port",
        "0",
        "--rate",
        "50",
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    try:
        line = (await asyncio.wait_for(process.stdout.readline(), 20)).decode()
        url = line.rsplit(" ", 1)[-1].strip()
        async with connect(f"{url}/stream/p?from_seq=1") as ws:
            messages = await receive(ws, 2)
        process.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(process.wait(), 10)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()

    assert url.startswith("ws://127.0.0.1:")
    assert [m["seq"] for m in messages] == [1, 2]
    assert code == 0


@pytest.mark.parametrize(("from_seq", "sent"), [(1, [1, 2, 3, 4, 5, 5]), (6, [6, 6]), (8, [8, 8])])
async def test_a_replay_with_other_content_repeats_a_seq_this_connection_sent(
    simulator: UpstreamSimulator, from_seq: int, sent: list[int]
) -> None:
    """A worker that resumed past a seq drops its replay without comparing (admission.py), so a
    connection resumed past the first five replays a seq it sent itself, or the fault is never
    seen (the hostile suite's flake: a move between seq 5 and seq 6)."""
    url = f"{simulator.base_url}/hostile/replay-different/r?from_seq={from_seq}"
    async with connect(url) as ws:
        messages = await receive(ws, len(sent))

    assert [m["seq"] for m in messages] == sent
    assert messages[-1]["data"] == "other content"
    assert [m["data"] for m in messages[:-1]] == [f"r:{n}" for n in sent[:-1]]
