"""ACL 1.0 (Apache's ``PlainPermissionManager`` and ``PlainAccessValidator``, 4.4.0 to 5.3.2): the accounts of
``plain_acl.yml`` and the check every request passes with ``aclEnable=true``.

Rule 1: the order of the check is Apache's and lives in ``validate`` only:
1. the remote IP matches a global white-list pattern: allowed (no signature, no permission);
2. no ``AccessKey``: ``No accessKey is configured``; 3. an unknown one: ``No acl config for <ak>``;
4. the account's own ``whiteRemoteAddress`` matches: allowed;
5. the signature does not match: ``Check signature failed for accessKey=<ak>``;
6. the request publishes to ``RMQ_SYS_TRACE_TOPIC`` (exactly PUB): allowed (message trace);
7. an admin account may do anything; an admin-only code from another is refused; then each resource the request
   needs, in Java HashMap order: a listed one needs its listed permission (``No permission for topic:T``), an unlisted
   one the account's default for topics or groups (``No default permission for group:G``).
A refusal is an ``AclException``; the broker answers it SYSTEM_ERROR with ``AclException.remark``.

The files are read at start (a bad file stops the broker) and again when one changes: ``poll`` compares the files'
modification times and their number, as Apache's ``AclFileWatchService`` does every 5 s. A reload that fails keeps the
accounts already loaded and logs why. The admin requests (50, 51, 53) rewrite a file and reload it at once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from broker.auth.plain_address import AddressPattern, address_pattern
from broker.auth.plain_config import (
    AclDataVersion,
    AclFiles,
    PlainAccessConfig,
    PlainAccessData,
    check_account_keys,
    read_acl_file,
    write_acl_file,
)
from broker.auth.plain_resources import (
    ADMIN_CODES,
    PERM_NAMES,
    check_permission,
    is_trace_publish,
    needed_resources,
    parse_perm,
    print_resource,
)
from broker.common.errors import AclException, ConfigError
from broker.common.hash_order import hash_map_order
from broker.common.validation import is_retry_topic, retry_topic
from broker.remoting.command import RemotingCommand
from broker.remoting.signing import ACCESS_KEY, signature_matches

log = logging.getLogger(__name__)

WATCH_INTERVAL_S = 5.0  # AclFileWatchService.WATCH_INTERVAL
_MANAGER = "org.apache.rocketmq.acl.plain.PlainPermissionManager.validate(PlainPermissionManager.java:{})"
_CHECKER = "org.apache.rocketmq.acl.plain.PlainPermissionChecker.check(PlainPermissionChecker.java:{})"
_BUILD = "org.apache.rocketmq.acl.common.Permission.parseResourcePerms(Permission.java:106)"


@dataclass(frozen=True, slots=True)
class PlainAccount:
    """An account as the check uses it (``PlainAccessResource.build``): perms as bits, groups as retry topics."""

    access_key: str
    secret_key: str
    white_address: AddressPattern
    admin: bool
    default_topic_perm: int
    default_group_perm: int
    perms: Mapping[str, int]

    @classmethod
    def build(cls, config: PlainAccessConfig) -> PlainAccount:
        check_account_keys(config)
        perms: dict[str, int] = {}
        for is_topic, items in ((False, config.group_perms), (True, config.topic_perms)):
            for item in items or ():
                parts = [p for p in item.split("=") if p]  # StringUtils.split drops empty tokens
                if len(parts) != 2:
                    raise AclException(f"Parse resource permission failed for {'topic' if is_topic else 'group'}:"
                                       f"{item}", _BUILD)
                name = parts[0].strip()
                perms[name if is_topic else retry_topic(name)] = parse_perm(parts[1])
        assert config.access_key is not None and config.secret_key is not None  # check_account_keys
        return cls(config.access_key, config.secret_key, address_pattern(config.white_remote_address), config.admin,
                   parse_perm(config.default_topic_perm), parse_perm(config.default_group_perm), perms)


@dataclass(frozen=True, slots=True)
class AclTables:
    """Everything one load read: accounts by access key (the first file naming a key wins), the file of each, the
    merged global white list, and each file's data version."""

    accounts: Mapping[str, PlainAccount]
    account_files: Mapping[str, Path]
    global_white: tuple[AddressPattern, ...]
    versions: Mapping[Path, AclDataVersion]
    stamps: Mapping[Path, int]  # mtime_ns of each file read


def _stamp(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return -1


def load_tables(files: AclFiles) -> AclTables:
    """PlainPermissionManager.load: every file, in order. ConfigError or AclException on a bad file."""
    accounts: dict[str, PlainAccount] = {}
    account_files: dict[str, Path] = {}
    white: list[AddressPattern] = []
    versions: dict[Path, AclDataVersion] = {}
    stamps: dict[Path, int] = {}
    for path in files.all():
        stamps[path] = _stamp(path)
        data = read_acl_file(path)
        if data is None:
            log.warning("No data in file %s", path)
            continue
        try:
            white.extend(address_pattern(p) for p in data.global_white_remote_addresses)
            for config in data.accounts:
                account = PlainAccount.build(config)
                if account.access_key in accounts:
                    log.warning("The accessKey %s is repeated in multiple ACL files", account.access_key)
                    continue
                accounts[account.access_key] = account
                account_files[account.access_key] = path
        except AclException as err:
            raise ConfigError(f"{path}: {err.message}") from err
        versions[path] = data.data_version or AclDataVersion()
    return AclTables(accounts, account_files, tuple(white), versions, stamps)


def source_address(remote_address: str) -> str:
    """PlainAccessResource.parse: the remote address before its last ``:``."""
    return remote_address.rpartition(":")[0] if ":" in remote_address else remote_address


class PlainPermissionManager:
    """The loaded accounts of one broker home, the check, the watcher's poll and the admin changes."""

    def __init__(self, home: Path) -> None:
        self.files = AclFiles(Path(home))
        self.files.ensure_default()
        self._lock = threading.Lock()  # admin changes and reloads one at a time; checks read a snapshot
        self.tables = load_tables(self.files)
        log.info("ACL 1.0: %d account(s) from %s", len(self.tables.accounts), [str(p) for p in self.tables.stamps])

    # -- the check ----------------------------------------------------------------------------------------------------

    def validate(self, request: RemotingCommand, source_ip: str) -> None:
        """AclException when ACL 1.0 refuses ``request`` from ``source_ip``; the steps are the module's."""
        fields = request.ext_fields
        access_key = fields.get(ACCESS_KEY) if fields else None
        needed = needed_resources(request) if fields else {}  # the parse comes first, as Apache's hook does
        tables = self.tables
        if any(pattern.matches(source_ip) for pattern in tables.global_white):
            return
        if access_key is None:
            raise AclException("No accessKey is configured", _MANAGER.format(604))
        account = tables.accounts.get(access_key)
        if account is None:
            raise AclException(f"No acl config for {access_key}", _MANAGER.format(608))
        if account.white_address.matches(source_ip):
            return
        if not signature_matches(request, account.secret_key):
            raise AclException(f"Check signature failed for accessKey={access_key}", _MANAGER.format(625))
        if is_trace_publish(needed):
            return
        check_perm(request.code, needed, account)

    # -- reload -------------------------------------------------------------------------------------------------------

    def poll(self) -> bool:
        """AclFileWatchService's tick: reload when a file was added, removed or modified; True if it reloaded."""
        current = {path: _stamp(path) for path in self.files.all()}
        if current == dict(self.tables.stamps):
            return False
        try:
            self.reload()
        except (ConfigError, AclException) as err:
            log.error("ACL files changed but were not loaded (the accounts loaded before stay): %s", err)
            self.tables = replace(self.tables, stamps=current)  # not again until the next change
            return False
        return True

    def reload(self) -> None:
        with self._lock:
            self.tables = load_tables(self.files)
        log.info("ACL 1.0 reloaded: %d account(s)", len(self.tables.accounts))

    # -- admin changes (AdminBrokerProcessor 50, 51, 53) ---------------------------------------------------------------

    def data_version(self) -> AclDataVersion:
        """The default file's version (GET_BROKER_CLUSTER_ACL_INFO's ``version``)."""
        return self.tables.versions.get(self.files.default_file, AclDataVersion())

    def _rewrite(self, path: Path, data: PlainAccessData) -> None:
        version = (data.data_version or AclDataVersion()).next()
        write_acl_file(path, replace(data, data_version=version))
        self.tables = load_tables(self.files)

    def update_access_config(self, config: PlainAccessConfig) -> None:
        """updateAccessConfig: the account is merged into the file that holds it, else added to the default file."""
        check_account_keys(config)
        for item in (*(config.topic_perms or ()), *(config.group_perms or ())):
            _check_resource_perm(item)
        with self._lock:
            path = self.tables.account_files.get(config.access_key or "", self.files.default_file)
            data = read_acl_file(path) or PlainAccessData()
            old = next((a for a in data.accounts if a.access_key == config.access_key), None)
            merged = _merge(old, config)
            PlainAccount.build(merged)  # a change that would not load is refused before the file is touched
            accounts = [a for a in data.accounts if a is not old] + [merged]
            self._rewrite(path, replace(data, accounts=tuple(accounts)))

    def delete_access_config(self, access_key: str | None) -> bool:
        """deleteAccessConfig: False when no file holds the key."""
        if not access_key:
            return False
        with self._lock:
            path = self.tables.account_files.get(access_key)
            data = read_acl_file(path) if path is not None else None
            if path is None or data is None or all(a.access_key != access_key for a in data.accounts):
                return False
            self._rewrite(path, replace(data, accounts=tuple(a for a in data.accounts if a.access_key != access_key)))
            return True

    def update_global_white_addrs(self, addresses: list[str], file_name: str | None) -> bool:
        """updateGlobalWhiteAddrsConfig: False for a file that is missing, a directory or outside the home."""
        path = Path(file_name) if file_name else self.files.default_file
        home = self.files.home.resolve()
        if not path.is_file() or not path.resolve().is_relative_to(home):
            log.error("ACL file %s is not a file under %s", path, home)
            return False
        for pattern in addresses:
            address_pattern(pattern)  # a pattern that would not load is refused before the file is touched
        with self._lock:
            data = read_acl_file(path) or PlainAccessData()
            self._rewrite(path, replace(data, global_white_remote_addresses=tuple(addresses)))
        return True


def check_perm(code: int, needed: Mapping[str, int], account: PlainAccount) -> None:
    """PlainPermissionChecker.check (5.3.2)."""
    if account.admin:
        return
    if code in ADMIN_CODES:
        raise AclException(f"Need admin permission for request code={code}, but accessKey={account.access_key} is "
                           "not", _CHECKER.format(36))
    for resource in hash_map_order(needed):
        is_group = is_retry_topic(resource)
        owned = account.perms.get(resource)
        if owned is None:
            default = account.default_group_perm if is_group else account.default_topic_perm
            if not check_permission(needed[resource], default):
                raise AclException(f"No default permission for {print_resource(resource)}", _CHECKER.format(57))
        elif not check_permission(needed[resource], owned):
            raise AclException(f"No permission for {print_resource(resource)}", _CHECKER.format(62))


def _check_resource_perm(item: str) -> None:
    """Permission.checkResourcePerms: an update names each resource ``name=PERM`` with a known permission."""
    parts = [p for p in item.split("=") if p]
    if len(parts) != 2:
        raise AclException(f"Parse Resource format error for {item}.\n"
                           "The expected resource format is 'Res=Perm'. For example: topicA=SUB")
    if parts[1].strip() not in PERM_NAMES:
        raise AclException(f"Parse resource permission error for {item}.\n"
                           "The expected permissions are 'SUB' or 'PUB' or 'SUB|PUB' or 'PUB|SUB'.")


def _merge(old: PlainAccessConfig | None, new: PlainAccessConfig) -> PlainAccessConfig:
    """createAclAccessConfigMap: what the request sets replaces the stored value; what it leaves out stays."""
    base = old or PlainAccessConfig(access_key=new.access_key, secret_key=None)
    return PlainAccessConfig(
        access_key=new.access_key,
        secret_key=new.secret_key or base.secret_key,
        white_remote_address=(new.white_remote_address if new.white_remote_address is not None
                              else base.white_remote_address),
        admin=new.admin,
        default_topic_perm=new.default_topic_perm or base.default_topic_perm,
        default_group_perm=new.default_group_perm or base.default_group_perm,
        topic_perms=base.topic_perms if new.topic_perms is None else new.topic_perms,
        group_perms=base.group_perms if new.group_perms is None else new.group_perms)
