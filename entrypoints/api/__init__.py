"""The event API (START/STOP/GET/history over HTTP), independent of how requests arrive."""

from entrypoints.api.app import EventApi
from entrypoints.api.http import MAX_BODY_BYTES, HttpRequest, HttpResponse

__all__ = ["MAX_BODY_BYTES", "EventApi", "HttpRequest", "HttpResponse"]
