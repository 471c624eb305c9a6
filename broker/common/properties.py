"""Java ``.properties`` files and config dataclasses: one parser, one key-to-field rule, shared by every config.

``parse_properties`` reads Java's syntax (``mqbroker -c``, ``mqnamesrv -c``, the jobs' conf); ``parse_fields`` turns
the keys that name fields of a config dataclass (RocketMQ's camelCase, ``mappedFileSizeCommitLog``) into typed
values for its snake_case fields (``mapped_file_size_commit_log``), and ``to_camel`` goes back. ``write_config_file``
writes the keys a running server accepted (UPDATE_BROKER_CONFIG, UPDATE_NAMESRV_CONFIG) back to its config file.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from enum import Enum

from broker.common.errors import ConfigError
from broker.common.persist import write_atomic

_WHITESPACE = " \t\f"
_NEWLINES = re.compile(r"\r\n|\r|\n")
_SIMPLE_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str) -> dict[str, str]:
    """``java.util.Properties.load``: ``key=value``, ``key = value``, ``key: value``, ``key value``; ``#`` and
    ``!`` comment lines; an odd number of trailing backslashes continues a line; ``\\t \\n \\r \\f \\uXXXX`` escapes.
    Later keys win.

    Examples:
        >>> parse_properties("a = 1\\n! note\\nb: two \\\\\\n   words\\nc\\\\=d=e")
        {'a': '1', 'b': 'two words', 'c=d': 'e'}
    """
    props: dict[str, str] = {}
    for number, line in _logical_lines(text):
        key, value = _split_key_value(line)
        props[_unescape(key, number)] = _unescape(value, number)
    return props


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(first line number, logical line) with leading whitespace, comments and continuations handled."""
    pending: str | None = None
    start = 0
    for number, raw in enumerate(_NEWLINES.split(text), start=1):
        line = raw.lstrip(_WHITESPACE)
        if pending is None:
            if not line or line[0] in "#!":
                continue  # a comment line never continues, whatever it ends with
            pending, start = "", number
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2:
            pending += line[:-1]
            continue
        yield start, pending + line
        pending = None
    if pending is not None:
        yield start, pending  # the file ended right after a continuation backslash


def _split_key_value(line: str) -> tuple[str, str]:
    i, n = 0, len(line)
    has_separator = False
    while i < n:
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=:":
            has_separator = True
            break
        if c in _WHITESPACE:
            break
        i += 1
    key, j = line[: min(i, n)], i + 1
    while j < n and line[j] in _WHITESPACE:
        j += 1
    if not has_separator and j < n and line[j] in "=:":
        j += 1
        while j < n and line[j] in _WHITESPACE:
            j += 1
    return key, line[j:]


def _unescape(text: str, line_number: int) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        i += 1
        if c != "\\" or i >= n:
            out.append(c)
            continue
        c = text[i]
        i += 1
        if c == "u":
            digits = text[i : i + 4]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                escape = "\\u" + digits
                raise ConfigError(f"line {line_number}: malformed \\uxxxx escape {escape!r}")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_SIMPLE_ESCAPES.get(c, c))
    result = "".join(out)
    # \ud83d\ude00 is one character written as two UTF-16 escapes, as Java sees it: join such pairs.
    return result.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def read_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read a properties file. Java reads ISO-8859-1; we read UTF-8 (which ASCII files are), falling back to
    ISO-8859-1 for bytes that are not UTF-8."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as err:
        raise ConfigError(f"cannot read broker config {os.fspath(path)}: {err}") from err
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("iso-8859-1")
    return parse_properties(text)


def absolute_paths(props: Mapping[str, str], keys: Iterable[str], base_dir: str) -> dict[str, str]:
    """``props`` with the values of the path ``keys`` made absolute: ``~`` expanded, a relative path taken from
    ``base_dir``. An empty value (the key's default) stays empty.

    Examples:
        >>> absolute_paths({"storePathRootDir": "data/store", "brokerName": "a"}, ["storePathRootDir"], "/etc/rmq")
        {'storePathRootDir': '/etc/rmq/data/store', 'brokerName': 'a'}
    """
    resolved = dict(props)
    for key in keys:
        value = resolved.get(key, "").strip()
        if value:
            resolved[key] = os.path.normpath(os.path.join(base_dir, os.path.expanduser(value)))
    return resolved


def read_config_file(path: str | os.PathLike[str], path_keys: Iterable[str]) -> dict[str, str]:
    """A server's config file (``mqbroker -c``, ``mqnamesrv -c``), its relative paths taken from the file's own
    directory.

    Why not the working directory, as Java's File does for Apache's servers: the working directory is whatever the
    shell, systemd unit or container that started the server had, so ``storePathRootDir=./data/store`` would name
    another store after an innocent change of how the server is started, and a broker would start empty beside its
    data. The file's directory does not move under it. A file shared with Apache's servers should give absolute
    paths, which mean the same to both."""
    return absolute_paths(read_properties(path), path_keys, os.path.dirname(os.path.abspath(path)))


def to_camel(name: str) -> str:
    if name in _SPECIAL_NAMES:
        return _SPECIAL_NAMES[name]
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def to_snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


# RocketMQ spells these with upper-case runs that the plain rule would split differently.
_SPECIAL_KEYS = {"checkCRCOnRecover": "check_crc_on_recover", "enableDLegerCommitLog": "enable_d_leger_commit_log",
                 "storePathDLedgerCommitLog": "store_path_d_ledger_commit_log"}
_SPECIAL_NAMES = {v: k for k, v in _SPECIAL_KEYS.items()}


def parse_fields(cls: type, props: dict[str, str]) -> dict[str, object]:
    """Convert the properties that name fields of dataclass ``cls`` into typed values; ConfigError names the key."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    values: dict[str, object] = {}
    for key, raw in props.items():
        name = _SPECIAL_KEYS.get(key, to_snake(key))
        if name not in fields:
            continue
        default = getattr(cls(), name)
        try:
            values[name] = _convert(type(default), raw.strip())
        except (ValueError, KeyError) as err:
            raise ConfigError(f"bad value for {key}: {raw!r} ({err})") from err
    return values


def _convert(kind: type, raw: str) -> object:
    if kind is bool:
        if raw.lower() not in ("true", "false"):
            raise ValueError("expected true or false")
        return raw.lower() == "true"
    if issubclass(kind, Enum):
        return kind[raw]
    return kind(raw)


def format_value(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, Enum):
        return str(value.value)
    return str(value)


# -- writing back ------------------------------------------------------------------------------------------------------


def write_config_file(path: str, props: Mapping[str, str]) -> None:
    """Set ``props`` in the properties file ``path``: a line that sets one of the keys is replaced (the first one;
    later ones are dropped), the keys the file lacked are appended, every other line stays as it was."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        lines = []
    pending = dict(props)
    written: list[str] = []
    for line in lines:
        key = _simple_key(line)
        if key in props:
            if key in pending:
                written.append(property_line(key, pending.pop(key)))
            continue
        written.append(line)
    written += [property_line(key, value) for key, value in pending.items()]
    write_atomic(path, "\n".join(written) + "\n")


def _simple_key(line: str) -> str | None:
    """The key a one-line ``key=value`` entry sets; None for a comment, a blank or a continued line."""
    stripped = line.lstrip(" \t\f")
    if not stripped or stripped[0] in "#!" or (len(stripped) - len(stripped.rstrip("\\"))) % 2:
        return None
    return next(iter(parse_properties(stripped)), None)


def property_line(key: str, value: str) -> str:
    """``key=value`` escaped as Properties.store writes it, so parse_properties reads back the same strings."""
    def escape(text: str, specials: str) -> str:
        out = []
        for i, c in enumerate(text):
            if c == "\\" or c in specials or (c == " " and i == 0):
                out.append("\\" + c)
            else:
                out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}.get(c, c))
        return "".join(out)

    return f"{escape(key, ' =:#!')}={escape(value, '#!')}"

