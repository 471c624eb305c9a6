"""Changes to users and ACLs, checked as Apache's metadata managers check them (``AuthenticationMetadataManagerImpl``,
``AuthorizationMetadataManagerImpl``): the refusals raise AuthenticationError / AuthorizationError with Apache's
messages, which the admin requests answer as NO_PERMISSION remarks.

Examples:
    >>> manager = AuthMetadataManager(AuthStore(tmp_dir))  # doctest: +SKIP
    >>> manager.create_user(User("alice", "alicepw1"))  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses

from broker.auth.model import (
    Acl,
    Action,
    Policy,
    PolicyEntry,
    PolicyType,
    Resource,
    User,
    UserStatus,
    UserType,
    valid_ip_or_cidr,
)
from broker.auth.store import AuthStore
from broker.common.errors import AuthenticationError, AuthorizationError


class AuthMetadataManager:
    def __init__(self, store: AuthStore) -> None:
        self.store = store

    # -- users --------------------------------------------------------------------------------------------------------

    def init_user(self, username: str, password: str) -> None:
        """``initUser``: ``initAuthenticationUser`` and ``innerClientAuthenticationCredentials`` become SUPER users
        when absent; an existing user is left as it is."""
        if self.store.get_user(username) is None:
            self.create_user(User(username, password, UserType.SUPER))

    def create_user(self, user: User) -> None:
        _check_user(user, creating=True)
        if self.store.get_user(user.username) is not None:
            raise AuthenticationError("The user is existed")
        self.store.put_user(dataclasses.replace(user, user_type=user.user_type or UserType.NORMAL,
                                                user_status=user.user_status or UserStatus.ENABLE))

    def update_user(self, user: User) -> None:
        """A blank password, or a type or status left None, keeps the old one."""
        _check_user(user, creating=False)
        old = self.store.get_user(user.username)
        if old is None:
            raise AuthenticationError("The user is not exist")
        self.store.put_user(User(user.username, user.password if user.password and user.password.strip()
                                 else old.password, user.user_type or old.user_type,
                                 user.user_status or old.user_status))

    def delete_user(self, username: str) -> None:
        """The user's ACL goes with it."""
        if not username.strip():
            raise AuthenticationError("username can not be blank")
        self.store.delete_user(username)
        self.store.delete_acl(username)

    def get_user(self, username: str) -> User | None:
        if not username.strip():
            raise AuthenticationError("username can not be blank")
        return self.store.get_user(username)

    def list_users(self, name_filter: str | None) -> list[User]:
        """Usernames containing ``name_filter`` (all for a blank one), in key order."""
        return [u for u in self.store.users() if not (name_filter and name_filter.strip())
                or name_filter in u.username]

    def is_super_user(self, username: str) -> bool:
        user = self.get_user(username)
        if user is None:
            raise AuthenticationError(f"User:{username} is not found")
        return user.user_type is UserType.SUPER

    # -- ACLs ---------------------------------------------------------------------------------------------------------

    def create_acl(self, acl: Acl) -> None:
        """Create and update are one operation in Apache: a new ACL is stored, an existing one merged into."""
        _check_acl(acl)
        if self.store.get_user(acl.username) is None:
            raise AuthorizationError(f"The subject of {acl.subject_key} is not exist.")
        old = self.store.get_acl(acl.username)
        self.store.put_acl(acl if old is None else old.merged(acl.policies))

    update_acl = create_acl

    def delete_acl(self, username: str | None, policy_type: PolicyType | None, resource: Resource | None) -> None:
        """Without a resource the whole ACL goes; with one, its entry in ``policy_type`` (default CUSTOM), and the
        ACL too when no policy is left."""
        if username is None:
            raise AuthorizationError("The subject is null.")
        if self.store.get_user(username) is None:
            raise AuthorizationError("The subject is not exist.")
        old = self.store.get_acl(username)
        if old is None:
            raise AuthorizationError("The acl is not exist.")
        if resource is not None:
            old = old.without(policy_type or PolicyType.CUSTOM, resource)
        if resource is None or not old.policies:
            self.store.delete_acl(username)
        else:
            self.store.put_acl(old)

    def get_acl(self, username: str | None) -> Acl | None:
        if username is None:
            raise AuthorizationError("The subject is null.")
        if self.store.get_user(username) is None:
            raise AuthorizationError("The subject is not exist.")
        return self.store.get_acl(username)

    def list_acls(self, subject_filter: str | None, resource_filter: str | None) -> list[Acl]:
        """Subject keys containing ``subject_filter``; of each, the entries whose resource key contains
        ``resource_filter``; ACLs left with no entry are not listed."""
        found = []
        for acl in self.store.acls():
            if subject_filter and subject_filter.strip() and subject_filter not in acl.subject_key:
                continue
            policies = []
            for policy in acl.policies:
                entries = policy.entries
                if resource_filter and resource_filter.strip():
                    entries = tuple(e for e in entries if e.resource and resource_filter in e.resource.key)
                if entries:
                    policies.append(Policy(policy.policy_type, entries))
            if policies:
                found.append(Acl(acl.username, tuple(policies)))
        return found


def _check_user(user: User, *, creating: bool) -> None:
    if not user.username.strip():
        raise AuthenticationError("username can not be blank")
    if creating and not (user.password and user.password.strip()):
        raise AuthenticationError("password can not be blank")


def _check_acl(acl: Acl) -> None:
    """``AuthorizationMetadataManagerImpl.validate``, in its order."""
    if not acl.policies:
        raise AuthorizationError("The policies is empty.")
    for policy in acl.policies:
        if not policy.entries:
            raise AuthorizationError("The policy entries is empty.")
        for entry in policy.entries:
            _check_entry(entry)


def _check_entry(entry: PolicyEntry) -> None:
    if entry.resource is None:
        raise AuthorizationError("The resource is null.")
    if not entry.actions:
        raise AuthorizationError("The actions is empty.")
    if Action.ANY in entry.actions:
        raise AuthorizationError("The actions can not be Any.")
    for source_ip in entry.source_ips:
        if not source_ip.strip():
            raise AuthorizationError("The source ip is empty.")
        if not valid_ip_or_cidr(source_ip):
            raise AuthorizationError("The source ip is invalid.")
    if entry.decision is None:
        raise AuthorizationError("The decision is null or illegal.")
