"""RemotingCommand, RocketMQ's one message type on the wire, and its two header encodings.

Rule 1: both header layouts are defined here once: JSON as ``RemotingSerializable`` (fastjson2) writes it, and
ROCKETMQ binary as ``RocketMQSerializable`` does. The frame around them is ``frame.py``'s.

JSON header: an object with the bean properties of RemotingCommand in alphabetical order (fastjson2 sorts them),
nulls left out, non-ASCII raw, control characters escaped as ``\\b \\t \\n \\f \\r`` or ``\\u00xx``::

    {"code":10,"extFields":{...},"flag":0,"language":"JAVA","opaque":7,"remark":"..",
     "serializeTypeCurrentRPC":"JSON","version":475}

ROCKETMQ header, big-endian (``ROCKETMQ_PREFIX`` then two length-prefixed parts)::

    off  field        size
    0    code         2      signed short: Java casts, we refuse codes that do not fit (POP_MESSAGE is 200050)
    2    language     1      LanguageCode
    3    version      2      signed short
    5    opaque       4
    9    flag         4      bit 0 response, bit 1 oneway
    13   remark       4 + n  int length + UTF-8; length 0 means null
    ..   extFields    4 + n  int length of all entries, then per entry: short keyLen, key, int valLen, value

Differences from Java, each deliberate: an empty ``ext_fields`` is left out of the JSON header (Java writes ``{}``
when a custom header was set: both decode the same); a language code we do not know decodes as OTHER (Java: null);
in a ROCKETMQ header an entry with an empty key or value is dropped, as Java reads it as null, i.e. absent.
"""

from __future__ import annotations

import itertools
import json
import re
import reprlib
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntFlag
from typing import Any, NoReturn

from broker.common.errors import LocalProtocolError, MalformedCommand
from broker.remoting.codes import LanguageCode, SerializeType
from broker.remoting.frame import Buffer, Frame, encode_frame_parts


def _json_dumps(obj: Any) -> bytes:
    """The standard library writing exactly what fastjson2 writes: compact, raw UTF-8, the same escapes."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


try:  # orjson writes byte-for-byte what _json_dumps writes, about 10x faster for our headers (see the tests)
    import orjson
except ImportError:  # pragma: no cover - the tests run both paths by patching _dumps/_loads
    _dumps, _loads = _json_dumps, json.loads
else:
    _dumps, _loads = orjson.dumps, orjson.loads


class CommandFlag(IntFlag):
    """The ``flag`` bits RemotingCommand defines (``RPC_TYPE``, ``RPC_ONEWAY``); other bits pass through."""

    RESPONSE = 1 << 0
    ONEWAY = 1 << 1


# The same bits as plain ints: IntFlag arithmetic costs about a microsecond per operation, on every command.
RESPONSE_FLAG = int(CommandFlag.RESPONSE)
ONEWAY_FLAG = int(CommandFlag.ONEWAY)

ROCKETMQ_PREFIX = struct.Struct(
    ">"
    "h"  # code
    "B"  # language
    "h"  # version
    "i"  # opaque
    "i"  # flag
)
_INT = struct.Struct(">i")  # remark length, extFields length, value length
_SHORT = struct.Struct(">h")  # key length
_ENTRY_OVERHEAD = _SHORT.size + _INT.size  # the two length fields of one extFields entry
_PACK_PREFIX, _PACK_INT, _PACK_SHORT = ROCKETMQ_PREFIX.pack, _INT.pack, _SHORT.pack
_UNPACK_INT, _UNPACK_SHORT = _INT.unpack_from, _SHORT.unpack_from
_ROCKETMQ_MINIMUM = ROCKETMQ_PREFIX.size + 2 * _INT.size  # prefix, remark length, extFields length
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
_INT_TEXT = re.compile(r"-?[0-9]{1,10}")
_LANGUAGES = {member.value: member for member in LanguageCode}
_LANGUAGE_NAMES = {member.name: member for member in LanguageCode}
_LANGUAGE_NAME_OF = {member: member.name for member in LanguageCode}  # Enum .name and LanguageCode(x) cost 0.5 us
_JSON_NAME = SerializeType.JSON.name
_JUST_STR = frozenset({str})
# The version both Java sides stamp on every command (MQVersion.CURRENT_VERSION, via -Drocketmq.remoting.version);
# brokers gate some behaviour on it (GO_AWAY for clients newer than V5_3_1). We speak 5.5.1, the oracle's release.
REMOTING_VERSION = 515  # MQVersion.Version.V5_5_1.ordinal(), CURRENT_VERSION of the 5.5.1 jars
_opaques = itertools.count()
_NESTING_NOTE = "the Python stack allows (about a thousand levels)"
_BRIEF = reprlib.Repr()
_BRIEF.maxlevel, _BRIEF.maxstring, _BRIEF.maxother, _BRIEF.maxlist, _BRIEF.maxdict = 3, 60, 60, 8, 8


def next_opaque() -> int:
    """A process-wide request id, as Java's ``requestId.getAndIncrement()``: wraps around within a signed int."""
    return (next(_opaques) + 2**31) % 2**32 - 2**31


@dataclass(frozen=True, slots=True)
class RemotingCommand:
    """A request or a response. ``code`` is a RequestCode in a request and a ResponseCode in a response; it stays
    a plain int because the peer may use codes this version does not know. ``ext_fields`` carries the custom
    header (``headers.py`` turns it into a typed object)."""

    code: int
    language: LanguageCode = LanguageCode.PYTHON
    version: int = 0
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: Mapping[str, str] = field(default_factory=dict)
    # A tuple body is sent as its parts back to back (``encode_parts``); what ``decode`` makes is always bytes.
    body: bytes | tuple[Buffer, ...] = b""
    serialize_type: SerializeType = SerializeType.JSON

    @property
    def is_response(self) -> bool:
        return bool(self.flag & RESPONSE_FLAG)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & ONEWAY_FLAG)


def create_request(
    code: int,
    ext_fields: Mapping[str, str] | None = None,
    body: bytes = b"",
    *,
    remark: str | None = None,
    serialize_type: SerializeType = SerializeType.JSON,
    language: LanguageCode = LanguageCode.PYTHON,
    version: int = REMOTING_VERSION,
) -> RemotingCommand:
    """A request with a fresh opaque (``RemotingCommand.createRequestCommand``).

    Examples:
        >>> from broker.remoting.codes import RequestCode
        >>> request = create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})
        >>> request.is_response, request.ext_fields["topic"]
        (False, 'TopicTest')
    """
    return RemotingCommand(
        code=int(code),
        language=language,
        version=version,
        opaque=next_opaque(),
        remark=remark,
        ext_fields=dict(ext_fields or {}),
        body=body,
        serialize_type=serialize_type,
    )


def create_response(
    request: RemotingCommand,
    code: int,
    remark: str | None = None,
    *,
    ext_fields: Mapping[str, str] | None = None,
    body: bytes | tuple[Buffer, ...] = b"",
    version: int = REMOTING_VERSION,
) -> RemotingCommand:
    """The response to ``request``: its opaque, the response flag, and its serialize type, so a peer that speaks
    only one header encoding is answered in it (Java answers in its own configured type; every Java decoder
    reads both, so either is compatible).

    Examples:
        >>> from broker.remoting.codes import RequestCode, ResponseCode
        >>> request = create_request(RequestCode.HEART_BEAT)
        >>> response = create_response(request, ResponseCode.SUCCESS)
        >>> response.is_response, response.opaque == request.opaque
        (True, True)
    """
    return RemotingCommand(
        code=int(code),
        version=version,
        opaque=request.opaque,
        flag=RESPONSE_FLAG,
        remark=remark,
        ext_fields=dict(ext_fields or {}),
        body=body,
        serialize_type=request.serialize_type,
    )


# -- encoding ---------------------------------------------------------------------------------------------------


def encode(cmd: RemotingCommand) -> bytes:
    """The whole frame for ``cmd``, in its ``serialize_type``. Raises LocalProtocolError naming the bad field."""
    return b"".join(encode_parts(cmd))


def encode_parts(cmd: RemotingCommand) -> list[Buffer]:
    """``encode`` as buffers to send back to back, the body's parts not copied."""
    if cmd.serialize_type == SerializeType.ROCKETMQ:
        parts = rocketmq_frame(cmd)  # C: the prefix and header in one bytes, then the body; None for the rest
        return parts if parts is not None else _rocketmq_frame_py(cmd)
    body = cmd.body
    return encode_frame_parts(cmd.serialize_type, _encode_json_header(cmd), body if type(body) is tuple else (body,))


def _rocketmq_frame_py(cmd: RemotingCommand) -> list[Buffer]:
    """The frame of a ROCKETMQ command as buffers (``_speedups.rocketmq_frame`` in C, which answers None for what
    this one converts or refuses)."""
    body = cmd.body
    return encode_frame_parts(SerializeType.ROCKETMQ, _encode_rocketmq_header(cmd),
                              body if type(body) is tuple else (body,))


def _check_ext_fields(ext_fields: Mapping[str, str]) -> None:
    for key, value in ext_fields.items():
        if type(key) is not str or type(value) is not str:
            raise LocalProtocolError(f"extFields entry {key!r}: {value!r} is not str: str")


def _encode_json_header(cmd: RemotingCommand) -> bytes:
    code, version, opaque, flag = cmd.code, cmd.version, cmd.opaque, cmd.flag
    if not (type(code) is type(version) is type(opaque) is type(flag) is int  # the usual case, without a loop
            and INT32_MIN <= code <= INT32_MAX and INT32_MIN <= version <= INT32_MAX
            and INT32_MIN <= opaque <= INT32_MAX and INT32_MIN <= flag <= INT32_MAX):
        for name in ("code", "version", "opaque", "flag"):
            value = getattr(cmd, name)
            if not isinstance(value, int) or not INT32_MIN <= value <= INT32_MAX:
                raise LocalProtocolError(f"{name} {value!r} is not a 32-bit int")
    header: dict[str, Any] = {"code": int(code)}
    if cmd.ext_fields:
        _check_ext_fields(cmd.ext_fields)
        header["extFields"] = cmd.ext_fields if type(cmd.ext_fields) is dict else dict(cmd.ext_fields)
    header["flag"] = int(flag)
    header["language"] = _LANGUAGE_NAME_OF.get(cmd.language) or LanguageCode(cmd.language).name
    header["opaque"] = int(opaque)
    if cmd.remark is not None:
        header["remark"] = cmd.remark
    header["serializeTypeCurrentRPC"] = _JSON_NAME
    header["version"] = int(version)
    try:
        return _dumps(header)
    except (TypeError, UnicodeError) as err:  # orjson.JSONEncodeError is a TypeError
        raise LocalProtocolError(f"cannot write the JSON header of code {cmd.code}: {err}") from err


def _encode_rocketmq_header(cmd: RemotingCommand) -> bytes:
    language = cmd.language
    if type(language) is not LanguageCode:
        language = LanguageCode(language)
    fields = (cmd.code, language, cmd.version, cmd.opaque, cmd.flag, cmd.remark, cmd.ext_fields)
    header = encode_rocketmq_header(*fields)
    if header is None:  # a value the C codec leaves to the Python one, which converts it or names what is wrong
        header = _encode_rocketmq_header_py(*fields)
    return header


def _encode_rocketmq_header_py(code: int, language: LanguageCode, version: int, opaque: int, flag: int,
                               remark: str | None, ext_fields: Mapping[str, str]) -> bytes:
    """The ROCKETMQ header (``_speedups.encode_rocketmq_header`` in C, which answers None where this one raises or
    has to convert a value); LocalProtocolError naming a value that does not fit."""
    try:
        prefix = _PACK_PREFIX(code, language, version, opaque, flag)
    except struct.error as err:
        raise LocalProtocolError(
            f"code {code} / version {version} must fit a signed short and opaque {opaque} / "
            f"flag {flag} a signed int in a ROCKETMQ header ({err}); send it as JSON instead"
        ) from err
    # Lone surrogates become '?', as Java's String.getBytes(UTF_8) does.
    remark_bytes = remark.encode("utf-8", "replace") if remark else b""
    parts = [prefix, _PACK_INT(len(remark_bytes)), remark_bytes, b""]  # b"": the extFields length, filled in below
    _check_ext_fields(ext_fields)
    ext_length = 0
    pack_short, pack_int = _PACK_SHORT, _PACK_INT
    for key, value in ext_fields.items():
        key_bytes = key.encode("utf-8", "replace")
        value_bytes = value.encode("utf-8", "replace")
        if len(key_bytes) > 0x7FFF:
            raise LocalProtocolError(f"extFields key of {len(key_bytes)} bytes exceeds the short length field")
        parts += (pack_short(len(key_bytes)), key_bytes, pack_int(len(value_bytes)), value_bytes)
        ext_length += _ENTRY_OVERHEAD + len(key_bytes) + len(value_bytes)
    parts[3] = pack_int(ext_length)
    return b"".join(parts)


# -- decoding ---------------------------------------------------------------------------------------------------


def decode(frame: Frame) -> RemotingCommand:
    """The command in ``frame``. Raises MalformedCommand naming what is wrong, with the opaque when it was read."""
    if frame.serialize_type == SerializeType.ROCKETMQ:
        cmd = rocketmq_command(frame.header, frame.body)
        if cmd is None:
            _decode_rocketmq_header(frame.header)  # raises, naming what is wrong
        return cmd
    return RemotingCommand(**_decode_json_header(frame.header), body=frame.body, serialize_type=frame.serialize_type)


def _decode_json_header(header: bytes) -> dict[str, Any]:
    try:
        obj = _loads(header)
    except ValueError as err:  # json/orjson JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise MalformedCommand(f"JSON header is not valid JSON: {err}") from err
    except RecursionError as err:  # json (without orjson) reads nested arrays and objects recursively
        raise MalformedCommand(f"JSON header of {len(header)} bytes nests deeper than {_NESTING_NOTE}") from err
    if type(obj) is not dict:
        raise MalformedCommand(f"JSON header is a {type(obj).__name__}, not an object")
    opaque = is_response = None
    try:
        opaque = _json_int(obj, "opaque")
        flag = _json_int(obj, "flag")
        is_response = bool(flag & RESPONSE_FLAG)  # a plain int: IntFlag & costs 0.8 us per command
        return {
            "code": _json_int(obj, "code"),
            "language": _json_language(obj.get("language")),
            "version": _json_int(obj, "version"),
            "opaque": opaque,
            "flag": flag,
            "remark": _json_text(obj.get("remark"), "remark"),
            "ext_fields": _json_ext_fields(obj.get("extFields")),
        }
    except MalformedCommand as err:
        raise MalformedCommand(err.reason, opaque=opaque, is_response=is_response) from None


def _brief(value: Any) -> str:
    """A JSON value for an error message: its repr cut short, nesting included (a peer's 16 MiB header, or arrays
    nested a hundred thousand deep, must not become a message of that size, or a RecursionError)."""
    return _BRIEF.repr(value)


def _json_int(obj: dict[str, Any], name: str) -> int:
    """An int field: a number or a decimal string (fastjson2 reads both); absent or null is 0, as in Java."""
    value = obj.get(name)
    if value is None:
        return 0
    if type(value) is str and _INT_TEXT.fullmatch(value):
        value = int(value)
    if type(value) is not int or not INT32_MIN <= value <= INT32_MAX:
        raise MalformedCommand(f"JSON header field {name!r} is {_brief(value)}, not a 32-bit int")
    return value


def _json_language(value: Any) -> LanguageCode:
    """A LanguageCode name (any case, as fastjson2 allows) or its number; unknown ones are OTHER."""
    if value is None:
        return LanguageCode.JAVA  # RemotingCommand's field default
    if type(value) is str:
        return _LANGUAGE_NAMES.get(value) or _LANGUAGE_NAMES.get(value.upper(), LanguageCode.OTHER)
    if type(value) is int:
        return _LANGUAGES.get(value, LanguageCode.OTHER)
    raise MalformedCommand(f"JSON header field 'language' is {_brief(value)}, not a LanguageCode name")


def _json_text(value: Any, what: str) -> str | None:
    """A string, or a scalar written as Java's fastjson2 turns it into a String field (1 -> "1")."""
    if value is None or type(value) is str:
        return value
    if isinstance(value, (int, float, list, dict)):  # bool is an int
        try:
            return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        except RecursionError as err:  # orjson reads any depth, json writes back about a thousand levels
            raise MalformedCommand(f"JSON header {what} nests deeper than {_NESTING_NOTE}") from err
    raise MalformedCommand(f"JSON header {what} is {_brief(value)}, not a string")  # pragma: no cover - none other


def _json_ext_fields(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if type(value) is not dict:
        raise MalformedCommand(f"JSON header field 'extFields' is {_brief(value)}, not an object")
    if set(map(type, value.values())) <= _JUST_STR:  # the usual case, checked at C speed
        return value
    # Java keeps a null as null (absent); anything else becomes its JSON text, like fastjson2's Map<String,String>.
    return {key: _json_text(item, f"extFields[{key!r}]") for key, item in value.items() if item is not None}


def _decode_rocketmq_header(header: bytes) -> dict[str, Any]:
    if len(header) < ROCKETMQ_PREFIX.size:
        raise MalformedCommand(_too_short(header))
    code, language, version, opaque, flag = ROCKETMQ_PREFIX.unpack_from(header, 0)
    try:
        if len(header) < _ROCKETMQ_MINIMUM:
            raise MalformedCommand(_too_short(header))
        remark, pos = _rocketmq_string(header, ROCKETMQ_PREFIX.size, _INT, "remark")
        (ext_length,) = _INT.unpack_from(header, pos)
        pos += _INT.size
        if ext_length != len(header) - pos:
            raise MalformedCommand(
                f"ROCKETMQ header extFields length {ext_length} does not match the {len(header) - pos} bytes left"
            )
        ext_fields = _rocketmq_ext_fields(header, pos)
        if ext_fields is None:
            _raise_bad_ext_field(header, pos)
    except struct.error as err:  # a length field cut off by the end of the header
        raise MalformedCommand(f"ROCKETMQ header is cut short: {err}", opaque=opaque,
                               is_response=bool(flag & CommandFlag.RESPONSE)) from None
    except MalformedCommand as err:
        raise MalformedCommand(err.reason, opaque=opaque, is_response=bool(flag & CommandFlag.RESPONSE)) from None
    return {
        "code": code,
        "language": _LANGUAGES.get(language, LanguageCode.OTHER),
        "version": version,
        "opaque": opaque,
        "flag": flag,
        "remark": remark or None,
        "ext_fields": ext_fields,
    }


def _rocketmq_header_fields_py(header: bytes) -> tuple[int, int, int, int, int, str | None, dict[str, str]] | None:
    """(code, language number, version, opaque, flag, remark, extFields) of a ROCKETMQ header, or None when it is
    malformed (``_speedups.rocketmq_header_fields`` in C)."""
    try:
        fields = _decode_rocketmq_header(header)
    except MalformedCommand:
        return None
    return (fields["code"], header[2], fields["version"], fields["opaque"], fields["flag"], fields["remark"],
            fields["ext_fields"])


def _rocketmq_command_py(header: bytes, body: bytes | memoryview) -> RemotingCommand | None:
    """The command of a ROCKETMQ frame, or None when its header is malformed (``_speedups.rocketmq_command`` in C,
    which makes the frozen dataclass without its ``__init__``)."""
    fields = rocketmq_header_fields(header)
    if fields is None:
        return None
    code, language, version, opaque, flag, remark, ext_fields = fields
    return RemotingCommand(code, _LANGUAGES.get(language, LanguageCode.OTHER), version, opaque, flag, remark,
                           ext_fields, body, SerializeType.ROCKETMQ)


try:
    from broker._speedups import (
        bind_command,
        encode_rocketmq_header,
        rocketmq_command,
        rocketmq_frame,
        rocketmq_header_fields,
    )
except ImportError:  # built without a C compiler: the same headers, slower
    encode_rocketmq_header = _encode_rocketmq_header_py
    rocketmq_header_fields = _rocketmq_header_fields_py
    rocketmq_command = _rocketmq_command_py
    rocketmq_frame = _rocketmq_frame_py  # type: ignore[assignment]
else:
    bind_command(RemotingCommand, _LANGUAGES, LanguageCode.OTHER)


def _too_short(header: bytes) -> str:
    return f"ROCKETMQ header of {len(header)} bytes is shorter than the {_ROCKETMQ_MINIMUM}-byte minimum"


def _raise_bad_ext_field(header: bytes, pos: int) -> NoReturn:
    """Walk the extFields entries from ``pos`` to the one that does not fit, and raise MalformedCommand naming it."""
    end = len(header)
    while pos < end:
        if pos + 2 > end:
            raise MalformedCommand(f"ROCKETMQ header ends inside the length of the extFields key at byte {pos}")
        (key_length,) = _SHORT.unpack_from(header, pos)
        key_end = pos + 2 + key_length
        if key_length < 0 or key_end + 4 > end:
            key, pos = _rocketmq_string(header, pos, _SHORT, "extFields key")  # raises with the exact reason
            _rocketmq_string(header, pos, _INT, f"extFields value of {key!r}")
        (value_length,) = _INT.unpack_from(header, key_end)
        value_end = key_end + 4 + value_length
        if value_length < 0 or value_end > end:
            key = header[pos + 2 : key_end].decode("utf-8", "replace")
            _rocketmq_string(header, key_end, _INT, f"extFields value of {key!r}")  # raises
        pos = value_end
    raise AssertionError(f"the extFields entries of a {end}-byte ROCKETMQ header all fit")  # pragma: no cover


def _rocketmq_ext_fields(header: bytes, pos: int) -> dict[str, str] | None:
    """The extFields entries from ``pos`` to the end of ``header``, or None if one of them does not fit (the caller
    then names the bad one). Most of the decoding time of a ROCKETMQ request goes here, hence the shape: local
    names, and one latin-1 decoding of the whole header sliced per entry, which is the UTF-8 text for the usual
    ASCII entries; any other entry is decoded as UTF-8 (invalid bytes become U+FFFD, as in Netty)."""
    ext_fields: dict[str, str] = {}
    end = len(header)
    text = header.decode("latin-1")
    unpack_short, unpack_int = _UNPACK_SHORT, _UNPACK_INT
    try:
        while pos < end:
            (key_length,) = unpack_short(header, pos)
            if key_length < 0:
                return None
            key_end = pos + 2 + key_length
            (value_length,) = unpack_int(header, key_end)
            value_end = key_end + 4 + value_length
            if value_length < 0 or value_end > end:
                return None
            if key_length and value_length:  # Java reads a zero length as null: absent
                key, value = text[pos + 2 : key_end], text[key_end + 4 : value_end]
                if not (key.isascii() and value.isascii()):
                    key = header[pos + 2 : key_end].decode("utf-8", "replace")
                    value = header[key_end + 4 : value_end].decode("utf-8", "replace")
                ext_fields[key] = value
            pos = value_end
    except struct.error:  # a length field cut off by the end of the header
        return None
    return ext_fields


def _rocketmq_string(header: bytes, pos: int, length_field: struct.Struct, what: str) -> tuple[str, int]:
    """A length-prefixed UTF-8 string at ``pos`` and the position after it; invalid UTF-8 becomes U+FFFD, as
    Netty's readCharSequence does."""
    if pos + length_field.size > len(header):
        raise MalformedCommand(f"ROCKETMQ header ends inside the length of the {what} at byte {pos}")
    (length,) = length_field.unpack_from(header, pos)
    start = pos + length_field.size
    if length < 0 or start + length > len(header):
        raise MalformedCommand(f"ROCKETMQ header {what} length {length} at byte {pos} runs past its end")
    return header[start : start + length].decode("utf-8", "replace"), start + length
