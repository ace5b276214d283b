"""Loading a team's own code named in configuration: a message sink and an upstream hook.

`WSFLEET_MESSAGE_SINK=package.module:attribute` and `WSFLEET_UPSTREAM_HOOK=...` name either an
object, or a class or factory that is called once at start-up: with `settings=<Settings>` if
it has a `settings` parameter, else with no arguments. A sink may come back as an async
context manager (to open its own clients); it is entered at start-up and exited at shutdown.
Anything wrong (import fails, attribute missing, object lacks the port's methods) is a
ConfigurationError that names the variable, raised before the worker takes any connection.

The module is found among the installed packages first, then in the working directory: the
`wsfleet` console script has its own directory on sys.path, not the working directory that
`python -m` puts there, and a team's `my_sink.py` beside its settings should load either way.
"""

import importlib
import inspect
import os
import sys
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Any

from adapters.websocket import UpstreamHook
from application.errors import ConfigurationError
from application.ports import MessageReader, MessageSink
from entrypoints.settings import Settings
from entrypoints.settings.load import SINKS_OF_BACKEND

SINK_VARIABLE = "WSFLEET_MESSAGE_SINK"
HOOK_VARIABLE = "WSFLEET_UPSTREAM_HOOK"


def load_attribute(ref: str, variable: str) -> Any:
    module_name, _, attribute = ref.partition(":")
    try:
        target: Any = _import(module_name)
    except ImportError as exc:
        raise ConfigurationError(
            f"{variable}={ref!r}: cannot import {module_name!r}: {exc}"
        ) from exc
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ConfigurationError(
                f"{variable}={ref!r}: module {module_name!r} has no attribute {attribute!r}"
            ) from None
    return target


def _import(module_name: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        top = module_name.partition(".")[0]
        here = os.getcwd()
        # Only the module itself missing, not something it imports; and only once.
        if exc.name != top or here in sys.path or "" in sys.path:
            raise
    # Appended, not prepended: a file in the working directory never shadows an installed
    # package, and the path stays for the module's own imports later.
    sys.path.append(here)
    importlib.invalidate_caches()
    return importlib.import_module(module_name)


def instantiate(ref: str, variable: str, settings: Settings) -> Any:
    target = load_attribute(ref, variable)
    if not callable(target):
        return target
    try:
        wants_settings = "settings" in inspect.signature(target).parameters
    except (TypeError, ValueError):  # some builtins have no signature
        wants_settings = False
    return target(settings=settings) if wants_settings else target()


async def user_sink(settings: Settings) -> AsyncIterator[MessageSink]:
    """A dependency-injector Resource: the configured sink, entered and exited if it is an
    async context manager."""
    assert settings.message_sink is not None
    made = instantiate(settings.message_sink, SINK_VARIABLE, settings)
    if isinstance(made, AbstractAsyncContextManager) or hasattr(made, "__aenter__"):
        async with made as sink:
            yield _checked_sink(sink, settings.message_sink)
    else:
        yield _checked_sink(made, settings.message_sink)


def user_hook(settings: Settings) -> UpstreamHook | None:
    if settings.upstream_hook is None:
        return None
    hook = instantiate(settings.upstream_hook, HOOK_VARIABLE, settings)
    missing = [m for m in ("headers", "on_open", "parse") if not callable(getattr(hook, m, None))]
    if missing or not inspect.iscoroutinefunction(hook.on_open):
        raise ConfigurationError(
            f"{HOOK_VARIABLE}={settings.upstream_hook!r}: {type(hook).__name__} is not an "
            "UpstreamHook (needs headers(url), async on_open(send, from_seq), parse(raw); "
            "subclass adapters.websocket.DefaultUpstreamHook)"
        )
    hook_: UpstreamHook = hook
    return hook_


def _checked_sink(sink: Any, ref: str) -> MessageSink:
    max_batch = getattr(sink, "max_batch", None)
    max_bytes = getattr(sink, "max_message_bytes", None)
    write = getattr(sink, "write", None)
    resume_point = getattr(sink, "resume_point", None)
    if (
        not inspect.iscoroutinefunction(write)
        or not inspect.iscoroutinefunction(resume_point)
        or not isinstance(max_batch, int)
        or max_batch < 1
        or not isinstance(max_bytes, int)
        or max_bytes < 1
    ):
        raise ConfigurationError(
            f"{SINK_VARIABLE}={ref!r}: {type(sink).__name__} is not a MessageSink (needs int "
            "attributes max_batch >= 1 and max_message_bytes >= 1, async write(messages) and "
            "async resume_point(connection_id, checkpoint_seq), which may return None)"
        )
    checked: MessageSink = sink
    return checked


def no_reader(settings: Settings) -> MessageReader:
    """`wsfleet messages` with a sink of the team's own: only the built-in sinks are read."""
    raise ConfigurationError(
        f"{SINK_VARIABLE}={settings.message_sink}: `wsfleet messages` reads the built-in sinks "
        "only (the DynamoDB messages table, messages.sqlite, PostgreSQL's messages table); "
        "read your sink where it stores"
    )


def sink_choice(settings: Settings) -> str:
    """Which sink the container provides: a built-in one by name (the backend's own when
    WSFLEET_MESSAGE_SINK is unset), or "custom" for module:attribute. The settings refused
    a built-in sink the backend cannot run."""
    sink = settings.message_sink
    if sink is None:
        return SINKS_OF_BACKEND[settings.backend][0]
    return "custom" if ":" in sink else sink
