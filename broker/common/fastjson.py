"""RocketMQ's JSON: the fastjson2 dialect of remoting bodies and metadata files, and DataVersion.

Rule 1: the dialect is written and read here and nowhere else; wire bodies and config managers build plain dicts.

Apache's broker writes JSON with ``RemotingSerializable.toJson``, which is fastjson2: ``"key":value`` with no space,
bean properties in alphabetical order, null properties left out, and -- the one departure from JSON -- integer map
keys written bare (``"offsetTable":{"t@g":{0:250}}``). ``encode_json`` writes exactly that (``encode_json_pretty``
with PrettyFormat's one tab per level, as config/*.json files are), and ``decode_json`` reads it by quoting bare
integer keys before handing the text to ``json``. fastjson2 reads both quoted and bare integer keys, so Apache's
broker reads our bodies and files too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol, runtime_checkable

from broker.common.clock import now_ms

_INDENT = "\t"


# -- DataVersion ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DataVersion:
    """remoting.protocol.DataVersion: bumped on every metadata change so the NameServer can tell what is new.

    Examples:
        >>> v = DataVersion(timestamp=1).next_version()
        >>> v.counter
        1
    """

    state_version: int = 0
    timestamp: int = 0
    counter: int = 0

    @classmethod
    def new(cls) -> DataVersion:
        """A fresh version: counter 0, timestamp now (what ``new DataVersion()`` gives in Java)."""
        return cls(timestamp=now_ms())

    def next_version(self, state_version: int = 0) -> DataVersion:
        return replace(self, state_version=state_version, timestamp=now_ms(), counter=self.counter + 1)

    def to_json(self) -> dict[str, int]:
        return {"counter": self.counter, "stateVersion": self.state_version, "timestamp": self.timestamp}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> DataVersion:
        if not data:
            return cls.new()
        return cls(
            state_version=int(data.get("stateVersion", 0)),
            timestamp=int(data.get("timestamp", 0)),
            counter=int(data.get("counter", 0)),
        )


# -- the dialect ----------------------------------------------------------------------------------------------------


def encode_json(value: Any) -> str:
    """Compact fastjson2 text (what goes on the wire in a remoting body).

    Examples:
        >>> encode_json({"offsetTable": {"t@g": {0: 250}}, "skipped": None})
        '{"offsetTable":{"t@g":{0:250}}}'
    """
    return "".join(_encode(value, None, 0))


def encode_json_pretty(value: Any) -> str:
    """fastjson2 PrettyFormat text, as Apache's broker writes config/*.json."""
    return "".join(_encode(value, _INDENT, 0))


def _encode(value: Any, indent: str | None, depth: int):
    if isinstance(value, Mapping):
        items = [(k, v) for k, v in value.items() if v is not None]
        yield from _container("{", "}", [(_key(k), v) for k, v in items], indent, depth)
    elif isinstance(value, list | tuple | set | frozenset):
        yield from _container("[", "]", [(None, v) for v in value], indent, depth)
    elif isinstance(value, bool):
        yield "true" if value else "false"
    elif isinstance(value, int):
        yield str(int(value))
    elif isinstance(value, JavaDouble):
        yield _double(value)
    elif isinstance(value, str):
        yield json.dumps(value, ensure_ascii=False)
    else:
        raise TypeError(f"cannot encode {type(value).__name__} as metadata JSON: {value!r}")


def _key(key: object) -> str:
    if isinstance(key, bool) or not isinstance(key, int | str):
        if isinstance(key, JsonObjectKey):  # a bean key of a remoting body (see "object map keys" below)
            return encode_json(key.to_json())
        raise TypeError(f"metadata JSON keys are str or int, not {type(key).__name__}: {key!r}")
    return str(key) if isinstance(key, int) else json.dumps(key, ensure_ascii=False)


def _container(open_: str, close: str, entries: list[tuple[str | None, Any]], indent: str | None, depth: int):
    if not entries:
        yield open_ + close
        return
    yield open_
    for i, (key, item) in enumerate(entries):
        if i:
            yield ","
        if indent is not None:
            yield "\n" + indent * (depth + 1)
        if key is not None:
            yield key + ":"
        yield from _encode(item, indent, depth + 1)
    if indent is not None:
        yield "\n" + indent * depth
    yield close


# A JSON string (skipped whole, so nothing inside one is touched) or a bare integer object key after '{' or ','.
_BARE_KEY = re.compile(r'"(?:[^"\\]|\\.)*"|([{,]\s*)(-?\d+)(\s*:)', re.DOTALL)


# -- object map keys and doubles (remoting bodies) ---------------------------------------------------------------------
# fastjson2 writes a Map whose keys are beans (ConsumeStats.offsetTable: Map<MessageQueue, OffsetWrapper>) with each
# key as a flat JSON object: {"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{...}}}. A key object that
# has ``to_json()`` is written that way; decode_json hands such a key back as its compact JSON text (a str key, as
# for bare integer keys). A double (ConsumeStats.consumeTps) must be wrapped in JavaDouble: metadata files have none,
# so a plain float stays an error; it is written as Java prints ordinary magnitudes ("0.0", "1.5").


@runtime_checkable
class JsonObjectKey(Protocol):
    def to_json(self) -> Mapping[str, Any]: ...


class JavaDouble(float):
    """A float that is meant to be a Java double in a remoting body."""


def _double(value: float) -> str:
    if value != value or value in (float("inf"), float("-inf")):
        raise TypeError(f"cannot encode {value!r} as metadata JSON")
    return repr(float(value))


# A string (skipped whole) or a flat object used as a map key after '{' or ',' (never nested: MessageQueue-like).
_OBJECT_KEY = re.compile(r'"(?:[^"\\]|\\.)*"|([{,]\s*)(\{(?:[^{}"]|"(?:[^"\\]|\\.)*")*\})(\s*:)', re.DOTALL)


def _quote_object_keys(text: str) -> str:
    return _OBJECT_KEY.sub(lambda m: f"{m[1]}{json.dumps(m[2], ensure_ascii=False)}{m[3]}" if m[2] else m[0], text)


def decode_json(text: str) -> Any:
    """Parse fastjson2 text, bare integer keys included (they come back as str keys, like any JSON key).

    Examples:
        >>> decode_json('{"t@g":{0:250, 1 : 7}}')
        {'t@g': {'0': 250, '1': 7}}
    """
    quoted = _BARE_KEY.sub(lambda m: f'{m[1]}"{m[2]}"{m[3]}' if m[2] is not None else m[0], text)
    if "{{" in quoted or ",{" in quoted:
        quoted = _quote_object_keys(quoted)
    return json.loads(quoted)


def encode_bean(value: Mapping[str, Any]) -> str:
    """``encode_json`` of a bean whose keys are all strings and whose values are str, int, bool, lists and such
    beans, none of them None (DLedger's bodies): the same text, from json's C encoder, keys sorted at every level.

    Examples:
        >>> encode_bean({"term": 3, "entry": {"pos": 0, "body": "AA=="}})
        '{"entry":{"body":"AA==","pos":0},"term":3}'
    """
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def decode_bean(text: str) -> Any:
    """Parse JSON without bare integer keys (a bean as fastjson 1 writes it, as DLedger's members do): json's parser
    alone, without ``decode_json``'s scan for bare keys, which costs as much again on a large body."""
    return json.loads(text)
