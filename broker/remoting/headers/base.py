"""The header machinery: Header (a dataclass read from and written to ``extFields``), HeaderError, and
RpcRequestHeader, the base of the requests that name the broker they are meant for.

Rule 1: the wire names of header fields (``extFields`` keys) appear only in ``broker.remoting.headers``. A field's
wire name is the camelCase of its snake_case name unless ``WIRE`` says otherwise. Required fields (Java's
@CFNotNull) are the ones without a default; a request missing one is refused with Java's own message.
"""

from __future__ import annotations

import dataclasses
import functools
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


def _parse_bool(raw: str) -> bool:
    return raw.lower() == "true"  # Boolean.parseBoolean: anything else is false


_PARSERS: dict[type, Callable[[str], Any]] = {bool: _parse_bool, int: int}


def _format(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# (header class, id of a wire-name override dict or 0) -> (that dict, its fields, parser, writer). Headers are parsed
# and written on every request: both functions are generated once per class and override, not worked out per call.
_SPECS: dict[tuple[type, int], _Spec] = {}


class _Spec(typing.NamedTuple):
    wire: dict[str, str] | None  # the override the entry was made for (its id keys the cache: kept alive here)
    fields: tuple[_Field, ...]
    parse: Callable[[dict[str, str]], Any]  # extFields -> the header
    write: Callable[[Any], dict[str, str]]  # the header -> extFields


def _spec(cls: type, wire: dict[str, str] | None) -> _Spec:
    spec = _SPECS.get((cls, id(wire)))
    if spec is not None and spec.wire is wire:
        return spec
    fields = _fields(cls, wire)
    spec = _Spec(wire, fields, _compile_parser(cls, fields), _compile_writer(cls, fields))
    _SPECS[(cls, id(wire))] = spec
    return spec


def _fields_of(cls: type, wire: dict[str, str] | None) -> tuple[_Field, ...]:
    return _spec(cls, wire).fields


def _fields(cls: type, wire: dict[str, str] | None) -> tuple[_Field, ...]:
    hints = typing.get_type_hints(cls)
    names = {**getattr(cls, "WIRE", {}), **(wire or {})}
    fields = []
    for f in sorted(dataclasses.fields(cls), key=lambda f: f.kw_only):  # RpcRequestHeader's fields go last
        args = [a for a in typing.get_args(hints[f.name]) if a is not type(None)]
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        kind = args[0] if args else hints[f.name]
        fields.append(_Field(f.name, names.get(f.name, to_camel(f.name)), kind, required, _PARSERS.get(kind)))
    return tuple(fields)


def _compile_parser(cls: type, fields: tuple[_Field, ...]) -> Callable[[dict[str, str]], Any]:
    """``from_ext`` for one class and override, as straight-line code (the way ``dataclasses`` writes ``__init__``):
    a lookup per field, no loop, tuples or dict of values. A field left out of extFields keeps its default, as
    when ``cls(**values)`` omitted it: so a class whose optional field has a default_factory keeps the loop."""
    by_name = {f.name: f for f in dataclasses.fields(cls)}
    if any(not f.required and by_name[f.name].default is dataclasses.MISSING for f in fields):
        return functools.partial(_parse_loop, cls, fields)
    env: dict[str, Any] = {"cls": cls, "HeaderError": HeaderError, "_bad": _bad_value}
    lines = ["def parse(ext):", "    get = ext.get"]
    args = []
    for i, f in enumerate(fields):
        var = f"v{i}"
        lines.append(f"    {var} = get({f.wire!r})")
        if f.required:
            missing = f"the custom field <{f.wire}> is null"
            lines += [f"    if {var} is None:", f"        raise HeaderError({missing!r})"]
        else:
            env[f"d{i}"] = by_name[f.name].default
            lines += [f"    if {var} is None:", f"        {var} = d{i}"]
        if f.parse is not None:
            env[f"p{i}"] = f.parse
            indent = "    " if f.required else "        "
            if not f.required:
                lines.append("    else:")
            lines += [f"{indent}try:", f"{indent}    {var} = p{i}({var})", f"{indent}except ValueError as err:",
                      f"{indent}    raise _bad({f.wire!r}, {var}) from err"]
        args.append(f"{f.name}={var}")
    lines.append(f"    return cls({', '.join(args)})")
    exec("\n".join(lines), env)  # noqa: S102 - generated from the dataclass's own field names
    return env["parse"]


def _parse_loop(cls: type, fields: tuple[_Field, ...], ext: dict[str, str]) -> Any:
    """The generic ``from_ext``: what the generated parsers do, field by field."""
    get = ext.get
    values: dict[str, Any] = {}
    for name, wire_name, _, required, parse in fields:
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
                raise _bad_value(wire_name, raw) from err
    return cls(**values)


def _write_loop(fields: tuple[_Field, ...], header: Any) -> dict[str, str]:
    """The generic ``to_ext``: what the generated writers do, field by field."""
    return {f.wire: _format(value) for f in fields if (value := getattr(header, f.name)) is not None}


def _bad_value(wire_name: str, raw: str) -> HeaderError:
    return HeaderError(f"the custom field <{wire_name}> has a bad value {raw!r}")


def _compile_writer(cls: type, fields: tuple[_Field, ...]) -> Callable[[Any], dict[str, str]]:
    """``to_ext`` for one class and override, straight-line: each value that is not None under its wire name, as
    ``_format`` writes it (a str or an int field holding its own type skips the call)."""
    env: dict[str, Any] = {"_format": _format}
    lines = ["def write(self):", "    out = {}"]
    for i, f in enumerate(fields):
        var = f"v{i}"
        lines += [f"    {var} = self.{f.name}", f"    if {var} is not None:"]
        if f.kind is str:
            lines.append(f"        out[{f.wire!r}] = {var} if type({var}) is str else _format({var})")
        elif f.kind is int:
            lines.append(f"        out[{f.wire!r}] = str({var}) if type({var}) is int else _format({var})")
        else:
            lines.append(f"        out[{f.wire!r}] = _format({var})")
    lines.append("    return out")
    exec("\n".join(lines), env)  # noqa: S102 - generated from the dataclass's own field names
    return env["write"]


@dataclass(slots=True)
class Header:
    WIRE: ClassVar[dict[str, str]] = {}

    @classmethod
    def from_ext(cls, ext: dict[str, str] | None, wire: dict[str, str] | None = None) -> Self:
        """Parse ``extFields``; ``wire`` overrides the wire names (SEND_MESSAGE_V2's one-letter fields)."""
        return _spec(cls, wire).parse(ext or {})

    def to_ext(self, wire: dict[str, str] | None = None) -> dict[str, str]:
        return _spec(type(self), wire).write(self)

    @classmethod
    def wire_names(cls, wire: dict[str, str] | None = None) -> dict[str, str]:
        """Field name -> its extFields key, under the override ``wire``."""
        return {f.name: f.wire for f in _spec(cls, wire).fields}


@dataclass(slots=True)
class RpcRequestHeader(Header):
    """RocketMQ 5's RpcRequestHeader: ``bname``, the name of the broker a request is meant for, which a client sets
    on requests about one of that broker's queues or messages (a proxy or a static topic routes by it). rmq's broker
    does not route by it; it names itself in CHECK_TRANSACTION_STATE, which the client echoes in END_TRANSACTION.

    Its fields are keyword-only and written after the request's own fields, where the client has always put them.
    """

    bname: str | None = field(default=None, kw_only=True)
