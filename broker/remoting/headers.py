"""Request and response headers: one dataclass per RocketMQ CommandCustomHeader, parsed once at the edge.

Rule 1: the wire names of header fields (``extFields`` keys) appear only here. A field's wire name is the camelCase of
its snake_case name unless ``WIRE`` says otherwise. Required fields (Java's @CFNotNull) are the ones without a
default; a request missing one is refused with Java's own message.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from broker.common.errors import RmqError
from broker.common.properties import to_camel


class HeaderError(RmqError, ValueError):
    """A request header that cannot be parsed: a required field missing or a value of the wrong type."""


class _Field(typing.NamedTuple):
    name: str  # the dataclass field
    wire: str  # its extFields key
    kind: type  # int, bool or str (Optional unwrapped)
    required: bool  # no default: Java's @CFNotNull
    parse: Callable[[str], Any] | None  # the extFields text to the value (None: the text is the value)


# (header class, wire-name override dict or None) -> (that dict, its fields). Headers are parsed and written on every
# request, so the field list is worked out once per class and override, not per call.
_SPECS: dict[tuple[type, int], tuple[dict[str, str] | None, tuple[_Field, ...]]] = {}


def _fields_of(cls: type, wire: dict[str, str] | None) -> tuple[_Field, ...]:
    cached = _SPECS.get((cls, id(wire)))
    if cached is not None and cached[0] is wire:
        return cached[1]
    hints = typing.get_type_hints(cls)
    names = {**getattr(cls, "WIRE", {}), **(wire or {})}
    fields = []
    for f in sorted(dataclasses.fields(cls), key=lambda f: f.kw_only):  # RpcRequestHeader's fields go last
        args = [a for a in typing.get_args(hints[f.name]) if a is not type(None)]
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        kind = args[0] if args else hints[f.name]
        fields.append(_Field(f.name, names.get(f.name, to_camel(f.name)), kind, required, _PARSERS.get(kind)))
    _SPECS[(cls, id(wire))] = (wire, tuple(fields))
    return tuple(fields)


def _parse_bool(raw: str) -> bool:
    return raw.lower() == "true"  # Boolean.parseBoolean: anything else is false


_PARSERS: dict[type, Callable[[str], Any]] = {bool: _parse_bool, int: int}


def _format(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(slots=True)
class Header:
    WIRE: ClassVar[dict[str, str]] = {}

    @classmethod
    def from_ext(cls, ext: dict[str, str] | None, wire: dict[str, str] | None = None) -> Self:
        """Parse ``extFields``; ``wire`` overrides the wire names (SEND_MESSAGE_V2's one-letter fields)."""
        get = (ext or {}).get
        values: dict[str, Any] = {}
        for name, wire_name, _, required, parse in _fields_of(cls, wire):  # every request: names and tuples unpacked
            raw = get(wire_name)
            if raw is None:
                if required:
                    raise HeaderError(f"the custom field <{wire_name}> is null")
            elif parse is None:
                values[name] = raw
            else:
                try:
                    values[name] = parse(raw)
                except ValueError as err:
                    raise HeaderError(f"the custom field <{wire_name}> has a bad value {raw!r}") from err
        return cls(**values)

    def to_ext(self, wire: dict[str, str] | None = None) -> dict[str, str]:
        out: dict[str, str] = {}
        for f in _fields_of(type(self), wire):
            value = getattr(self, f.name)
            if value is not None:
                out[f.wire] = _format(value)
        return out


@dataclass(slots=True)
class RpcRequestHeader(Header):
    """RocketMQ 5's RpcRequestHeader: ``bname``, the name of the broker a request is meant for, which a client sets
    on requests about one of that broker's queues or messages (a proxy or a static topic routes by it). rmq's broker
    does not route by it; it names itself in CHECK_TRANSACTION_STATE, which the client echoes in END_TRANSACTION.

    Its fields are keyword-only and written after the request's own fields, where the client has always put them.
    """

    bname: str | None = field(default=None, kw_only=True)


# -- sending ---------------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class SendMessageRequestHeader(RpcRequestHeader):
    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: int
    queue_id: int
    sys_flag: int
    born_timestamp: int
    flag: int
    properties: str | None = None
    reconsume_times: int | None = None
    unit_mode: bool | None = None
    batch: bool | None = None
    max_reconsume_times: int | None = None

    # SendMessageRequestHeaderV2 carries the same fields under one-letter names.
    V2_WIRE: ClassVar[dict[str, str]] = {
        "producer_group": "a", "topic": "b", "default_topic": "c", "default_topic_queue_nums": "d", "queue_id": "e",
        "sys_flag": "f", "born_timestamp": "g", "flag": "h", "properties": "i", "reconsume_times": "j",
        "unit_mode": "k", "max_reconsume_times": "l", "batch": "m", "bname": "n",
    }


@dataclass(slots=True)
class SendMessageResponseHeader(Header):
    msg_id: str
    queue_id: int
    queue_offset: int
    transaction_id: str | None = None
    batch_uniq_id: str | None = None


@dataclass(slots=True)
class ConsumerSendMsgBackRequestHeader(RpcRequestHeader):
    offset: int
    group: str
    delay_level: int
    origin_msg_id: str | None = None
    origin_topic: str | None = None
    unit_mode: bool = False
    max_reconsume_times: int | None = None


@dataclass(slots=True)
class EndTransactionRequestHeader(RpcRequestHeader):
    producer_group: str
    tran_state_table_offset: int
    commit_log_offset: int
    commit_or_rollback: int
    msg_id: str
    topic: str | None = None
    from_transaction_check: bool = False
    transaction_id: str | None = None


@dataclass(slots=True)
class CheckTransactionStateRequestHeader(RpcRequestHeader):
    tran_state_table_offset: int
    commit_log_offset: int
    topic: str | None = None
    msg_id: str | None = None
    transaction_id: str | None = None
    offset_msg_id: str | None = None


# -- pulling and offsets ---------------------------------------------------------------------------------------------


@dataclass(slots=True)
class PullMessageRequestHeader(RpcRequestHeader):
    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: int
    max_msg_nums: int
    sys_flag: int
    commit_offset: int
    suspend_timeout_millis: int
    sub_version: int
    subscription: str | None = None
    expression_type: str | None = None
    max_msg_bytes: int | None = None


@dataclass(slots=True)
class PullMessageResponseHeader(Header):
    suggest_which_broker_id: int
    next_begin_offset: int
    min_offset: int
    max_offset: int
    offset_delta: int | None = None
    topic_sys_flag: int | None = None
    group_sys_flag: int | None = None
    forbidden_type: int | None = None


@dataclass(slots=True)
class QueryConsumerOffsetRequestHeader(RpcRequestHeader):
    consumer_group: str
    topic: str
    queue_id: int
    set_zero_if_not_found: bool | None = None


@dataclass(slots=True)
class UpdateConsumerOffsetRequestHeader(RpcRequestHeader):
    consumer_group: str
    topic: str
    queue_id: int
    commit_offset: int


@dataclass(slots=True)
class TopicQueueHeader(RpcRequestHeader):
    """GET_MAX_OFFSET, GET_MIN_OFFSET and GET_EARLIEST_MSG_STORETIME requests."""

    topic: str
    queue_id: int
    committed: bool | None = None


@dataclass(slots=True)
class SearchOffsetRequestHeader(RpcRequestHeader):
    topic: str
    queue_id: int
    timestamp: int
    boundary_type: str | None = None  # "LOWER" (default) or "UPPER"


@dataclass(slots=True)
class OffsetResponseHeader(Header):
    """GET_MAX_OFFSET, GET_MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP, QUERY_CONSUMER_OFFSET responses."""

    offset: int


@dataclass(slots=True)
class TimestampResponseHeader(Header):
    timestamp: int


# -- queries ---------------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class QueryMessageRequestHeader(Header):
    topic: str
    key: str
    max_num: int
    begin_timestamp: int
    end_timestamp: int


@dataclass(slots=True)
class QueryMessageResponseHeader(Header):
    index_last_update_timestamp: int
    index_last_update_phyoffset: int


@dataclass(slots=True)
class ViewMessageRequestHeader(Header):
    offset: int
    topic: str | None = None


# -- clients and groups ----------------------------------------------------------------------------------------------


@dataclass(slots=True)
class UnregisterClientRequestHeader(Header):
    WIRE: ClassVar[dict[str, str]] = {"client_id": "clientID"}

    client_id: str
    producer_group: str | None = None
    consumer_group: str | None = None


@dataclass(slots=True)
class ConsumerGroupHeader(Header):
    """GET_CONSUMER_LIST_BY_GROUP, NOTIFY_CONSUMER_IDS_CHANGED, GET_CONSUMER_CONNECTION_LIST requests."""

    consumer_group: str


@dataclass(slots=True)
class GetConsumeStatsRequestHeader(Header):
    consumer_group: str
    topic: str | None = None


# -- topics ----------------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class CreateTopicRequestHeader(Header):
    topic: str
    default_topic: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_filter_type: str
    order: bool = False
    topic_sys_flag: int | None = None
    attributes: str | None = None
    force: bool | None = None


@dataclass(slots=True)
class TopicHeader(Header):
    """DELETE_TOPIC_IN_BROKER, GET_TOPIC_STATS_INFO, GET_ROUTEINFO_BY_TOPIC requests."""

    topic: str
    cluster_name: str | None = None
    accept_standard_json_only: bool | None = None


# -- namesrv ---------------------------------------------------------------------------------------------------------
# remoting/protocol/header/namesrv/*.java (plus GetBrokerMemberGroupRequestHeader and GetTopicsByClusterRequestHeader,
# which live one package up): what brokers, clients and admin tools send a NameServer.


@dataclass(slots=True)
class RegisterBrokerRequestHeader(Header):
    broker_name: str
    broker_addr: str
    cluster_name: str
    ha_server_addr: str
    broker_id: int
    heartbeat_timeout_millis: int | None = None
    enable_acting_master: bool | None = None  # absent: a broker older than 5.0 (no acting master)
    compressed: bool = False  # the body is RegisterBrokerBody's deflated binary form, not JSON
    body_crc32: int = 0  # UtilAll.crc32 of the body (CRC32 & 0x7FFFFFFF); 0: not checked


@dataclass(slots=True)
class RegisterBrokerResponseHeader(Header):
    ha_server_addr: str | None = None
    master_addr: str | None = None


@dataclass(slots=True)
class UnRegisterBrokerRequestHeader(Header):
    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: int


@dataclass(slots=True)
class BrokerHeartbeatRequestHeader(Header):
    cluster_name: str
    broker_addr: str
    broker_name: str
    broker_id: int | None = None
    epoch: int | None = None
    max_offset: int | None = None
    confirm_offset: int | None = None
    heartbeat_timeout_mills: int | None = None  # sic: Java's field name
    election_priority: int | None = None


@dataclass(slots=True)
class QueryDataVersionRequestHeader(Header):
    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: int


@dataclass(slots=True)
class QueryDataVersionResponseHeader(Header):
    changed: bool


@dataclass(slots=True)
class GetRouteInfoRequestHeader(Header):
    topic: str
    accept_standard_json_only: bool | None = None


@dataclass(slots=True)
class DeleteTopicFromNamesrvRequestHeader(Header):
    topic: str
    cluster_name: str | None = None


@dataclass(slots=True)
class RegisterTopicRequestHeader(Header):
    topic: str


@dataclass(slots=True)
class GetTopicsByClusterRequestHeader(Header):
    cluster: str


@dataclass(slots=True)
class GetBrokerMemberGroupRequestHeader(Header):
    cluster_name: str
    broker_name: str


@dataclass(slots=True)
class BrokerNameHeader(Header):
    """WIPE_WRITE_PERM_OF_BROKER and ADD_WRITE_PERM_OF_BROKER requests."""

    broker_name: str


@dataclass(slots=True)
class WipeWritePermOfBrokerResponseHeader(Header):
    wipe_topic_count: int


@dataclass(slots=True)
class AddWritePermOfBrokerResponseHeader(Header):
    add_topic_count: int


@dataclass(slots=True)
class PutKVConfigRequestHeader(Header):
    namespace: str
    key: str
    value: str


@dataclass(slots=True)
class KVConfigKeyHeader(Header):
    """GET_KV_CONFIG and DELETE_KV_CONFIG requests."""

    namespace: str
    key: str


@dataclass(slots=True)
class GetKVConfigResponseHeader(Header):
    value: str | None = None


@dataclass(slots=True)
class GetKVListByNamespaceRequestHeader(Header):
    namespace: str


# -- pull (broker/server/processors/pull.py) ---------------------------------------------------------------------------


@dataclass(slots=True)
class PullForbiddenResponseHeader(Header):
    """A NO_PERMISSION answer to PULL_MESSAGE: Java's PullMessageResponseHeader with only ``forbiddenType`` set
    (ForbiddenType: 1 broker, 2 group, 3 topic, 4 broadcasting disabled, 5 subscription)."""

    forbidden_type: int


# -- clients, consumers and admin (broker/server/processors/client_manage.py, consumer.py, admin.py) -------------------
# Java primitives without @CFNotNull take their Java default when absent; those defaults are the field defaults here.


@dataclass(slots=True)
class HeartbeatResponseHeader(Header):
    """HEART_BEAT answers: MixAll.IS_SUPPORT_HEART_BEAT_V2 and MixAll.IS_SUB_CHANGE (upper-case wire names)."""

    WIRE: ClassVar[dict[str, str]] = {
        "is_support_heart_beat_v2": "IS_SUPPORT_HEART_BEAT_V2", "is_sub_change": "IS_SUB_CHANGE",
    }

    is_support_heart_beat_v2: bool
    is_sub_change: bool


@dataclass(slots=True)
class ConsumeStatsTopicListHeader(Header):
    """The 5.x ``topicList`` field of GET_CONSUME_STATS ("t1;t2"), read beside GetConsumeStatsRequestHeader."""

    topic_list: str | None = None


@dataclass(slots=True)
class GroupHeader(Header):
    """QUERY_TOPICS_BY_CONSUMER and GET_SUBSCRIPTIONGROUP_CONFIG requests."""

    group: str


@dataclass(slots=True)
class QuerySubscriptionByConsumerRequestHeader(Header):
    group: str
    topic: str | None = None


@dataclass(slots=True)
class QueryConsumeTimeSpanRequestHeader(Header):
    topic: str
    group: str


@dataclass(slots=True)
class ResetOffsetRequestHeader(Header):
    """INVOKE_BROKER_TO_RESET_OFFSET requests and the RESET_CONSUMER_CLIENT_OFFSET the broker sends on."""

    group: str
    topic: str
    timestamp: int
    is_force: bool
    queue_id: int = -1
    offset: int | None = None


@dataclass(slots=True)
class GetConsumerStatusRequestHeader(Header):
    """INVOKE_BROKER_TO_GET_CONSUMER_STATUS and the GET_CONSUMER_STATUS_FROM_CLIENT the broker sends on."""

    topic: str
    group: str
    client_addr: str | None = None


@dataclass(slots=True)
class GetConsumerRunningInfoRequestHeader(Header):
    consumer_group: str
    client_id: str
    jstack_enable: bool = False


@dataclass(slots=True)
class ConsumeMessageDirectlyResultRequestHeader(Header):
    consumer_group: str
    client_id: str | None = None
    msg_id: str | None = None
    broker_name: str | None = None
    topic: str | None = None
    topic_sys_flag: int | None = None
    group_sys_flag: int | None = None


@dataclass(slots=True)
class CloneGroupOffsetRequestHeader(Header):
    src_group: str
    dest_group: str
    topic: str | None = None
    offline: bool = False


@dataclass(slots=True)
class QueryCorrectionOffsetHeader(Header):
    compare_group: str
    topic: str
    filter_groups: str | None = None


@dataclass(slots=True)
class GetConsumeStatsInBrokerHeader(Header):
    is_order: bool


@dataclass(slots=True)
class GetProducerConnectionListRequestHeader(Header):
    producer_group: str


@dataclass(slots=True)
class DeleteSubscriptionGroupRequestHeader(Header):
    group_name: str
    clean_offset: bool = False


@dataclass(slots=True)
class GetAllTopicConfigRequestHeader(Header):
    """5.x split-metadata paging; rmq always answers with every topic, as Java does without enableSplitMetadata."""

    topic_seq: int | None = None
    data_version: str | None = None
    max_topic_num: int | None = None


@dataclass(slots=True)
class GetAllTopicConfigResponseHeader(Header):
    total_topic_num: int


@dataclass(slots=True)
class GetAllSubscriptionGroupResponseHeader(Header):
    total_group_num: int


@dataclass(slots=True)
class GetBrokerConfigResponseHeader(Header):
    version: str


@dataclass(slots=True)
class UpdateGroupForbiddenRequestHeader(Header):
    group: str
    topic: str
    readable: bool | None = None


@dataclass(slots=True)
class QueryConsumeQueueRequestHeader(Header):
    topic: str
    queue_id: int = 0
    index: int = 0
    count: int = 0
    consumer_group: str | None = None


@dataclass(slots=True)
class ViewBrokerStatsDataRequestHeader(Header):
    stats_name: str
    stats_key: str


# -- tools (broker/tools/admin.py: mqadmin) ----------------------------------------------------------------------------


@dataclass(slots=True)
class UniqueKeyQueryHeader(Header):
    """MixAll.UNIQUE_MSG_QUERY_FLAG, the extra QUERY_MESSAGE field saying ``key`` is a UNIQ_KEY (a message id)."""

    WIRE: ClassVar[dict[str, str]] = {"unique_key_query": "_UNIQUE_KEY_QUERY"}

    unique_key_query: bool = False


@dataclass(slots=True)
class QueryMessageIndexHeader(Header):
    """The 5.5 QueryMessageRequestHeader fields beside the key: which index (MessageConst.INDEX_KEY_TYPE "K", UNIQ
    "U", tags "T") and the last IndexKey of a previous page."""

    index_type: str | None = None
    last_key: str | None = None
