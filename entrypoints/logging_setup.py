"""One JSON object per log line, for CloudWatch Logs Insights and any log pipeline.

Every record carries its `extra={...}` fields (connection_id, worker_id, token, ...) and the
fields bound to the current context with `bind(...)` (request id, worker id): contextvars
follow each asyncio task, so concurrent requests and sessions never mix their ids. Third-party
loggers (botocore, aiobotocore, websockets) go through the same handler, at WARNING.
"""

import contextlib
import contextvars
import json
import logging
import sys
import time
import traceback
from collections.abc import Iterator
from typing import Any, TextIO

_context: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "wsfleet_log_context", default=None
)
_process_fields: dict[str, Any] = {}
# Attributes every LogRecord has; anything else on a record came from `extra=`.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}
QUIET_LIBRARIES = ("botocore", "aiobotocore", "aioboto3", "urllib3", "websockets", "asyncio")


@contextlib.contextmanager
def bind(**fields: Any) -> Iterator[None]:
    """Add `fields` to every log line written in this context (and tasks it creates)."""
    token = _context.set({**(_context.get() or {}), **fields})
    try:
        yield
    finally:
        _context.reset(token)


def bind_globally(**fields: Any) -> None:
    """Fields for the rest of the process (service name, worker id), set once at start-up.
    Process-wide rather than per context: the event loop's own records (asyncio's debug
    warnings, callbacks) run outside every task's context and must carry them too."""
    _process_fields.update(fields)


# Characters json.dumps(ensure_ascii=False) writes raw that readers split lines on: U+2028/2029
# (JavaScript, Python's str.splitlines) and the C1 controls, NEL U+0085 among them. Upstream
# text and URLs reach log lines, so one of these could forge a line. They only ever occur
# inside JSON strings, where the \uXXXX escape means the same character.
_LINE_BREAKERS = {c: f"\\u{c:04x}" for c in (*range(0x80, 0xA0), 0x2028, 0x2029)}


class JsonFormatter(logging.Formatter):
    @staticmethod
    def converter(seconds: float | None) -> time.struct_time:
        return time.gmtime(seconds)  # UTC timestamps, whatever the host's zone

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        line.update(_process_fields)
        line.update(_context.get() or {})
        line.update({k: v for k, v in vars(record).items() if k not in _STANDARD})
        if record.exc_info and record.exc_info[0] is not None:
            line["exception"] = "".join(traceback.format_exception(*record.exc_info)).rstrip()
        return json.dumps(line, default=str, ensure_ascii=False).translate(_LINE_BREAKERS)


class _StdoutHandler(logging.StreamHandler[TextIO]):
    """Writes to whatever sys.stdout is at the time (a harness may have replaced it)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stdout
        super().emit(record)


def setup_logging(level: str = "INFO", stream: TextIO | None = None) -> None:
    """Route every logger through one JSON handler (replacing what a runtime installed, such as
    the Lambda runtime's own handler), wsfleet at `level`, libraries at WARNING."""
    handler = logging.StreamHandler(stream) if stream else _StdoutHandler(sys.stdout)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level)
    for name in QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(max(logging.WARNING, _LEVELS[level]))


_LEVELS = logging.getLevelNamesMapping()
