"""Headers of the client-management and admin requests: clients and groups, topics, consume stats, offsets resets,
consumer running info, broker configuration and stats."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from broker.remoting.headers.base import Header

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
