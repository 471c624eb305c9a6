"""ACL 2.0's model: users, and ACLs of policies whose entries allow or deny actions on resources from source IPs.

Rule 1: the model and its two JSON forms live here. The *stored* form is what Apache's broker keeps as the value of
each key of its ``users`` and ``acls`` tables (enums as their codes); the *info* form is the admin requests' bodies,
``UserInfo`` and ``AclInfo`` (enums by name, resources as ``Topic:name`` strings). Both are written with sorted keys
and no nulls, as fastjson2 writes them.

Examples:
    >>> resource = Resource.parse("Topic:orders*")
    >>> resource.name, resource.pattern.label
    ('orders', 'Prefixed')
    >>> Resource.parse("Topic:orders*").key, Resource.parse("*").key
    ('Topic:orders*', '*')
"""

from __future__ import annotations

import dataclasses
import ipaddress
from dataclasses import dataclass
from enum import Enum
from typing import Any, Self

from broker.common.errors import AuthorizationError
from broker.common.validation import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX


class CodedEnum(Enum):
    """An enum with Apache's byte ``code`` (the stored form) and ``label`` (the admin bodies, matched ignoring case
    by ``by_label``, as ``getByName`` does)."""

    @property
    def code(self) -> int:
        return self.value[0]

    @property
    def label(self) -> str:
        return self.value[1]

    @classmethod
    def by_code(cls, code: object) -> Self | None:
        return next((m for m in cls if m.code == code), None)

    @classmethod
    def by_label(cls, label: object) -> Self | None:
        if not isinstance(label, str):
            return None
        return next((m for m in cls if m.label.lower() == label.strip().lower()), None)


class UserType(CodedEnum):
    SUPER = (1, "Super")
    NORMAL = (2, "Normal")


class UserStatus(CodedEnum):
    ENABLE = (1, "enable")
    DISABLE = (2, "disable")


class SubjectType(CodedEnum):
    USER = (1, "User")


class PolicyType(CodedEnum):
    CUSTOM = (1, "Custom")
    DEFAULT = (2, "Default")


class Decision(CodedEnum):
    ALLOW = (1, "Allow")
    DENY = (2, "Deny")


class ResourceType(CodedEnum):
    UNKNOWN = (0, "Unknown")
    ANY = (1, "Any")
    CLUSTER = (2, "Cluster")
    NAMESPACE = (3, "Namespace")
    TOPIC = (4, "Topic")
    GROUP = (5, "Group")


class ResourcePattern(CodedEnum):
    ANY = (1, "Any")
    LITERAL = (2, "Literal")
    PREFIXED = (3, "Prefixed")


class Action(CodedEnum):
    UNKNOWN = (0, "Unknown")
    ALL = (1, "All")
    ANY = (2, "Any")
    PUB = (3, "Pub")
    SUB = (4, "Sub")
    CREATE = (5, "Create")
    UPDATE = (6, "Update")
    DELETE = (7, "Delete")
    GET = (8, "Get")
    LIST = (9, "List")


USER_SUBJECT_PREFIX = "User:"


def subject_key(username: str) -> str:
    """``Subject.getSubjectKey``: what an ACL is keyed by and what refusals name."""
    return USER_SUBJECT_PREFIX + username


def subject_username(key: str | None) -> str | None:
    """``Subject.of``: the user a ``User:name`` key names; None for a blank key or another subject type."""
    if not key or not key.strip():
        return None
    kind, sep, name = key.partition(":")
    return name if sep and SubjectType.by_label(kind) is SubjectType.USER else None


# -- users ------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class User:
    """A user; ``password`` is the secret its requests are signed with. Optional fields are None in a change that
    leaves them as they are (an update) and filled in on create."""

    username: str
    password: str | None = None
    user_type: UserType | None = None
    user_status: UserStatus | None = None

    def to_stored(self) -> dict[str, Any]:
        return _without_none({"password": self.password, "subjectType": SubjectType.USER.code,
                              "userStatus": _code(self.user_status), "userType": _code(self.user_type),
                              "username": self.username})

    @classmethod
    def from_stored(cls, data: dict[str, Any]) -> User:
        return cls(str(data["username"]), data.get("password"), UserType.by_code(data.get("userType")),
                   UserStatus.by_code(data.get("userStatus")))

    def to_info(self) -> dict[str, Any]:
        """``UserInfo`` as the GET/LIST answers carry it."""
        return _without_none({"password": self.password, "userStatus": _label(self.user_status),
                              "userType": _label(self.user_type), "username": self.username})

    @classmethod
    def from_info(cls, data: Any, username: str) -> User:
        """``UserConverter.convertUser(UserInfo)`` with the header's username; unknown type or status names are
        None, as ``getByName`` gives."""
        data = data if isinstance(data, dict) else {}
        password = data.get("password")
        return cls(username, None if password is None else str(password), UserType.by_label(data.get("userType")),
                   UserStatus.by_label(data.get("userStatus")))


# -- resources and policies -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Resource:
    """What an entry applies to: ``*`` (type ANY), ``Topic:*`` (ANY pattern), ``Topic:name`` (LITERAL) or
    ``Topic:prefix*`` (PREFIXED)."""

    resource_type: ResourceType
    name: str | None
    pattern: ResourcePattern

    @classmethod
    def parse(cls, text: str | None) -> Resource | None:
        """``Resource.of(String)``: None for a blank text or an unknown type."""
        if text is None or not text.strip():
            return None
        if text == "*":
            return cls(ResourceType.ANY, None, ResourcePattern.ANY)
        kind, _, name = text.partition(":")
        resource_type = ResourceType.by_label(kind)
        if resource_type is None:
            return None
        if name == "*":
            return cls(resource_type, None, ResourcePattern.ANY)
        if name.endswith("*"):
            return cls(resource_type, name[:name.index("*")], ResourcePattern.PREFIXED)
        return cls(resource_type, name, ResourcePattern.LITERAL)

    @classmethod
    def of_topic(cls, name: str | None) -> Resource:
        return cls(ResourceType.TOPIC, name, ResourcePattern.LITERAL)

    @classmethod
    def of_group(cls, name: str | None) -> Resource:
        """``Resource.ofGroup``: a retry (or DLQ) topic names its group."""
        if name and name.startswith(RETRY_GROUP_TOPIC_PREFIX):
            name = name[len(RETRY_GROUP_TOPIC_PREFIX):]
        elif name and name.startswith(DLQ_GROUP_TOPIC_PREFIX):
            name = name[len(DLQ_GROUP_TOPIC_PREFIX):]
        return cls(ResourceType.GROUP, name, ResourcePattern.LITERAL)

    @classmethod
    def of_cluster(cls, name: str) -> Resource:
        return cls(ResourceType.CLUSTER, name, ResourcePattern.LITERAL)

    @property
    def key(self) -> str:
        """``getResourceKey``: how refusals and the admin bodies write it."""
        if self.resource_type is ResourceType.ANY:
            return "*"
        label = self.resource_type.label
        name = "null" if self.name is None else self.name  # as Java concatenates a null
        if self.pattern is ResourcePattern.ANY:
            return f"{label}:*"
        if self.pattern is ResourcePattern.PREFIXED:
            return f"{label}:{name}*"
        return f"{label}:{name}"

    def matches(self, requested: Resource) -> bool:
        """``Resource.isMatch``: does this (an entry's) resource cover the ``requested`` one?"""
        if self.resource_type is ResourceType.ANY:
            return True
        if self.resource_type is not requested.resource_type:
            return False
        if self.pattern is ResourcePattern.ANY:
            return True
        if self.pattern is ResourcePattern.LITERAL:
            return requested.name == self.name
        return requested.name is not None and self.name is not None and requested.name.startswith(self.name)

    def to_stored(self) -> dict[str, Any]:
        return _without_none({"resourceName": self.name, "resourcePattern": self.pattern.code,
                              "resourceType": self.resource_type.code})

    @classmethod
    def from_stored(cls, data: dict[str, Any]) -> Resource:
        return cls(ResourceType.by_code(data.get("resourceType")) or ResourceType.UNKNOWN, data.get("resourceName"),
                   ResourcePattern.by_code(data.get("resourcePattern")) or ResourcePattern.LITERAL)


def ip_in_range(ip: str, source: str) -> bool:
    """``IPAddressUtils.isIPInRange``: ``ip`` equals ``source`` or lies in the CIDR it names."""
    try:
        return ipaddress.ip_address(ip) in ipaddress.ip_network(source, strict=False)
    except ValueError:
        return False


def valid_ip_or_cidr(text: str) -> bool:
    try:
        ipaddress.ip_network(text, strict=False)
    except ValueError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class PolicyEntry:
    """One rule: ``decision`` for ``actions`` on ``resource``, from ``source_ips`` (IPs or CIDRs; empty: anywhere).
    ``resource``/``decision`` are None only in a change the ACL checks refuse (``The resource is null.``)."""

    resource: Resource | None
    actions: tuple[Action, ...]
    decision: Decision | None
    source_ips: tuple[str, ...] = ()

    def matches(self, resource: Resource, actions: tuple[Action, ...], source_ip: str) -> bool:
        """``isMatchResource``, ``isMatchAction`` and ``isMatchEnvironment`` together."""
        if self.resource is None or not self.resource.matches(resource) or not self.actions:
            return False
        if Action.ANY not in actions and not any(a in self.actions or Action.ALL in self.actions for a in actions):
            return False
        return not self.source_ips or any(ip_in_range(source_ip, s) for s in self.source_ips)

    def to_stored(self) -> dict[str, Any]:
        environment = {"sourceIps": list(self.source_ips)} if self.source_ips else {}
        return {"actions": [a.code for a in self.actions], "decision": _code(self.decision),
                "environment": environment, "resource": self.resource.to_stored() if self.resource else None}

    @classmethod
    def from_stored(cls, data: dict[str, Any]) -> PolicyEntry:
        actions = tuple(a for a in (Action.by_code(c) for c in data.get("actions") or ()) if a is not None)
        ips = tuple((data.get("environment") or {}).get("sourceIps") or ())
        resource = data.get("resource")
        return cls(Resource.from_stored(resource) if resource else None, actions,
                   Decision.by_code(data.get("decision")), ips)

    def to_info(self) -> dict[str, Any]:
        return _without_none({"actions": [a.label for a in self.actions] or None, "decision": _label(self.decision),
                              "resource": self.resource.key if self.resource else None,
                              "sourceIps": list(self.source_ips) or None})

    @classmethod
    def from_info(cls, data: Any) -> PolicyEntry:
        """``AclConverter``: unknown action names are dropped, an unknown decision is None."""
        data = data if isinstance(data, dict) else {}
        actions = tuple(a for a in (Action.by_label(n) for n in data.get("actions") or ()) if a is not None)
        ips = data.get("sourceIps") or ()
        return cls(Resource.parse(data.get("resource")), actions, Decision.by_label(data.get("decision")),
                   tuple(str(ip) if ip is not None else "" for ip in ips))


@dataclass(frozen=True, slots=True)
class Policy:
    policy_type: PolicyType
    entries: tuple[PolicyEntry, ...]

    def with_entries(self, entries: tuple[PolicyEntry, ...]) -> Policy:
        """``Policy.updateEntry``: an entry for the same resource is replaced in place, a new one appended."""
        merged = list(self.entries)
        for new in entries:
            at = next((i for i, old in enumerate(merged) if old.resource == new.resource), None)
            if at is None:
                merged.append(new)
            else:
                merged[at] = new
        return dataclasses.replace(self, entries=tuple(merged))

    def to_stored(self) -> dict[str, Any]:
        return {"entries": [e.to_stored() for e in self.entries], "policyType": self.policy_type.code}

    @classmethod
    def from_stored(cls, data: dict[str, Any]) -> Policy:
        return cls(PolicyType.by_code(data.get("policyType")) or PolicyType.CUSTOM,
                   tuple(PolicyEntry.from_stored(e) for e in data.get("entries") or ()))

    def to_info(self) -> dict[str, Any]:
        return _without_none({"entries": [e.to_info() for e in self.entries] or None,
                              "policyType": self.policy_type.label})


@dataclass(frozen=True, slots=True)
class Acl:
    """A user's ACL: at most one policy per type (CUSTOM is consulted first, DEFAULT only when it matches nothing)."""

    username: str
    policies: tuple[Policy, ...]

    @property
    def subject_key(self) -> str:
        return subject_key(self.username)

    def policy(self, policy_type: PolicyType) -> Policy | None:
        return next((p for p in self.policies if p.policy_type is policy_type), None)

    def merged(self, policies: tuple[Policy, ...]) -> Acl:
        """``Acl.updatePolicy``: entries of a policy type already present are merged into it; new types appended."""
        merged = list(self.policies)
        for new in policies:
            at = next((i for i, old in enumerate(merged) if old.policy_type is new.policy_type), None)
            if at is None:
                merged.append(new)
            else:
                merged[at] = merged[at].with_entries(new.entries)
        return dataclasses.replace(self, policies=tuple(merged))

    def without(self, policy_type: PolicyType, resource: Resource) -> Acl:
        """``Acl.deletePolicy``: the entry for ``resource`` leaves that policy; a policy left empty goes too."""
        policies = []
        for policy in self.policies:
            if policy.policy_type is policy_type:
                policy = dataclasses.replace(policy, entries=tuple(e for e in policy.entries if e.resource != resource))
                if not policy.entries:
                    continue
            policies.append(policy)
        return dataclasses.replace(self, policies=tuple(policies))

    def to_stored(self) -> dict[str, Any]:
        return {"policies": [p.to_stored() for p in self.policies],
                "subject": {"subjectType": SubjectType.USER.code, "username": self.username}}

    @classmethod
    def from_stored(cls, data: dict[str, Any]) -> Acl:
        subject = data.get("subject") or {}
        return cls(str(subject.get("username")), tuple(Policy.from_stored(p) for p in data.get("policies") or ()))

    def to_info(self) -> dict[str, Any]:
        return _without_none({"policies": [p.to_info() for p in self.policies] or None,
                              "subject": self.subject_key})

    @classmethod
    def from_info(cls, data: Any, header_subject: str | None) -> Acl:
        """``AclConverter.convertAcl(AclInfo)``: the body's subject, else the header's; policies without entries are
        left out; a policy without a type is CUSTOM."""
        data = data if isinstance(data, dict) else {}
        username = subject_username(data.get("subject")) or subject_username(header_subject)
        if username is None:
            raise AuthorizationError("The subject is null.")
        policies = []
        for info in data.get("policies") or ():
            info = info if isinstance(info, dict) else {}
            entries = tuple(PolicyEntry.from_info(e) for e in info.get("entries") or ())
            if entries:
                policies.append(Policy(PolicyType.by_label(info.get("policyType")) or PolicyType.CUSTOM, entries))
        return cls(username, tuple(policies))


def _code(member: CodedEnum | None) -> int | None:
    return None if member is None else member.code


def _label(member: CodedEnum | None) -> str | None:
    return None if member is None else member.label


def _without_none(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if v is not None}
