"""Headers of the message path (remoting ``protocol/header``): sending, transactions, pulling, offsets and queries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from broker.remoting.headers.base import Header, RpcRequestHeader

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
class EndTransactionBatchRequestHeader(RpcRequestHeader):
    """END_TRANSACTION_BATCH (rmq's RmqRequestCode): one commit or rollback for every half message the body names
    (``broker.remoting.transaction_batch``), all of one producer group and one real topic. A producer's own end
    only: the check's answers stay single END_TRANSACTIONs (``from_transaction_check`` must be false)."""

    producer_group: str
    topic: str
    commit_or_rollback: int
    from_transaction_check: bool = False


@dataclass(slots=True)
class EndTransactionBatchResponseHeader(Header):
    """The SUCCESS answer to END_TRANSACTION_BATCH: half messages ended now, and those a check had ended between
    the broker's validation and its write (not failures: they are ended, as asked or as the check decided)."""

    ended: int
    already_ended: int = 0


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


# -- pull (broker/server/processors/pull.py) ---------------------------------------------------------------------------


@dataclass(slots=True)
class PullForbiddenResponseHeader(Header):
    """A NO_PERMISSION answer to PULL_MESSAGE: Java's PullMessageResponseHeader with only ``forbiddenType`` set
    (ForbiddenType: 1 broker, 2 group, 3 topic, 4 broadcasting disabled, 5 subscription)."""

    forbidden_type: int


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
