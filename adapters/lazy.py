"""A package's re-exports, imported when first used (PEP 562's module `__getattr__`).

`adapters.websocket.WebSocketOptions` and `from adapters.sqs import SqsNotificationQueue` keep
working, but importing one light module of a package (its schema, its options) no longer
imports the rest of it and the client library behind it: the settings table reads such
constants, and the read-only commands must not pay for websockets, the SQS queue or CloudWatch
(tests/e2e/test_cli_import_path.py).
"""

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def exports(package: str, modules: Mapping[str, str]) -> Callable[[str], Any]:
    """The `__getattr__` of `package`: each name of `modules` from its submodule there."""

    def __getattr__(name: str) -> Any:
        try:
            module = modules[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    return __getattr__
