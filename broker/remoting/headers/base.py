"""The header machinery: Header (a dataclass read from and written to ``extFields``), HeaderError, and
RpcRequestHeader, the base of the requests that name the broker they are meant for.

Rule 1: the wire names of header fields (``extFields`` keys) appear only in ``broker.remoting.headers``. A field's
wire name is the camelCase of its snake_case name unless ``WIRE`` says otherwise. Required fields (Java's
@CFNotNull) are the ones without a default; a request missing one is refused with Java's own message.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from broker.common.errors import RmqError
from broker.common.properties import to_camel


class HeaderError(RmqError, ValueError):
    """A request header that cannot be parsed: a required field missing or a value of the wrong type."""


class _Field(typing.NamedTuple):
    name: str  # the dataclass field
    wire: str  # its extFields key
    kind: type  # int, bool or str (Optional unwrapped)
    required: bool  # no default: Java's @CFNotNull
    parse: Callable[[str], Any] | None  # the extFields text to the value (None: the text is the value)


# (header class, wire-name override dict or None) -> (that dict, its fields). Headers are parsed and written on every
# request, so the field list is worked out once per class and override, not per call.
_SPECS: dict[tuple[type, int], tuple[dict[str, str] | None, tuple[_Field, ...]]] = {}


def _fields_of(cls: type, wire: dict[str, str] | None) -> tuple[_Field, ...]:
    cached = _SPECS.get((cls, id(wire)))
    if cached is not None and cached[0] is wire:
        return cached[1]
    hints = typing.get_type_hints(cls)
    names = {**getattr(cls, "WIRE", {}), **(wire or {})}
    fields = []
    for f in sorted(dataclasses.fields(cls), key=lambda f: f.kw_only):  # RpcRequestHeader's fields go last
        args = [a for a in typing.get_args(hints[f.name]) if a is not type(None)]
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        kind = args[0] if args else hints[f.name]
        fields.append(_Field(f.name, names.get(f.name, to_camel(f.name)), kind, required, _PARSERS.get(kind)))
    _SPECS[(cls, id(wire))] = (wire, tuple(fields))
    return tuple(fields)


def _parse_bool(raw: str) -> bool:
    return raw.lower() == "true"  # Boolean.parseBoolean: anything else is false


_PARSERS: dict[type, Callable[[str], Any]] = {bool: _parse_bool, int: int}


def _format(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(slots=True)
class Header:
    WIRE: ClassVar[dict[str, str]] = {}

    @classmethod
    def from_ext(cls, ext: dict[str, str] | None, wire: dict[str, str] | None = None) -> Self:
        """Parse ``extFields``; ``wire`` overrides the wire names (SEND_MESSAGE_V2's one-letter fields)."""
        get = (ext or {}).get
        values: dict[str, Any] = {}
        for name, wire_name, _, required, parse in _fields_of(cls, wire):  # every request: names and tuples unpacked
            raw = get(wire_name)
            if raw is None:
                if required:
                    raise HeaderError(f"the custom field <{wire_name}> is null")
            elif parse is None:
                values[name] = raw
            else:
                try:
                    values[name] = parse(raw)
                except ValueError as err:
                    raise HeaderError(f"the custom field <{wire_name}> has a bad value {raw!r}") from err
        return cls(**values)

    def to_ext(self, wire: dict[str, str] | None = None) -> dict[str, str]:
        out: dict[str, str] = {}
        for f in _fields_of(type(self), wire):
            value = getattr(self, f.name)
            if value is not None:
                out[f.wire] = _format(value)
        return out


@dataclass(slots=True)
class RpcRequestHeader(Header):
    """RocketMQ 5's RpcRequestHeader: ``bname``, the name of the broker a request is meant for, which a client sets
    on requests about one of that broker's queues or messages (a proxy or a static topic routes by it). rmq's broker
    does not route by it; it names itself in CHECK_TRANSACTION_STATE, which the client echoes in END_TRANSACTION.

    Its fields are keyword-only and written after the request's own fields, where the client has always put them.
    """

    bname: str | None = field(default=None, kw_only=True)
