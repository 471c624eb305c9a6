"""The ACL 2.0 admin requests' headers (AUTH_CREATE_USER ... AUTH_LIST_ACL, request codes 3001-3010).

Every field is optional on the wire: the broker answers a missing username with Apache's own remark (``The username is
blank``), not a header error."""

from __future__ import annotations

from dataclasses import dataclass

from broker.remoting.headers.base import Header


@dataclass(slots=True)
class UserRequestHeader(Header):
    """Create/Update/Delete/GetUserRequestHeader: the user the request is about."""

    username: str | None = None


@dataclass(slots=True)
class ListUsersRequestHeader(Header):
    filter: str | None = None  # a substring of the usernames listed


@dataclass(slots=True)
class AclRequestHeader(Header):
    """Create/Update/GetAclRequestHeader: the ACL's subject, ``User:<name>``."""

    subject: str | None = None


@dataclass(slots=True)
class DeleteAclRequestHeader(Header):
    subject: str | None = None
    policy_type: str | None = None  # Custom (the default) or Default
    resource: str | None = None  # None: the whole ACL


@dataclass(slots=True)
class ListAclsRequestHeader(Header):
    subject_filter: str | None = None
    resource_filter: str | None = None
