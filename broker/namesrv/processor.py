"""The NameServer's request handlers: Java's DefaultRequestProcessor and ClientRequestProcessor in one table.

Each handler parses its header (``broker.remoting.headers``) and body (``broker.remoting.route``), asks the route
table or the KV store, and answers with Java's codes and remarks. A header or body that cannot be parsed is answered
with SYSTEM_ERROR naming the problem. Java would go on with the missing field as null and usually fail later with a
NullPointerException, which is also a SYSTEM_ERROR; the one exception is a route query without a topic, which
Java answers with TOPIC_NOT_EXIST for the topic "null".

Examples:
    >>> processors = NamesrvProcessor(controller).processors()  # doctest: +SKIP
    >>> RemotingServer("127.0.0.1", 9876, processors=processors)  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import logging
import time
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.common.errors import ConfigError
from broker.common.properties import parse_properties
from broker.namesrv.broker_info import BrokerRegistration, UnregisterRequest
from broker.namesrv.kv_config import NAMESPACE_ORDER_TOPIC_CONFIG
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import RemotingCommand, create_response
from broker.remoting.connection import RemotingConnection
from broker.remoting.headers import (
    AddWritePermOfBrokerResponseHeader,
    BrokerHeartbeatRequestHeader,
    BrokerNameHeader,
    DeleteTopicFromNamesrvRequestHeader,
    GetBrokerMemberGroupRequestHeader,
    GetKVConfigResponseHeader,
    GetKVListByNamespaceRequestHeader,
    GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader,
    HeaderError,
    KVConfigKeyHeader,
    PutKVConfigRequestHeader,
    QueryDataVersionRequestHeader,
    QueryDataVersionResponseHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    RegisterTopicRequestHeader,
    UnRegisterBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
)
from broker.remoting.route import (
    V4_9_4,
    BodyError,
    decode_data_version,
    decode_register_broker_body,
    decode_topic_route_data,
    encode_broker_member_group,
    encode_cluster_info,
    encode_data_version,
    encode_kv_table,
    encode_topic_list,
    encode_topic_route_data,
)
from broker.remoting.server import Processor

if TYPE_CHECKING:
    from broker.namesrv.kv_config import KVConfigManager
    from broker.namesrv.route_table import RouteInfoManager
    from broker.namesrv.server import NamesrvController

log = logging.getLogger(__name__)

ZONE_NAME = "__ZONE_NAME"  # MixAll.ZONE_NAME: the extField a broker's zone arrives in
FAQ_URL = "https://rocketmq.apache.org/docs/faq/"  # FAQUrl.APPLY_TOPIC_URL in 5.5.1
NOT_SET_REMARK = "not set any response code"  # RemotingCommand.createResponseCommand's placeholder
Handler = Callable[[RemotingConnection, RemotingCommand], RemotingCommand]


def suggest_todo(url: str) -> str:
    """FAQUrl.suggestTodo: the hint Java appends to some remarks."""
    return f"\nSee {url} for further details."


def topic_not_exist_remark(topic: str) -> str:
    return f"No topic route info in name server for the topic: {topic}{suggest_todo(FAQ_URL)}"


def body_crc32(body: bytes) -> int:
    """UtilAll.crc32: CRC32 with the sign bit cleared (0 for no body)."""
    return zlib.crc32(body) & 0x7FFFFFFF


class NamesrvProcessor:
    """Answers every NameServer request code; ``processors()`` is the table for a RemotingServer."""

    def __init__(self, controller: NamesrvController) -> None:
        self.controller = controller
        self.started_ms = time.monotonic_ns() // 1_000_000

    def processors(self) -> dict[int, Processor]:
        handlers: dict[int, Handler] = {
            RequestCode.PUT_KV_CONFIG: self.put_kv_config,
            RequestCode.GET_KV_CONFIG: self.get_kv_config,
            RequestCode.DELETE_KV_CONFIG: self.delete_kv_config,
            RequestCode.QUERY_DATA_VERSION: self.query_data_version,
            RequestCode.REGISTER_BROKER: self.register_broker,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.BROKER_HEARTBEAT: self.broker_heartbeat,
            RequestCode.GET_BROKER_MEMBER_GROUP: self.get_broker_member_group,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.get_broker_cluster_info,
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm_of_broker,
            RequestCode.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm_of_broker,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.get_all_topic_list,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic_in_namesrv,
            RequestCode.REGISTER_TOPIC_IN_NAMESRV: self.register_topic_in_namesrv,
            RequestCode.GET_KVLIST_BY_NAMESPACE: self.get_kv_list_by_namespace,
            RequestCode.GET_TOPICS_BY_CLUSTER: self.get_topics_by_cluster,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: self.get_system_topic_list,
            RequestCode.GET_UNIT_TOPIC_LIST: self.get_unit_topic_list,
            RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: self.get_has_unit_sub_topic_list,
            RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: self.get_has_unit_sub_un_unit_topic_list,
            RequestCode.UPDATE_NAMESRV_CONFIG: self.update_config,
            RequestCode.GET_NAMESRV_CONFIG: self.get_config,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.get_route_info_by_topic,
        }
        return {int(code): _guarded(handler) for code, handler in handlers.items()}

    @property
    def routes(self) -> RouteInfoManager:
        return self.controller.route_info_manager

    @property
    def kv(self) -> KVConfigManager:
        return self.controller.kv_config_manager

    # -- brokers --------------------------------------------------------------------------------------------------

    def register_broker(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        header = RegisterBrokerRequestHeader.from_ext(request.ext_fields)
        if header.body_crc32 != 0 and body_crc32(request.body) != header.body_crc32:
            log.warning("receive registerBroker request, crc32 not match, from %s", conn.remote_address)
            return create_response(request, ResponseCode.SYSTEM_ERROR, "crc32 not match")
        try:
            body = decode_register_broker_body(request.body, compressed=header.compressed, version=request.version)
        except BodyError as err:
            raise BodyError(f"Failed to decode RegisterBrokerBody: {err}") from err
        broker = BrokerRegistration(
            cluster_name=header.cluster_name,
            broker_addr=header.broker_addr,
            broker_name=header.broker_name,
            broker_id=header.broker_id,
            ha_server_addr=header.ha_server_addr,
            zone_name=request.ext_fields.get(ZONE_NAME),
            heartbeat_timeout_millis=header.heartbeat_timeout_millis,
            enable_acting_master=header.enable_acting_master,
        )
        result = self.routes.register_broker(broker, body.topic_config_wrapper, body.filter_server_list, conn)
        if result is None:  # a single-topic increment before the broker's first full registration
            return create_response(request, ResponseCode.SYSTEM_ERROR, "register broker failed")
        response_header = RegisterBrokerResponseHeader(result.ha_server_addr, result.master_addr)
        body_bytes = b""
        if self.controller.config.return_order_topic_config_to_broker:
            order_topics = self.kv.get_kv_list_by_namespace(NAMESPACE_ORDER_TOPIC_CONFIG)
            body_bytes = b"" if order_topics is None else encode_kv_table(order_topics)
        return create_response(request, ResponseCode.SUCCESS, ext_fields=response_header.to_ext(), body=body_bytes)

    def unregister_broker(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        header = UnRegisterBrokerRequestHeader.from_ext(request.ext_fields)
        unregister = UnregisterRequest(header.cluster_name, header.broker_addr, header.broker_name, header.broker_id)
        self.routes.unregister_broker([unregister])
        return create_response(request, ResponseCode.SUCCESS)

    def broker_heartbeat(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        header = BrokerHeartbeatRequestHeader.from_ext(request.ext_fields)
        self.routes.update_broker_info_update_timestamp(header.cluster_name, header.broker_addr)
        return create_response(request, ResponseCode.SUCCESS)

    def query_data_version(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """Whether the broker's topics changed since its last registration; refreshes its liveness either way."""
        header = QueryDataVersionRequestHeader.from_ext(request.ext_fields)
        data_version = decode_data_version(request.body) if request.body else None
        changed = self.routes.is_broker_topic_config_changed(header.cluster_name, header.broker_addr, data_version)
        self.routes.update_broker_info_update_timestamp(header.cluster_name, header.broker_addr)
        known = self.routes.query_broker_topic_config(header.cluster_name, header.broker_addr)
        return create_response(
            request,
            ResponseCode.SUCCESS,
            ext_fields=QueryDataVersionResponseHeader(changed).to_ext(),
            body=b"" if known is None else encode_data_version(known),
        )

    def get_broker_member_group(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        header = GetBrokerMemberGroupRequestHeader.from_ext(request.ext_fields)
        group = self.routes.get_broker_member_group(header.cluster_name, header.broker_name)
        body = encode_broker_member_group(group)
        # Java never clears the placeholder remark of createResponseCommand(null) here.
        return create_response(request, ResponseCode.SUCCESS, NOT_SET_REMARK, body=body)

    def get_broker_cluster_info(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        return create_response(
            request, ResponseCode.SUCCESS, body=encode_cluster_info(self.routes.get_all_cluster_info())
        )

    def wipe_write_perm_of_broker(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        header = BrokerNameHeader.from_ext(request.ext_fields)
        count = self.routes.wipe_write_perm_of_broker(header.broker_name)
        log.info("wipe write perm of broker[%s], client: %s, %s", header.broker_name, conn.remote_address, count)
        return create_response(
            request, ResponseCode.SUCCESS, ext_fields=WipeWritePermOfBrokerResponseHeader(count).to_ext()
        )

    def add_write_perm_of_broker(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        header = BrokerNameHeader.from_ext(request.ext_fields)
        count = self.routes.add_write_perm_of_broker(header.broker_name)
        log.info("add write perm of broker[%s], client: %s, %s", header.broker_name, conn.remote_address, count)
        return create_response(
            request, ResponseCode.SUCCESS, ext_fields=AddWritePermOfBrokerResponseHeader(count).to_ext()
        )

    # -- topics ---------------------------------------------------------------------------------------------------

    def get_route_info_by_topic(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        header = GetRouteInfoRequestHeader.from_ext(request.ext_fields)
        config = self.controller.config
        if config.need_wait_for_service:
            waited_ms = time.monotonic_ns() // 1_000_000 - self.started_ms
            if waited_ms < config.wait_seconds_for_service * 1000:
                log.warning("name server not ready. request code %s", request.code)
                return create_response(request, ResponseCode.SYSTEM_ERROR, "name server not ready")
        route = self.routes.pickup_topic_route_data(header.topic)
        if route is None:
            return create_response(request, ResponseCode.TOPIC_NOT_EXIST, topic_not_exist_remark(header.topic))
        if config.order_message_enable:
            order_topic_conf = self.kv.get_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, header.topic)
            route = dataclasses.replace(route, order_topic_conf=order_topic_conf)
        standard_json = request.version >= V4_9_4 or bool(header.accept_standard_json_only)
        body = encode_topic_route_data(route, standard_json=standard_json)
        return create_response(request, ResponseCode.SUCCESS, body=body)

    def get_all_topic_list(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        enabled = self.controller.config.enable_all_topic_list
        log.warning("getAllTopicListFromNameserver %s enable %s", conn.remote_address, enabled)
        if not enabled:
            return create_response(request, ResponseCode.SYSTEM_ERROR, "disable")
        return create_response(request, ResponseCode.SUCCESS, body=encode_topic_list(self.routes.get_all_topic_list()))

    def get_topics_by_cluster(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        if not self.controller.config.enable_topic_list:
            return create_response(request, ResponseCode.SYSTEM_ERROR, "disable")
        header = GetTopicsByClusterRequestHeader.from_ext(request.ext_fields)
        topics = self.routes.get_topics_by_cluster(header.cluster)
        return create_response(request, ResponseCode.SUCCESS, body=encode_topic_list(topics))

    def get_system_topic_list(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        topics, broker_addr = self.routes.get_system_topic_list()
        return create_response(request, ResponseCode.SUCCESS, body=encode_topic_list(topics, broker_addr))

    def _unit_topics(self, request: RemotingCommand, *, unit: bool | None, unit_sub: bool | None) -> RemotingCommand:
        if not self.controller.config.enable_topic_list:
            return create_response(request, ResponseCode.SYSTEM_ERROR, "disable")
        topics = self.routes.get_unit_topics(unit=unit, unit_sub=unit_sub)
        return create_response(request, ResponseCode.SUCCESS, body=encode_topic_list(topics))

    def get_unit_topic_list(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        return self._unit_topics(request, unit=True, unit_sub=None)

    def get_has_unit_sub_topic_list(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        return self._unit_topics(request, unit=None, unit_sub=True)

    def get_has_unit_sub_un_unit_topic_list(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        return self._unit_topics(request, unit=False, unit_sub=True)

    def delete_topic_in_namesrv(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        header = DeleteTopicFromNamesrvRequestHeader.from_ext(request.ext_fields)
        self.routes.delete_topic(header.topic, header.cluster_name)
        return create_response(request, ResponseCode.SUCCESS)

    def register_topic_in_namesrv(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        header = RegisterTopicRequestHeader.from_ext(request.ext_fields)
        if request.body:
            route = decode_topic_route_data(request.body)
            self.routes.register_topic(header.topic, route.queue_datas)
        return create_response(request, ResponseCode.SUCCESS)

    # -- KV config ------------------------------------------------------------------------------------------------

    def put_kv_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        header = PutKVConfigRequestHeader.from_ext(request.ext_fields)
        self.kv.put_kv_config(header.namespace, header.key, header.value)
        return create_response(request, ResponseCode.SUCCESS)

    def get_kv_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        header = KVConfigKeyHeader.from_ext(request.ext_fields)
        value = self.kv.get_kv_config(header.namespace, header.key)
        if value is None:
            remark = f"No config item, Namespace: {header.namespace} Key: {header.key}"
            return create_response(request, ResponseCode.QUERY_NOT_FOUND, remark)
        return create_response(request, ResponseCode.SUCCESS, ext_fields=GetKVConfigResponseHeader(value).to_ext())

    def delete_kv_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        header = KVConfigKeyHeader.from_ext(request.ext_fields)
        self.kv.delete_kv_config(header.namespace, header.key)
        return create_response(request, ResponseCode.SUCCESS)

    def get_kv_list_by_namespace(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        header = GetKVListByNamespaceRequestHeader.from_ext(request.ext_fields)
        table = self.kv.get_kv_list_by_namespace(header.namespace)
        if table is None:
            return create_response(
                request, ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {header.namespace}"
            )
        return create_response(request, ResponseCode.SUCCESS, body=encode_kv_table(table))

    # -- the NameServer's own config ------------------------------------------------------------------------------

    def update_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """UPDATE_NAMESRV_CONFIG: properties text; black-listed keys are refused. An accepted change is written to
        the config file (``NamesrvController.update_config``)."""
        log.info("updateConfig called by %s", conn.remote_address)
        if request.body:
            try:
                props = parse_properties(request.body.decode("utf-8"))
            except (UnicodeDecodeError, ConfigError) as err:
                log.error("updateConfig cannot parse %r: %s", request.body[:200], err)
                return create_response(request, ResponseCode.SYSTEM_ERROR, "string2Properties error")
            if self.controller.config.black_listed_keys() & props.keys():
                return create_response(request, ResponseCode.NO_PERMISSION, "Can not update config in black list.")
            try:
                self.controller.update_config(props)
            except ConfigError as err:
                return create_response(request, ResponseCode.SYSTEM_ERROR, str(err))
        return create_response(request, ResponseCode.SUCCESS)

    def get_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        props = self.controller.config.to_properties()
        body = "".join(f"{key}={value}\n" for key, value in props.items()).encode()
        return create_response(request, ResponseCode.SUCCESS, body=body)


def _guarded(handler: Handler) -> Processor:
    """The async processor for ``handler``: a request that cannot be parsed gets SYSTEM_ERROR and its reason."""

    async def process(conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        try:
            return handler(conn, request)
        except (HeaderError, BodyError) as err:
            log.warning("request code %s from %s refused: %s", request.code, conn.remote_address, err)
            return create_response(request, ResponseCode.SYSTEM_ERROR, str(err))

    return process
