"""Plain HTTP on the simulator's port: records for judges, knobs for tests and chaos.

GET  /health                  "ok"
GET  /records                 {"streams": {"<id>": <record>, ...}}
GET  /records/<id>            <record>                                  (404 if unknown)
POST /streams/<id>            create (?rate=R&total=N); 201, or 200 if it existed
POST /streams/<id>/end        end the stream normally (subscribers get the rest, then 1000)
POST /streams/<id>/drop       abort every subscriber's TCP connection; {"dropped": n}
"""

import json
from typing import TYPE_CHECKING, Any

from websockets.asyncio.server import ServerConnection
from websockets.http11 import Response

from entrypoints.simulator.routes import BadRequest, parse_creation, stream_id
from entrypoints.simulator.streams import StreamLimitReached

if TYPE_CHECKING:
    from entrypoints.simulator.server import UpstreamSimulator


def respond(
    sim: "UpstreamSimulator",
    ws: ServerConnection,
    method: str,
    segments: list[str],
    query: dict[str, str],
) -> Response:
    try:
        return _route(sim, ws, method, segments, query)
    except BadRequest as exc:
        return _json(ws, 400, {"error": str(exc)})
    except KeyError:
        return _json(ws, 404, {"error": "unknown stream"})


def _route(
    sim: "UpstreamSimulator",
    ws: ServerConnection,
    method: str,
    segments: list[str],
    query: dict[str, str],
) -> Response:
    match segments:
        case ["health"]:
            return _expect(ws, method, "GET") or ws.respond(200, "ok\n")
        case ["records"]:
            return _expect(ws, method, "GET") or _json(ws, 200, {"streams": sim.records()})
        case ["records", sid]:
            return _expect(ws, method, "GET") or _json(ws, 200, sim.record(stream_id(sid)))
        case ["streams", sid]:
            if wrong := _expect(ws, method, "POST"):
                return wrong
            rate, total = parse_creation(query)
            try:
                created = sim.create_stream(stream_id(sid), rate, total)
            except StreamLimitReached as exc:
                return _json(ws, 503, {"error": str(exc)})
            return _json(ws, 201 if created else 200, sim.record(sid))
        case ["streams", sid, "end"]:
            if wrong := _expect(ws, method, "POST"):
                return wrong
            sim.end_stream(stream_id(sid))
            return _json(ws, 200, sim.record(sid))
        case ["streams", sid, "drop"]:
            if wrong := _expect(ws, method, "POST"):
                return wrong
            sim.record(stream_id(sid))  # KeyError -> 404 for an unknown stream
            return _json(ws, 200, {"dropped": sim.drop_subscribers(sid)})
    return _json(ws, 404, {"error": "not found"})


def _expect(ws: ServerConnection, method: str, allowed: str) -> Response | None:
    if method == allowed:
        return None
    response = _json(ws, 405, {"error": f"use {allowed}"})
    response.headers["Allow"] = allowed
    return response


def _json(ws: ServerConnection, status: int, body: Any) -> Response:
    response = ws.respond(status, json.dumps(body) + "\n")
    del response.headers["Content-Type"]  # respond() set text/plain; headers are multi-valued
    response.headers["Content-Type"] = "application/json"
    return response
