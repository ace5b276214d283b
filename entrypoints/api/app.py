"""EventApi: HTTP semantics over the EventRouter use case, shared by the Lambda handler and the
local API. Status codes: 202 a command changed something, 200 it repeated what was already so
(or a read), 400 bad input (nothing is written), 404 unknown route or connection, 405 wrong
method (with Allow), 409 START of a running connection with another URL, 413 body too large,
503 the store is unreachable (with Retry-After). Anything else is a bug: logged with its
stack trace, answered 500 without one."""

import logging
import time

from application.errors import StoreUnavailable
from application.ports import Clock
from application.router import CommandOutcome, EventRouter
from application.url_policy import ForbiddenUrl
from domain import ConnectionConflict, ConnectionNotFound, InvalidCommand
from entrypoints.api import payloads, routes
from entrypoints.api.http import RETRY_AFTER_S, ApiError, HttpRequest, HttpResponse, error_response
from entrypoints.api.views import connection_view, event_view
from entrypoints.logging_setup import bind

log = logging.getLogger(__name__)


class EventApi:
    def __init__(self, router: EventRouter, clock: Clock) -> None:
        self._router = router
        self._clock = clock

    async def handle(self, request: HttpRequest) -> HttpResponse:
        began = time.perf_counter()
        fields: dict[str, object] = {}  # the access log's extras; the connection id once known
        with bind(request_id=request.request_id):
            response = await self._respond(request, fields)
            fields["status"] = response.status
            fields["ms"] = round(1000 * (time.perf_counter() - began))
            log.info(
                "%s %s -> %d",
                request.method[:16],
                request.path[:256],
                response.status,
                extra=fields,
            )
            return response

    async def _respond(self, request: HttpRequest, fields: dict[str, object]) -> HttpResponse:
        rid = request.request_id
        try:
            payloads.check_size(request.body)
            route = routes.match(request.method, request.path)
            return await self._dispatch(route, request, fields)
        except ApiError as exc:
            return error_response(exc.status, exc.code, exc.message, rid, exc.headers)
        except (InvalidCommand, ForbiddenUrl) as exc:
            code = "forbidden_url" if isinstance(exc, ForbiddenUrl) else "invalid_request"
            return error_response(400, code, str(exc), rid)
        except ConnectionNotFound as exc:
            return error_response(404, "not_found", str(exc), rid)
        except ConnectionConflict as exc:
            return error_response(409, "conflict", str(exc), rid)
        except StoreUnavailable as exc:
            log.warning("store unavailable: %s", exc)
            return error_response(
                503,
                "service_unavailable",
                "the connection store is unavailable; retry later",
                rid,
                {"Retry-After": str(RETRY_AFTER_S)},
            )
        except Exception:
            # The one broad catch: a bug must not leak a stack trace to the caller.
            log.exception("unhandled error")
            return error_response(500, "internal_error", "internal error", rid)

    async def _dispatch(
        self, route: routes.Match, request: HttpRequest, fields: dict[str, object]
    ) -> HttpResponse:
        cid = route.connection_id or ""
        if route.template == routes.EVENTS:
            event = payloads.parse_event(request.body)
            fields["connection_id"] = event.connection_id[:128]
            with bind(connection_id=event.connection_id[:128]):
                if event.event_type == "START":
                    assert event.ws_url is not None
                    return self._outcome(
                        await self._router.start(event.connection_id, event.ws_url)
                    )
                return self._outcome(await self._router.stop(event.connection_id))
        fields["connection_id"] = cid[:128]
        with bind(connection_id=cid[:128]):
            if route.template == routes.CONNECTION and request.method.upper() == "PUT":
                ws_url = payloads.parse_start(request.body)
                return self._outcome(await self._router.start(cid, ws_url))
            if route.template == routes.STOP:
                return self._outcome(await self._router.stop(cid))
            if route.template == routes.CONNECTION:
                conn = await self._router.get(cid)
                if conn is None:
                    raise ConnectionNotFound(f"connection {cid!r} was never started")
                sessions = await self._router.owner_session(conn)
                return HttpResponse(200, connection_view(conn, self._clock.now_ms(), sessions))
            events = await self._router.history(cid)
            if not events:
                raise ConnectionNotFound(f"connection {cid!r} was never started")
            return HttpResponse(
                200, {"connection_id": cid, "events": [event_view(e) for e in events]}
            )

    def _outcome(self, outcome: CommandOutcome) -> HttpResponse:
        body = {
            "result": "accepted" if outcome.changed else "unchanged",
            "connection": connection_view(
                outcome.connection, self._clock.now_ms(), outcome.sessions
            ),
        }
        return HttpResponse(202 if outcome.changed else 200, body)
