"""The ACL 2.0 admin requests (AdminBrokerProcessor's AUTH_* handlers, request codes 3001-3010): users and ACLs
created, changed, read and listed, with Apache's bodies (``UserInfo``, ``AclInfo``) and answers.

What a refusal looks like, as on Apache's broker: a change the user or ACL table refuses is NO_PERMISSION with the
reason (``The user is existed``); a blank username is INVALID_PARAMETER ``The username is blank``; a SUPER user made
or changed by a caller that is not one is SYSTEM_ERROR. A success keeps the remark Apache's answers carry
(``not set any response code``). Whether the caller may send these at all (``Cluster:<name>`` Update or Get) was
decided before the request got here (``broker/server/auth_pipeline.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from broker.auth.metadata import AuthMetadataManager
from broker.auth.model import Acl, PolicyType, Resource, User, UserType, subject_username
from broker.common.errors import AuthError
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import RemotingCommand, create_response
from broker.remoting.connection import RemotingConnection
from broker.remoting.headers import (
    AclRequestHeader,
    DeleteAclRequestHeader,
    ListAclsRequestHeader,
    ListUsersRequestHeader,
    UserRequestHeader,
)
from broker.remoting.signing import ACCESS_KEY
from broker.server.processors.common import Handler, decode_body, guarded, json_body
from broker.server.processors.request_headers import request_header

log = logging.getLogger(__name__)

DONE_REMARK = "not set any response code"  # RemotingCommand.createResponseCommand(null)'s, kept on success
SYSTEM_ERROR_REMARK = "An system error occurred, please try again later."


def _answer(request: RemotingCommand, body: Any = None) -> RemotingCommand:
    return create_response(request, ResponseCode.SUCCESS, DONE_REMARK,
                           body=b"" if body is None else json_body(body))


class AuthAdminProcessor:
    def __init__(self, metadata: AuthMetadataManager | None) -> None:
        """``metadata`` is None when no metadata provider is configured: every request then fails as on Apache."""
        self.metadata = metadata

    def handlers(self) -> Mapping[int, Handler]:
        table: dict[int, Callable[[AuthMetadataManager, RemotingCommand], RemotingCommand]] = {
            RequestCode.AUTH_CREATE_USER: self._create_user, RequestCode.AUTH_UPDATE_USER: self._update_user,
            RequestCode.AUTH_DELETE_USER: self._delete_user, RequestCode.AUTH_GET_USER: self._get_user,
            RequestCode.AUTH_LIST_USER: self._list_users, RequestCode.AUTH_CREATE_ACL: self._create_acl,
            RequestCode.AUTH_UPDATE_ACL: self._create_acl, RequestCode.AUTH_DELETE_ACL: self._delete_acl,
            RequestCode.AUTH_GET_ACL: self._get_acl, RequestCode.AUTH_LIST_ACL: self._list_acls}
        return {code: guarded(self._run(action)) for code, action in table.items()}

    def _run(self, action: Callable[[AuthMetadataManager, RemotingCommand], RemotingCommand]) -> Handler:
        async def handle(conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
            if self.metadata is None:
                log.error("auth admin request %s: no metadata provider is configured", request.code)
                return create_response(request, ResponseCode.SYSTEM_ERROR, SYSTEM_ERROR_REMARK)
            try:
                return action(self.metadata, request)
            except AuthError as err:
                log.info("auth admin request %s from %s refused: %s", request.code, conn.remote_address, err)
                return create_response(request, ResponseCode.NO_PERMISSION, str(err))
        return handle

    # -- users --------------------------------------------------------------------------------------------------------

    def _user_change(self, metadata: AuthMetadataManager, request: RemotingCommand,
                     verb: str) -> tuple[User | None, RemotingCommand | None]:
        """The user a create or update carries, or the answer refusing it."""
        username = request_header(request, UserRequestHeader).username
        if not username:
            return None, create_response(request, ResponseCode.INVALID_PARAMETER, "The username is blank")
        user = User.from_info(decode_body(request), username)
        if user.user_type is UserType.SUPER and not _caller_is_super(metadata, request):
            return None, create_response(request, ResponseCode.SYSTEM_ERROR,
                                         f"The super user can only be {verb} by super user")
        return user, None

    def _create_user(self, metadata: AuthMetadataManager, request: RemotingCommand) -> RemotingCommand:
        user, refused = self._user_change(metadata, request, "create")
        if user is None:
            return refused  # type: ignore[return-value]
        metadata.create_user(user)
        return _answer(request)

    def _update_user(self, metadata: AuthMetadataManager, request: RemotingCommand) -> RemotingCommand:
        user, refused = self._user_change(metadata, request, "update")
        if user is None:
            return refused  # type: ignore[return-value]
        old = metadata.get_user(user.username)
        if old is None:
            return create_response(request, ResponseCode.NO_PERMISSION, "The user is not exist")
        if old.user_type is UserType.SUPER and not _caller_is_super(metadata, request):
            return create_response(request, ResponseCode.NO_PERMISSION,
                                   "The super user can only be update by super user")
        metadata.update_user(user)
        return _answer(request)

    def _delete_user(self, metadata: AuthMetadataManager, request: RemotingCommand) -> RemotingCommand:
        username = request_header(request, UserRequestHeader).username or ""
        old = metadata.get_user(username)
        if old is not None:  # deleting nobody succeeds
            if old.user_type is UserType.SUPER and not _caller_is_super(metadata, request):
                return create_response(request, ResponseCode.NO_PERMISSION,
                                       "The super user can only be update by super user")
            metadata.delete_user(username)
        return _answer(request)

    def _get_user(self, metadata: AuthMetadataManager, request: RemotingCommand) -> RemotingCommand:
        username = request_header(request, UserRequestHeader).username
        if not username or not username.strip():
            return create_response(request, ResponseCode.INVALID_PARAMETER, "The username is blank")
        user = metadata.get_user(username)
        return _answer(request, None if user is None else user.to_info())

    def _list_users(self, metadata: AuthMetadataManager, request: RemotingCommand) -> RemotingCommand:
        users = metadata.list_users(request_header(request, ListUsersRequestHeader).filter)
        return _answer(request, [u.to_info() for u in users] or None)

    # -- ACLs ---------------------------------------------------------------------------------------------------------

    def _create_acl(self, metadata: AuthMetadataManager, request: RemotingCommand) -> RemotingCommand:
        """AUTH_CREATE_ACL and AUTH_UPDATE_ACL: both merge into an existing ACL."""
        body = decode_body(request) if request.body else None
        if not isinstance(body, dict) or not body.get("policies"):
            return create_response(request, ResponseCode.SYSTEM_ERROR, "The body of acl is null")
        metadata.create_acl(Acl.from_info(body, request_header(request, AclRequestHeader).subject))
        return _answer(request)

    def _delete_acl(self, metadata: AuthMetadataManager, request: RemotingCommand) -> RemotingCommand:
        header = request_header(request, DeleteAclRequestHeader)
        metadata.delete_acl(subject_username(header.subject), PolicyType.by_label(header.policy_type),
                            Resource.parse(header.resource))
        return _answer(request)

    def _get_acl(self, metadata: AuthMetadataManager, request: RemotingCommand) -> RemotingCommand:
        acl = metadata.get_acl(subject_username(request_header(request, AclRequestHeader).subject))
        return _answer(request, None if acl is None else acl.to_info())

    def _list_acls(self, metadata: AuthMetadataManager, request: RemotingCommand) -> RemotingCommand:
        header = request_header(request, ListAclsRequestHeader)
        acls = metadata.list_acls(header.subject_filter, header.resource_filter)
        return _answer(request, [a.to_info() for a in acls] or None)


def _caller_is_super(metadata: AuthMetadataManager, request: RemotingCommand) -> bool:
    """``isNotSuperUserLogin`` negated: a request without an AccessKey (authentication off) counts as super."""
    access_key = request.ext_fields.get(ACCESS_KEY)
    return not access_key or metadata.is_super_user(access_key)
