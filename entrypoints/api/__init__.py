"""The event API (START/STOP/GET/history over HTTP), independent of how requests arrive. The
names below are imported when first used (adapters/lazy.py): `status` and `history` render
the API's views without loading the API."""

from typing import TYPE_CHECKING

from adapters.lazy import exports

if TYPE_CHECKING:
    from entrypoints.api.app import EventApi
    from entrypoints.api.http import MAX_BODY_BYTES, HttpRequest, HttpResponse

__all__ = ["MAX_BODY_BYTES", "EventApi", "HttpRequest", "HttpResponse"]

if not TYPE_CHECKING:  # mypy reads the imports above, and refuses any other name
    __getattr__ = exports(
        __name__,
        {
            "EventApi": "app",
            "MAX_BODY_BYTES": "http",
            "HttpRequest": "http",
            "HttpResponse": "http",
        },
    )
