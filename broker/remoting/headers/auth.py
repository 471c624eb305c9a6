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


# -- ACL 1.0 (legacy: AclV1RequestCode 50-53, Apache up to 5.3.2) ------------------------------------------------------


@dataclass(slots=True)
class CreateAccessConfigRequestHeader(Header):
    """UPDATE_AND_CREATE_ACL_CONFIG (50): an account of ``plain_acl.yml``; the perms are comma lists of
    ``name=PERM`` (None: not given, the stored ones stay)."""

    access_key: str
    secret_key: str | None = None
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: str | None = None
    group_perms: str | None = None


@dataclass(slots=True)
class DeleteAccessConfigRequestHeader(Header):
    """DELETE_ACL_CONFIG (51); a missing key is not a header error (Apache answers ``The accessKey[null] ...``)."""

    access_key: str | None = None


@dataclass(slots=True)
class UpdateGlobalWhiteAddrsConfigRequestHeader(Header):
    """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53): a comma list of patterns; the file (blank: the default one)."""

    global_white_addrs: str
    acl_file_full_path: str | None = None


@dataclass(slots=True)
class GetBrokerAclConfigResponseHeader(Header):
    """GET_BROKER_CLUSTER_ACL_INFO's (52) answer: the default file's DataVersion as JSON, and who answers.
    ``allAclFileVersion`` is left out, as 5.3.2 leaves it."""

    version: str
    broker_name: str
    broker_addr: str
    cluster_name: str
    all_acl_file_version: str | None = None
