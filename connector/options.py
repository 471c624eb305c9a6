"""``format("rmq")`` options, parsed once at query start into frozen dataclasses.

Names follow Spark's Kafka connector where the meaning is the same (``startingOffsets``, ``maxOffsetsPerTrigger``,
``failOnDataLoss``...). Spark hands options over case-insensitively (lower-cased keys); every option is looked up by
its documented name, and an option nobody knows fails the query with the list of the known ones, because a typo
that silently changes nothing (``startingOffset``) is worse than an error.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from broker.errors import ConnectorOptionError

_TRUE = frozenset({"true", "1", "yes"})
_FALSE = frozenset({"false", "0", "no"})


class OptionReader:
    """Typed access to Spark's options by their documented (camelCase) names; rejects unknown names."""

    def __init__(self, options: Mapping[str, str], known: Iterable[str], what: str) -> None:
        self._values = {str(k).lower(): str(v) for k, v in options.items()}
        self._names = {name.lower(): name for name in known}
        self._what = what
        unknown = sorted(k for k in self._values if k not in self._names and k not in _SPARK_OWNED)
        if unknown:
            known_names = ", ".join(sorted(self._names.values()))
            raise ConnectorOptionError(f"unknown {what} option(s) {', '.join(unknown)}; known options: {known_names}")

    def has(self, name: str) -> bool:
        return name.lower() in self._values

    def str(self, name: str, default: str | None = None, *, required: bool = False) -> str | None:
        value = self._values.get(name.lower())
        if value is None or value.strip() == "":
            if required:
                raise ConnectorOptionError(f"the {self._what} option {name} is required")
            return default
        return value.strip()

    def int(self, name: str, default: int | None = None, *, minimum: int | None = None) -> int | None:
        text = self.str(name)
        if text is None:
            return default
        try:
            value = int(text)
        except ValueError:
            raise ConnectorOptionError(f"option {name} must be an integer, got {text!r}") from None
        if minimum is not None and value < minimum:
            raise ConnectorOptionError(f"option {name} must be >= {minimum}, got {value}")
        return value

    def bool(self, name: str, default: bool) -> bool:
        text = self.str(name)
        if text is None:
            return default
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise ConnectorOptionError(f"option {name} must be true or false, got {text!r}")


# Options Spark itself passes to data sources next to the user's (writeStream's checkpointLocation, save's path).
_SPARK_OWNED = frozenset({"path", "checkpointlocation", "queryname"})


# -- source options (connector/source.py) -----------------------------------------------------------------------------


# -- sink options (connector/sink.py) ---------------------------------------------------------------------------------
