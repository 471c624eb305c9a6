"""ACL 1.0's admin requests (legacy, Apache up to 5.3.2: AdminBrokerProcessor's ``updateAndCreateAccessConfig``,
``deleteAccessConfig``, ``getBrokerAclConfigVersion``, ``updateGlobalWhiteAddrsConfig``; ``AclV1RequestCode`` 50-53).

Answers as Apache's: success is SUCCESS with no remark; a failure is the request's own failure code (209, 210, 211;
SYSTEM_ERROR for 52) with the exception's message, or Apache's ``... has been updated failed.`` when the change did
not apply. On a broker without ``aclEnable=true`` each fails ``The broker does not enable acl.``. Whether the caller
may send them (50-52 are admin-only) was decided before the request got here (``broker/server/auth_pipeline.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from broker.auth.plain import PlainPermissionManager
from broker.auth.plain_config import PlainAccessConfig
from broker.common.errors import AclException, ConfigError
from broker.common.fastjson import encode_json
from broker.remoting.codes import AclV1RequestCode, AclV1ResponseCode, ResponseCode
from broker.remoting.command import RemotingCommand, create_response
from broker.remoting.connection import RemotingConnection
from broker.remoting.headers import (
    CreateAccessConfigRequestHeader,
    DeleteAccessConfigRequestHeader,
    GetBrokerAclConfigResponseHeader,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
)
from broker.remoting.headers.base import HeaderError
from broker.server.processors.common import Handler
from broker.server.processors.request_headers import request_header

log = logging.getLogger(__name__)

NOT_ENABLED = "The broker does not enable acl."


def _java(value: str | None) -> str:
    return "null" if value is None else value


def _split(text: str | None) -> tuple[str, ...] | None:
    """UtilAll.split(text, ","): None stays None, a blank text is an empty list."""
    if text is None:
        return None
    return () if not text.strip() else tuple(text.split(","))


class AclAdminProcessor:
    def __init__(self, manager: PlainPermissionManager | None, *, broker_name: str, broker_addr: str,
                 cluster_name: str) -> None:
        """``manager`` is None when aclEnable is off: every request then fails as on Apache."""
        self.manager = manager
        self.broker_name = broker_name
        self.broker_addr = broker_addr
        self.cluster_name = cluster_name

    def handlers(self) -> Mapping[int, Handler]:
        C, F = AclV1RequestCode, AclV1ResponseCode
        table: dict[int, tuple[Callable[[PlainPermissionManager, RemotingCommand], RemotingCommand], int]] = {
            C.UPDATE_AND_CREATE_ACL_CONFIG: (self._update, F.UPDATE_AND_CREATE_ACL_CONFIG_FAILED),
            C.DELETE_ACL_CONFIG: (self._delete, F.DELETE_ACL_CONFIG_FAILED),
            C.GET_BROKER_CLUSTER_ACL_INFO: (self._version, ResponseCode.SYSTEM_ERROR),
            C.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: (self._white_addrs, F.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED)}
        return {code: self._run(action, failed) for code, (action, failed) in table.items()}

    def _run(self, action: Callable[[PlainPermissionManager, RemotingCommand], RemotingCommand],
             failed: int) -> Handler:
        async def handle(conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
            try:
                if self.manager is None:
                    raise AclException(NOT_ENABLED)
                return action(self.manager, request)
            except (AclException, ConfigError, HeaderError, OSError) as err:
                log.warning("ACL 1.0 admin request %s from %s failed: %s", request.code, conn.remote_address, err)
                return create_response(request, failed, err.message if isinstance(err, AclException) else str(err))
        return handle

    def _update(self, manager: PlainPermissionManager, request: RemotingCommand) -> RemotingCommand:
        header = request_header(request, CreateAccessConfigRequestHeader)
        manager.update_access_config(PlainAccessConfig(
            access_key=header.access_key, secret_key=header.secret_key,
            white_remote_address=header.white_remote_address, admin=header.admin,
            default_topic_perm=header.default_topic_perm, default_group_perm=header.default_group_perm,
            topic_perms=_split(header.topic_perms), group_perms=_split(header.group_perms)))
        return create_response(request, ResponseCode.SUCCESS)

    def _delete(self, manager: PlainPermissionManager, request: RemotingCommand) -> RemotingCommand:
        header = request_header(request, DeleteAccessConfigRequestHeader)
        if not manager.delete_access_config(header.access_key):
            return create_response(request, AclV1ResponseCode.DELETE_ACL_CONFIG_FAILED,
                                   f"The accessKey[{_java(header.access_key)}] corresponding to accessConfig has been "
                                   "deleted failed.")
        return create_response(request, ResponseCode.SUCCESS)

    def _white_addrs(self, manager: PlainPermissionManager, request: RemotingCommand) -> RemotingCommand:
        header = request_header(request, UpdateGlobalWhiteAddrsConfigRequestHeader)
        if not manager.update_global_white_addrs(list(_split(header.global_white_addrs) or ()),
                                                 header.acl_file_full_path):
            return create_response(request, AclV1ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
                                   f"The globalWhiteAddresses[{header.global_white_addrs}] has been updated failed.")
        return create_response(request, ResponseCode.SUCCESS)

    def _version(self, manager: PlainPermissionManager, request: RemotingCommand) -> RemotingCommand:
        version = manager.data_version()
        header = GetBrokerAclConfigResponseHeader(
            version=encode_json({"counter": version.counter, "stateVersion": 0, "timestamp": version.timestamp}),
            broker_name=self.broker_name, broker_addr=self.broker_addr, cluster_name=self.cluster_name)
        return create_response(request, ResponseCode.SUCCESS, ext_fields=header.to_ext())
