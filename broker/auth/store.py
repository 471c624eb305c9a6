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
from collections.abc import Iterator
from typing import Any

from broker.auth.model import Acl, User
from broker.common.fastjson import encode_json
from broker.common.persist import load_json, write_atomic

USERS_FILE = "users.json"
ACLS_FILE = "acls.json"


def _table(data: Any) -> dict[str, dict[str, Any]]:
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise ValueError("not a JSON object of JSON objects")
    return data


class _Table:
    """One key-value table in one file, loaded at start and rewritten after each change."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._rows: dict[str, dict[str, Any]] = load_json(path, _table) or {}

    def get(self, key: str) -> dict[str, Any] | None:
        return self._rows.get(key)

    def put(self, key: str, value: dict[str, Any]) -> None:
        self._rows[key] = value
        self._write()

    def delete(self, key: str) -> None:
        if self._rows.pop(key, None) is not None:
            self._write()

    def items(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """In key order, as RocksDB iterates (byte order of the UTF-8 keys)."""
        return iter(sorted(self._rows.items(), key=lambda kv: kv[0].encode("utf-8")))

    def _write(self) -> None:
        write_atomic(self.path, encode_json(self._rows))


class AuthStore:
    """The users and ACLs tables of one broker (``LocalAuthenticationMetadataProvider`` and
    ``LocalAuthorizationMetadataProvider``, without their caches: every lookup reads the in-memory table)."""

    def __init__(self, config_dir: str) -> None:
        os.makedirs(config_dir, exist_ok=True)
        self._users = _Table(os.path.join(config_dir, USERS_FILE))
        self._acls = _Table(os.path.join(config_dir, ACLS_FILE))

    def get_user(self, username: str) -> User | None:
        row = self._users.get(username)
        return None if row is None else User.from_stored(row)

    def put_user(self, user: User) -> None:
        self._users.put(user.username, user.to_stored())

    def delete_user(self, username: str) -> None:
        self._users.delete(username)

    def users(self) -> list[User]:
        return [User.from_stored(row) for _, row in self._users.items()]

    def get_acl(self, username: str) -> Acl | None:
        row = self._acls.get(Acl(username, ()).subject_key)
        return None if row is None else Acl.from_stored(row)

    def put_acl(self, acl: Acl) -> None:
        self._acls.put(acl.subject_key, acl.to_stored())

    def delete_acl(self, username: str) -> None:
        self._acls.delete(Acl(username, ()).subject_key)

    def acls(self) -> list[Acl]:
        return [Acl.from_stored(row) for _, row in self._acls.items()]
