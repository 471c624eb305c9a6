"""``plain_acl.yml``, ACL 1.0's accounts file (Apache's ``PlainAccessData`` and ``PlainAccessConfig``, 5.3.2), read
once per load into frozen values and written back by the admin requests.

The file is read with PyYAML's ``BaseLoader``: every scalar stays the text written, as snakeyaml's typed load into
String fields keeps it (``secretKey: 12345678`` is the string ``"12345678"``, ``0123`` keeps its zero). An unknown
key is refused, as snakeyaml's bean load refuses it; an empty file holds nothing.

Which files: ``<home>/conf/plain_acl.yml`` (created empty when missing, as Apache does) and every ``*.yml``/``*.yaml``
under ``<home>/conf/acl/``, recursively. ``home`` is the broker's ``rocketmqHome`` (Apache's ``rocketmq.home.dir``,
else ``ROCKETMQ_HOME``).

Examples:
    >>> data = parse_acl_text("accounts:\\n- accessKey: RocketMQ\\n  secretKey: 12345678\\n  admin: true\\n", "x.yml")
    >>> data.accounts[0].secret_key, data.accounts[0].admin
    ('12345678', True)
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from broker.common.errors import AclException, ConfigError
from broker.common.persist import write_atomic

DEFAULT_ACL_FILE = Path("conf") / "plain_acl.yml"
ACL_DIR = Path("conf") / "acl"
KEY_MIN_LENGTH = 6  # AclConstants.ACCESS_KEY_MIN_LENGTH and SECRET_KEY_MIN_LENGTH: a key must be longer
_NULLS = frozenset({"", "~", "null", "Null", "NULL"})
_TRUE = frozenset({"true", "yes", "on", "y"})
_FALSE = frozenset({"false", "no", "off", "n"})
ACCOUNT_KEYS = ("accessKey", "secretKey", "whiteRemoteAddress", "admin", "defaultTopicPerm", "defaultGroupPerm",
                "topicPerms", "groupPerms")
FILE_KEYS = ("globalWhiteRemoteAddresses", "accounts", "dataVersion")


@dataclass(frozen=True, slots=True)
class PlainAccessConfig:
    """One account: ``topic_perms``/``group_perms`` items read ``name=PERM``."""

    access_key: str | None
    secret_key: str | None
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: tuple[str, ...] | None = None  # None: not given (an update keeps what the file has)
    group_perms: tuple[str, ...] | None = None

    def to_yaml(self) -> dict[str, Any]:
        """snakeyaml's dumpAsMap of the bean: its properties in alphabetical order."""
        return {"accessKey": self.access_key, "admin": self.admin, "defaultGroupPerm": self.default_group_perm,
                "defaultTopicPerm": self.default_topic_perm, "groupPerms": list(self.group_perms or ()),
                "secretKey": self.secret_key, "topicPerms": list(self.topic_perms or ()),
                "whiteRemoteAddress": self.white_remote_address}


@dataclass(frozen=True, slots=True)
class AclDataVersion:
    counter: int = 0
    timestamp: int = 0

    def next(self) -> AclDataVersion:
        return AclDataVersion(self.counter + 1, int(time.time() * 1000))


@dataclass(frozen=True, slots=True)
class PlainAccessData:
    """One ACL file."""

    global_white_remote_addresses: tuple[str, ...] = ()
    accounts: tuple[PlainAccessConfig, ...] = ()
    data_version: AclDataVersion | None = None

    def to_yaml(self) -> dict[str, Any]:
        data: dict[str, Any] = {"accounts": [a.to_yaml() for a in self.accounts]}
        if self.data_version is not None:
            data["dataVersion"] = [{"counter": self.data_version.counter,
                                    "timestamp": self.data_version.timestamp}]
        data["globalWhiteRemoteAddresses"] = list(self.global_white_remote_addresses)
        return data


def check_account_keys(account: PlainAccessConfig) -> None:
    """checkPlainAccessConfig: both keys set and longer than 6 characters (at load and on every update)."""
    if (account.access_key is None or account.secret_key is None or len(account.access_key) <= KEY_MIN_LENGTH
            or len(account.secret_key) <= KEY_MIN_LENGTH):
        raise AclException(f"The accessKey={_java(account.access_key)} and secretKey={_java(account.secret_key)} "
                           "cannot be null and length should longer than 6")


def _java(value: object) -> str:
    return "null" if value is None else str(value)


def _text(value: Any, where: str) -> str | None:
    if value is None or isinstance(value, str) and value in _NULLS:
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{where}: expected a single value, got {value!r}")
    return value


def _flag(value: Any, where: str) -> bool:
    text = _text(value, where)
    if text is None:
        return False
    if text.lower() in _TRUE | _FALSE:
        return text.lower() in _TRUE
    raise ConfigError(f"{where}: expected true or false, got {text!r}")


def _is_null(value: Any) -> bool:
    """YAML's null as BaseLoader reads it: absent, empty, ``~`` or ``null`` (snakeyaml writes ``topicPerms: null``
    for an account without perms)."""
    return value is None or isinstance(value, str) and value in _NULLS


def _list(value: Any, where: str) -> tuple[str, ...]:
    if _is_null(value):
        return ()
    if not isinstance(value, list):
        raise ConfigError(f"{where}: expected a list, got {value!r}")
    return tuple(t for i, item in enumerate(value) if (t := _text(item, f"{where}[{i}]")) is not None)


def _mapping(value: Any, where: str, keys: Sequence[str]) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a mapping, got {value!r}")
    unknown = sorted(set(value) - set(keys))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown} (known: {', '.join(keys)})")
    return value


def _account(value: Any, where: str) -> PlainAccessConfig:
    data = _mapping(value, where, ACCOUNT_KEYS)
    return PlainAccessConfig(
        access_key=_text(data.get("accessKey"), f"{where}.accessKey"),
        secret_key=_text(data.get("secretKey"), f"{where}.secretKey"),
        white_remote_address=_text(data.get("whiteRemoteAddress"), f"{where}.whiteRemoteAddress"),
        admin=_flag(data.get("admin"), f"{where}.admin"),
        default_topic_perm=_text(data.get("defaultTopicPerm"), f"{where}.defaultTopicPerm"),
        default_group_perm=_text(data.get("defaultGroupPerm"), f"{where}.defaultGroupPerm"),
        topic_perms=_list(data.get("topicPerms"), f"{where}.topicPerms"),
        group_perms=_list(data.get("groupPerms"), f"{where}.groupPerms"))


def _data_version(value: Any, where: str) -> AclDataVersion | None:
    items = value if isinstance(value, list) else [] if _is_null(value) else None
    if items is None:
        raise ConfigError(f"{where}: expected a list of counter/timestamp, got {value!r}")
    if not items:
        return None
    first = _mapping(items[0], f"{where}[0]", ("counter", "timestamp"))
    try:
        return AclDataVersion(int(first.get("counter") or 0), int(first.get("timestamp") or 0))
    except ValueError as err:
        raise ConfigError(f"{where}[0]: counter and timestamp must be numbers ({err})") from err


def parse_acl_text(text: str, where: str) -> PlainAccessData | None:
    """One file's text; None when it holds nothing (Apache logs ``No data in file`` and skips it)."""
    try:
        raw = yaml.load(text, Loader=yaml.BaseLoader)
    except yaml.YAMLError as err:
        raise ConfigError(f"{where}: not YAML ({err})") from err
    if raw is None or raw == "":
        return None
    data = _mapping(raw, where, FILE_KEYS)
    accounts = data.get("accounts")
    if not _is_null(accounts) and not isinstance(accounts, list):
        raise ConfigError(f"{where}.accounts: expected a list, got {accounts!r}")
    return PlainAccessData(
        global_white_remote_addresses=_list(data.get("globalWhiteRemoteAddresses"),
                                            f"{where}.globalWhiteRemoteAddresses"),
        accounts=tuple(_account(a, f"{where}.accounts[{i}]") for i, a in enumerate(() if _is_null(accounts)
                                                                                     else accounts)),
        data_version=_data_version(data.get("dataVersion"), f"{where}.dataVersion"))


def read_acl_file(path: Path) -> PlainAccessData | None:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"{path}: cannot read the ACL file ({err})") from err
    return parse_acl_text(text, str(path))


def write_acl_file(path: Path, data: PlainAccessData) -> None:
    """Rewrite a file as an admin update does (crash-safe: a reader never sees half of it)."""
    write_atomic(str(path), yaml.safe_dump(data.to_yaml(), sort_keys=False, default_flow_style=False))


@dataclass(frozen=True, slots=True)
class AclFiles:
    """Where the ACL files of a broker home are."""

    home: Path
    default_file: Path = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "default_file", self.home / DEFAULT_ACL_FILE)

    def ensure_default(self) -> None:
        """assureAclConfigFilesExist: the default file is made (empty) when missing."""
        self.default_file.parent.mkdir(parents=True, exist_ok=True)
        self.default_file.touch(exist_ok=True)

    def all(self) -> list[Path]:
        """The files a load reads: every yml under conf/acl (sorted), then the default file."""
        acl_dir = self.home / ACL_DIR
        found = sorted(p for p in acl_dir.rglob("*") if p.is_file() and p.suffix in (".yml", ".yaml")) \
            if acl_dir.is_dir() else []
        if self.default_file.exists() and self.default_file not in found:
            found.append(self.default_file)
        return found
