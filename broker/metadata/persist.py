"""Where the broker's metadata files live, their JSON dialect, and how they are written without tearing.

Rule 1: the config file paths (BrokerPathConfigHelper), the fastjson2 JSON dialect and the DataVersion shape are
defined here and nowhere else; topics.py, groups.py and offsets.py only build and read plain dicts.

**The dialect.** Apache's broker writes these files with ``RemotingSerializable.toJson(obj, true)``, which is
fastjson2 with PrettyFormat: one tab per level, ``"key":value`` with no space, bean properties in alphabetical
order, null properties left out, no trailing newline, and -- the one departure from JSON -- integer map keys
written bare (``"offsetTable":{"t@g":{0:250}}``). We write exactly that (test_java_metadata checks it byte for byte
against Java's output), and read it by quoting bare integer keys before handing the text to ``json``. fastjson2
reads both quoted and bare integer keys, so Apache's broker reads our files too.

**The write.** ``write_atomic`` is MixAll.string2File / ConfigManager.persist made crash-safe::

    1. write  name.tmp, fsync it          crash here: name is untouched, .tmp is partial
    2. rename name -> name.bak            crash here: no name; .tmp is complete; .bak is the previous version
    3. rename name.tmp -> name            crash here: name is the new version
    4. fsync the directory

Java moves the file to .bak and then rewrites it in place, so a crash mid-write leaves a torn file. ``load_json``
reads ``name``; if it is missing it takes a ``.tmp`` that parses (the crash between 2 and 3: that is the newest
complete version, fsynced before any rename), then ``.bak``. A corrupt ``name`` is moved aside to
``name.corrupt`` (Java deletes it) so that the next write cannot rotate it into ``.bak`` over the good copy.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar, runtime_checkable

from broker.errors import MetadataCorrupt

log = logging.getLogger(__name__)

T = TypeVar("T")

TMP_SUFFIX = ".tmp"
BAK_SUFFIX = ".bak"
CORRUPT_SUFFIX = ".corrupt"
_INDENT = "\t"


# -- paths (BrokerPathConfigHelper, StorePathConfigHelper) -------------------------------------------------------------


def config_dir(store_path_root_dir: str) -> str:
    return os.path.join(store_path_root_dir, "config")


def topic_config_path(store_path_root_dir: str) -> str:
    return os.path.join(config_dir(store_path_root_dir), "topics.json")


def subscription_group_path(store_path_root_dir: str) -> str:
    return os.path.join(config_dir(store_path_root_dir), "subscriptionGroup.json")


def consumer_offset_path(store_path_root_dir: str) -> str:
    return os.path.join(config_dir(store_path_root_dir), "consumerOffset.json")


def delay_offset_path(store_path_root_dir: str) -> str:
    """ScheduleMessageService's per-delay-level progress (written by the schedule service, not here)."""
    return os.path.join(config_dir(store_path_root_dir), "delayOffset.json")


# -- DataVersion ------------------------------------------------------------------------------------------------------


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


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
        return cls(timestamp=_now_ms())

    def next_version(self, state_version: int = 0) -> DataVersion:
        return replace(self, state_version=state_version, timestamp=_now_ms(), counter=self.counter + 1)

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


# -- the fastjson2 dialect --------------------------------------------------------------------------------------------


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


# -- atomic files -----------------------------------------------------------------------------------------------------

_write_lock = threading.Lock()  # MixAll.string2File is synchronized: two writers must not share one .tmp


def write_atomic(path: str, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8), keeping the previous version as ``path.bak``; see the module doc."""
    directory = os.path.dirname(path) or "."
    tmp = path + TMP_SUFFIX
    with _write_lock:
        os.makedirs(directory, exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(text.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        if os.path.exists(path):
            os.replace(path, path + BAK_SUFFIX)
        os.replace(tmp, path)
        _fsync_dir(directory)


def persist_quietly(persist: Callable[[], None], path: str) -> bool:
    """Run a manager's ``persist`` after a change, logging instead of raising (Java's ConfigManager.persist does
    the same): the change is already live in memory, and the next persist writes it. False if it failed."""
    try:
        persist()
    except OSError:
        log.exception("failed to persist %s; the change is kept in memory and written by the next persist", path)
        return False
    return True


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _read_text(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8")
    except FileNotFoundError:
        return None


def _try_decode(path: str, decode: Callable[[Any], T]) -> tuple[T | None, str | None]:
    """(value, None) when ``path`` holds a decodable file, (None, None) when it is missing or empty, else
    (None, reason)."""
    try:
        text = _read_text(path)
        if not text:
            return None, None
        return decode(decode_json(text)), None
    except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError, AttributeError) as err:
        return None, f"{type(err).__name__}: {err}"


def load_json(path: str, decode: Callable[[Any], T]) -> T | None:
    """Load ``path`` through ``decode`` (parsed JSON -> value), falling back as the module doc says.

    Returns None when there is nothing to load (a fresh store). Raises MetadataCorrupt when ``path`` exists but is
    unreadable and so is every fallback: Java would start empty there, which silently drops topics and offsets.
    """
    value, reason = _try_decode(path, decode)
    if value is not None:
        return value
    if reason is not None:
        log.error(
            "metadata file %s is unreadable (%s); moving it to %s and trying the backup",
            path,
            reason,
            path + CORRUPT_SUFFIX,
        )
        os.replace(path, path + CORRUPT_SUFFIX)
    elif os.path.exists(path + TMP_SUFFIX):
        value, tmp_reason = _try_decode(path + TMP_SUFFIX, decode)
        if value is not None:
            log.warning("recovered %s from %s (a write was interrupted before its rename)", path, TMP_SUFFIX)
            return value
        log.info("ignoring the incomplete %s%s (%s)", path, TMP_SUFFIX, tmp_reason)
    value, bak_reason = _try_decode(path + BAK_SUFFIX, decode)
    if value is not None:
        log.warning("loaded %s from its backup %s%s", path, path, BAK_SUFFIX)
        return value
    if bak_reason is not None:
        raise MetadataCorrupt(path, f"backup: {bak_reason}" + (f"; file: {reason}" if reason else ""))
    if reason is not None:
        raise MetadataCorrupt(path, f"{reason}; no backup")
    return None
