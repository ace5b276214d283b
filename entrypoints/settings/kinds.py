"""Value kinds of settings: each parses one environment string and says what it allows.

A kind raises `ValueError` with a message completing "expected ..."; the loader prefixes the
variable's name, so every start-up error names the variable and what is allowed.
"""

import math
import re
from typing import Any, Protocol
from urllib.parse import urlsplit

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
_IMPORT_REF = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


class Kind(Protocol):
    def parse(self, raw: str) -> Any:
        """The typed value; raises ValueError saying what is allowed."""
        ...

    def describe(self) -> str:
        """The allowed values, for the settings table."""
        ...


class Text:
    def __init__(self, pattern: str | None = None, rule: str = "text") -> None:
        self._pattern = re.compile(pattern) if pattern else None
        self._rule = rule

    def parse(self, raw: str) -> str:
        if self._pattern and not self._pattern.fullmatch(raw):
            raise ValueError(f"expected {self._rule}")
        return raw

    def describe(self) -> str:
        return self._rule


class Number:
    def __init__(
        self,
        integer: bool,
        minimum: float | None = None,
        maximum: float | None = None,
        above: float | None = None,
    ) -> None:
        self._integer = integer
        self._min = minimum
        self._max = maximum
        self._above = above  # exclusive lower bound

    def parse(self, raw: str) -> int | float:
        try:
            value: int | float = int(raw) if self._integer else float(raw)
        except ValueError:
            raise ValueError(f"expected {self.describe()}") from None
        out_of_range = (
            not math.isfinite(value)
            or (self._min is not None and value < self._min)
            or (self._max is not None and value > self._max)
            or (self._above is not None and value <= self._above)
        )
        if out_of_range:
            raise ValueError(f"expected {self.describe()}")
        return value

    def describe(self) -> str:
        noun = "integer" if self._integer else "number"
        if self._min is not None and self._max is not None:
            return f"{noun} {_show(self._min)}..{_show(self._max)}"
        if self._min is not None:
            return f"{noun} >= {_show(self._min)}"
        if self._above is not None:
            return f"{noun} > {_show(self._above)}"
        return noun


def _show(value: float) -> str:
    return f"{value:g}"


class Flag:
    def parse(self, raw: str) -> bool:
        value = raw.strip().lower()
        if value in _TRUE:
            return True
        if value in _FALSE:
            return False
        raise ValueError(f"expected {self.describe()}")

    def describe(self) -> str:
        return "true/false (also 1/0, yes/no, on/off)"


class Choice:
    def __init__(self, *values: str, case_insensitive: bool = True) -> None:
        self._values = values
        self._fold = case_insensitive

    def parse(self, raw: str) -> str:
        for value in self._values:
            if raw == value or (self._fold and raw.lower() == value.lower()):
                return value
        raise ValueError(f"expected {self.describe()}")

    def describe(self) -> str:
        return "one of " + ", ".join(self._values)


class Names:
    """A comma-separated list, blanks dropped."""

    def __init__(self, item: Text) -> None:
        self._item = item

    def parse(self, raw: str) -> tuple[str, ...]:
        items = tuple(part.strip() for part in raw.split(",") if part.strip())
        for item in items:
            try:
                self._item.parse(item)
            except ValueError:
                raise ValueError(f"expected {self.describe()}; {item!r} is not") from None
        return items

    def describe(self) -> str:
        return f"comma-separated list of {self._item.describe()}"


class HttpUrl:
    def parse(self, raw: str) -> str:
        try:
            parts = urlsplit(raw)
            parts.port  # noqa: B018  (raises ValueError for a bad port)
        except ValueError:
            raise ValueError(f"expected {self.describe()}") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"expected {self.describe()}")
        return raw

    def describe(self) -> str:
        return "http:// or https:// URL"


class ImportRef:
    """`package.module:attribute` (imported later, by the container that uses it)."""

    def parse(self, raw: str) -> str:
        if not _IMPORT_REF.fullmatch(raw):
            raise ValueError(f"expected {self.describe()}")
        return raw

    def describe(self) -> str:
        return "module:attribute (e.g. mypackage.hooks:AuthHook)"


class PostgresUrl:
    """A libpq connection URI. Only its scheme is checked here: libpq's own forms (several
    hosts, a socket directory in `?host=`) are the driver's to parse, and a value that may hold
    a password is never quoted back."""

    def parse(self, raw: str) -> str:
        scheme, sep, _ = raw.partition("://")
        if not sep or scheme.lower() not in ("postgresql", "postgres"):
            raise ValueError(f"expected {self.describe()}")
        return raw

    def describe(self) -> str:
        return "postgresql:// or postgres:// URI (libpq)"


BUILT_IN_SINKS = ("dynamodb", "sqlite", "kinesis", "postgres")


class SinkRef:
    """A built-in sink by name, or `package.module:attribute` (a sink of your own)."""

    def parse(self, raw: str) -> str:
        if raw in BUILT_IN_SINKS or _IMPORT_REF.fullmatch(raw):
            return raw
        raise ValueError(f"expected {self.describe()}")

    def describe(self) -> str:
        return f"{', '.join(BUILT_IN_SINKS)}, or module:attribute (e.g. mypackage.sinks:FileSink)"


class OrNone:
    """`kind`, or the word `none` for "switched off" (None)."""

    def __init__(self, kind: Kind) -> None:
        self._kind = kind

    def parse(self, raw: str) -> Any:
        return None if raw.lower() == "none" else self._kind.parse(raw)

    def describe(self) -> str:
        return f"{self._kind.describe()}, or none"
