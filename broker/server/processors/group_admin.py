"""The subscription group requests of Java's AdminBrokerProcessor: create, update and delete groups (one or a list),
read their configs, and forbid or allow a group to read a topic. What ``mqadmin updateSubGroup``, ``deleteSubGroup``
and ``updateGroupForbidden`` ask.

Group names are checked with TopicValidator's rules; attribute edits ("+key"/"-key") apply as
``broker.server.metadata.attributes`` says. Changes persist (off the event loop) before the answer.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import TYPE_CHECKING, Any

from broker.common import validation
from broker.common.errors import RemoteProtocolError
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import RemotingCommand, create_response
from broker.remoting.connection import RemotingConnection
from broker.remoting.headers import (
    DeleteSubscriptionGroupRequestHeader,
    GetAllSubscriptionGroupResponseHeader,
    GroupHeader,
    UpdateGroupForbiddenRequestHeader,
)
from broker.remoting.subscription import SubscriptionGroupConfig
from broker.server.metadata.attributes import GROUP_ATTRIBUTES, alter_attributes
from broker.server.processors.common import INDEX_PERM_READ, Handler, decode_body, guarded, json_body, success
from broker.server.processors.request_headers import request_header

if TYPE_CHECKING:
    from broker.server.metadata.groups import SubscriptionGroupManager
    from broker.server.metadata.offsets import ConsumerOffsetManager

log = logging.getLogger(__name__)


class GroupAdminProcessor:
    """The subscription groups of one broker; a group deleted with cleanOffset loses its consumer offsets."""

    def __init__(self, *, subscription_group_manager: SubscriptionGroupManager,
                 consumer_offset_manager: ConsumerOffsetManager) -> None:
        self.subscription_group_manager = subscription_group_manager
        self.consumer_offset_manager = consumer_offset_manager

    def handlers(self) -> dict[int, Handler]:
        handlers: dict[int, Handler] = {
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: self.update_and_create_subscription_group,
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST: self.update_and_create_subscription_group_list,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: self.get_all_subscription_group,
            RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG: self.get_subscription_group,
            RequestCode.DELETE_SUBSCRIPTIONGROUP: self.delete_subscription_group,
            RequestCode.DELETE_SUBSCRIPTION_GROUP_LIST: self.delete_subscription_group_list,
            RequestCode.UPDATE_AND_GET_GROUP_FORBIDDEN: self.update_and_get_group_forbidden,
        }
        return {code: guarded(handler) for code, handler in handlers.items()}

    def _group_config(self, data: Any) -> SubscriptionGroupConfig:
        try:
            return SubscriptionGroupConfig.from_json(data)
        except (AttributeError, TypeError, ValueError) as err:
            raise RemoteProtocolError(f"malformed SubscriptionGroupConfig: {err!r}") from err

    async def update_and_create_subscription_group(self, conn: RemotingConnection,
                                                   request: RemotingCommand) -> RemotingCommand:
        if not request.body:
            return success(request)  # Java decodes a missing body as null and changes nothing
        return await self._update_groups(request, [self._group_config(decode_body(request))])

    async def update_and_create_subscription_group_list(self, conn: RemotingConnection,
                                                        request: RemotingCommand) -> RemotingCommand:
        body = decode_body(request)
        items = body.get("groupConfigList") if isinstance(body, dict) else None
        return await self._update_groups(request, [self._group_config(item) for item in items or ()])

    async def _update_groups(self, request: RemotingCommand, configs: list[SubscriptionGroupConfig]) -> RemotingCommand:
        manager = self.subscription_group_manager
        for config in configs:
            result = validation.validate_group(config.group_name)
            if not result.valid:
                return create_response(request, ResponseCode.INVALID_PARAMETER, result.remark)
        try:
            resolved = []
            for config in configs:
                existing = manager.select_subscription_group_config(config.group_name)
                attributes = alter_attributes(existing is None, GROUP_ATTRIBUTES,
                                              existing.attributes if existing else {}, config.attributes)
                resolved.append(dataclasses.replace(config, attributes=attributes))
        except ValueError as err:
            return create_response(request, ResponseCode.SYSTEM_ERROR, str(err))
        await asyncio.to_thread(manager.update_subscription_group_config_list, resolved)
        return success(request)

    async def get_all_subscription_group(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """SubscriptionGroupWrapper: subscriptionGroupTable, forbiddenTable, dataVersion."""
        wrapper = self.subscription_group_manager.to_json()
        header = GetAllSubscriptionGroupResponseHeader(len(wrapper["subscriptionGroupTable"]))
        return success(request, json_body(wrapper), header.to_ext())

    async def get_subscription_group(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        group = request_header(request, GroupHeader).group
        manager = self.subscription_group_manager
        config = manager.select_subscription_group_config(group) or \
            await asyncio.to_thread(manager.find_subscription_group_config, group)
        if config is None:
            return create_response(request, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "No group in this broker")
        return success(request, json_body(config.to_json()))

    async def delete_subscription_group(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = request_header(request, DeleteSubscriptionGroupRequestHeader)
        log.info("delete subscription group %s, requested by %s", h.group_name, conn.remote_address)
        await self._delete_groups([h.group_name], h.clean_offset)
        return success(request)

    async def delete_subscription_group_list(self, conn: RemotingConnection,
                                             request: RemotingCommand) -> RemotingCommand:
        body = decode_body(request)
        names = body.get("groupNameList") if isinstance(body, dict) else None
        if not names:
            return create_response(request, ResponseCode.INVALID_PARAMETER, "The specified group name list is blank.")
        if any(not str(name).strip() for name in names):
            return create_response(request, ResponseCode.INVALID_PARAMETER, "The specified group name is blank.")
        await self._delete_groups(list(dict.fromkeys(str(n) for n in names)), bool(body.get("cleanOffset")))
        return success(request)

    async def _delete_groups(self, groups: list[str], clean_offset: bool) -> None:
        for group in groups:
            await asyncio.to_thread(self.subscription_group_manager.delete_subscription_group_config, group)
            if clean_offset:
                self.consumer_offset_manager.remove_offset(group)

    async def update_and_get_group_forbidden(self, conn: RemotingConnection,
                                             request: RemotingCommand) -> RemotingCommand:
        h = request_header(request, UpdateGroupForbiddenRequestHeader)
        manager = self.subscription_group_manager
        if h.readable is not None:
            change = manager.clear_forbidden if h.readable else manager.set_forbidden
            await asyncio.to_thread(change, h.group, h.topic, INDEX_PERM_READ)
        readable = not manager.is_forbidden(h.group, h.topic, INDEX_PERM_READ)
        body = json_body({"group": h.group, "readable": readable, "topic": h.topic})
        return create_response(request, ResponseCode.SUCCESS, "", body=body)
