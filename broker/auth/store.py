"""Where users and ACLs are kept: two tables under ``${storePathRootDir}/config``.

Apache's broker keeps them in two RocksDB databases, ``config/users`` and ``config/acls`` (key: the username or the
``User:name`` subject key; value: the stored JSON of ``model.py``). rmq keeps the same keys and the same values in
one JSON file per table, ``config/users.json`` and ``config/acls.json`` (``{key: value, ...}``), written atomically
on every change (``broker.common.persist``, which also falls back to the ``.bak`` of a torn write), as Apache flushes
its write-ahead log on every put.

Rule 1: these files are read and written here only.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from broker.auth.model import Acl, User
from broker.common.fastjson import encode_json
from broker.common.persist import load_json, write_atomic

T = TypeVar("T", User, Acl)

USERS_FILE = "users.json"
ACLS_FILE = "acls.json"


def _table(data: Any) -> dict[str, dict[str, Any]]:
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise ValueError("not a JSON object of JSON objects")
    return data


class _Table(Generic[T]):
    """One key-value table in one file, loaded at start and rewritten after each change. A row is decoded into its
    model (frozen) the first time it is read after a change and kept: the broker reads a user and an ACL for every
    request it checks, and decoding the stored JSON each time cost more than the signature."""

    def __init__(self, path: str, decode: Callable[[dict[str, Any]], T]) -> None:
        self.path = path
        self._decode = decode
        self._rows: dict[str, dict[str, Any]] = load_json(path, _table) or {}
        self._decoded: dict[str, T] = {}

    def get(self, key: str) -> T | None:
        value = self._decoded.get(key)
        if value is None and (row := self._rows.get(key)) is not None:
            value = self._decoded[key] = self._decode(row)
        return value

    def put(self, key: str, value: dict[str, Any]) -> None:
        self._rows[key] = value
        self._decoded.pop(key, None)
        self._write()

    def delete(self, key: str) -> None:
        self._decoded.pop(key, None)
        if self._rows.pop(key, None) is not None:
            self._write()

    def values(self) -> list[T]:
        """In key order, as RocksDB iterates (byte order of the UTF-8 keys)."""
        keys = sorted(self._rows, key=lambda k: k.encode("utf-8"))
        return [value for key in keys if (value := self.get(key)) is not None]

    def _write(self) -> None:
        write_atomic(self.path, encode_json(self._rows))


class AuthStore:
    """The users and ACLs tables of one broker (``LocalAuthenticationMetadataProvider`` and
    ``LocalAuthorizationMetadataProvider``, without their expiring caches: every lookup reads the in-memory table,
    whose rows are decoded once per change)."""

    def __init__(self, config_dir: str) -> None:
        os.makedirs(config_dir, exist_ok=True)
        self._users = _Table(os.path.join(config_dir, USERS_FILE), User.from_stored)
        self._acls = _Table(os.path.join(config_dir, ACLS_FILE), Acl.from_stored)

    def get_user(self, username: str) -> User | None:
        return self._users.get(username)

    def put_user(self, user: User) -> None:
        self._users.put(user.username, user.to_stored())

    def delete_user(self, username: str) -> None:
        self._users.delete(username)

    def users(self) -> list[User]:
        return self._users.values()

    def get_acl(self, username: str) -> Acl | None:
        return self._acls.get(Acl(username, ()).subject_key)

    def put_acl(self, acl: Acl) -> None:
        self._acls.put(acl.subject_key, acl.to_stored())

    def delete_acl(self, username: str) -> None:
        self._acls.delete(Acl(username, ()).subject_key)

    def acls(self) -> list[Acl]:
        return self._acls.values()
