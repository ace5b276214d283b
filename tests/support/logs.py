"""Keep a test's logging setup (entrypoints call setup_logging, which replaces the root
logger's handlers and levels) from leaking into the tests that run after it."""

import contextlib
import logging
from collections.abc import Iterator

from entrypoints.logging_setup import QUIET_LIBRARIES


@contextlib.contextmanager
def preserved_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    libraries = {name: logging.getLogger(name).level for name in QUIET_LIBRARIES}
    try:
        yield
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)
        for name, library_level in libraries.items():
            logging.getLogger(name).setLevel(library_level)
