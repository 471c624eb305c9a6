"""What every ``mqadmin`` command shares: its parsed options (commons-cli's CommandLine), the two signals it may
raise (UsageError, ShowHelp), and Java's text forms the commands print with.

Java's ``String.valueOf`` shows through where Java prints a null ("null") or a boolean ("true"), and maps print as
Java's HashMap does ("{0=127.0.0.1:10911}", in HashMap order).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from broker.common.errors import RmqError
from broker.common.hash_order import hash_map_order


class UsageError(RmqError):
    """A command line the command cannot run; the message is commons-cli's (or says which option is wrong)."""


class ShowHelp(Exception):  # noqa: N818 - a signal, not an error
    """The options given select nothing to do (updateSubGroup without -b or -c): print the command's help."""


class CommandLine:
    """The parsed options of one command (commons-cli's CommandLine): ``has("t")``, ``value("t")`` (trimmed)."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self._values = dict(values)

    def has(self, key: str) -> bool:
        return self._values.get(key) not in (None, False)

    def value(self, key: str, default: str | None = None) -> str | None:
        raw = self._values.get(key)
        return raw.strip() if isinstance(raw, str) else default

    def required(self, key: str) -> str:
        raw = self.value(key)
        if raw is None:
            raise UsageError(f"Missing required option: {key}")
        return raw

    def int_value(self, key: str, default: int) -> int:
        raw = self.value(key)
        if raw is None:
            return default
        try:
            return int(raw)
        except ValueError:
            raise UsageError(f"option {key}: {raw!r} is not a number") from None

    def bool_value(self, key: str, default: bool) -> bool:
        """Boolean.parseBoolean: "true" in any case is true, anything else false."""
        raw = self.value(key)
        return default if raw is None else raw.lower() == "true"


# -- Java's text forms -------------------------------------------------------------------------------------------------


def js(value: object) -> str:
    """String.valueOf."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def java_map(mapping: Mapping[Any, Any], capacity: int = 16) -> str:
    """HashMap.toString, entries in HashMap order."""
    return "{" + ", ".join(f"{k}={js(mapping[k])}" for k in hash_map_order(list(mapping), capacity)) + "}"


def java_fixed(value: float, digits: int = 2) -> str:
    """String.format("%.2f", value): Java rounds the shortest decimal form of the double half up, so 0.125 prints
    "0.13" where Python's format rounds it to even, "0.12"."""
    return str(Decimal(repr(float(value))).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def human_time2(ms: int) -> str:
    """UtilAll.timeMillisToHumanString2: local time with milliseconds after a comma."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) + f",{ms % 1000:03d}"


def format_date(ms: int) -> str:
    """UtilAll.formatDate(date, "yyyy-MM-dd HH:mm:ss")."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


def front(text: str | None, size: int) -> str:
    """UtilAll.frontStringAtLeast: at most ``size`` characters."""
    return js(text)[:size]
