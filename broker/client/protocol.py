"""The client's side of every request it makes, sans-IO: build the RemotingCommand, read the response into a value.

Rule 1: how the client fills each request header and how it reads each response (MQClientAPIImpl's
``processSendResponse``, ``processPullResponse`` and friends) is written once, here, and shared by the asyncio client
(``instance.py``, ``producer.py``, ``consumer.py``) and the blocking one (``blocking.py``). Nothing here does I/O.

A response code that is an expected outcome becomes a status value (SendStatus, PullStatus); any other code raises
the MQBrokerError class ``broker.common.errors.for_code`` gives it, carrying the code, the remark, the answering
address and whether a retry may help.

The admin headers (topics, clients, groups) are read through the ``headers`` face when a request is first built, so
that a Spark executor, which only pulls, sends and looks up routes, never loads them (tests/unit/test_imports.py).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

from broker.client.message import (
    Message,
    MessageExt,
    MessageQueue,
    PullResult,
    PullStatus,
    SendResult,
    SendStatus,
    decode_messages,
)
from broker.client.route import TopicRouteData
from broker.common.attributes import attributes_to_string
from broker.common.errors import MQClientError, broker_error
from broker.common.fastjson import decode_json, encode_json
from broker.common.message import (
    PROPERTY_MAX_OFFSET,
    PROPERTY_MAX_RECONSUME_TIMES,
    PROPERTY_MIN_OFFSET,
    PROPERTY_MSG_REGION,
    PROPERTY_RECONSUME_TIME,
    PROPERTY_TRACE_SWITCH,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PullSysFlag,
    encode_properties,
)
from broker.common.topic import TopicConfig
from broker.common.validation import AUTO_CREATE_TOPIC_KEY_TOPIC, RETRY_GROUP_TOPIC_PREFIX
from broker.remoting import headers
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import RemotingCommand, create_request
from broker.remoting.headers import (
    ConsumerSendMsgBackRequestHeader,
    EndTransactionRequestHeader,
    GetRouteInfoRequestHeader,
    OffsetResponseHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader,
    SearchOffsetRequestHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    TopicQueueHeader,
    UpdateConsumerOffsetRequestHeader,
)
from broker.remoting.heartbeat import (
    EXPRESSION_TAG,
    ConsumerData,
    HeartbeatData,
    SubscriptionData,
)


def expect_success(response: RemotingCommand, address: str | None) -> RemotingCommand:
    if response.code != ResponseCode.SUCCESS:
        raise broker_error(response.code, response.remark, address)
    return response


# -- NameServer --------------------------------------------------------------------------------------------------------


def get_route_request(topic: str) -> RemotingCommand:
    return create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic).to_ext())


def cluster_info_request() -> RemotingCommand:
    """GET_BROKER_CLUSTER_INFO: every broker group and cluster the NameServer knows (ClusterInfo)."""
    return create_request(RequestCode.GET_BROKER_CLUSTER_INFO)


def topic_list_request() -> RemotingCommand:
    """GET_ALL_TOPIC_LIST_FROM_NAMESERVER: every topic of every broker (TopicList)."""
    return create_request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)


def parse_route_response(response: RemotingCommand) -> TopicRouteData:
    """The route, or MQClientError with the NameServer's code (TOPIC_NOT_EXIST for an unknown topic), as
    MQClientAPIImpl.getTopicRouteInfoFromNameServer."""
    if response.code == ResponseCode.SUCCESS and response.body:
        return TopicRouteData.decode(response.body)
    raise MQClientError(response.code, response.remark or "")


# -- sending -----------------------------------------------------------------------------------------------------------


def send_message_request(header: SendMessageRequestHeader, body: bytes, *, batch: bool = False,
                         v2: bool = True) -> RemotingCommand:
    """SEND_MESSAGE_V2 (one-letter header fields) by default, SEND_BATCH_MESSAGE for a batch (always V2 fields),
    SEND_MESSAGE with the long names when ``v2`` is False."""
    if batch:
        return create_request(RequestCode.SEND_BATCH_MESSAGE, header.to_ext(SendMessageRequestHeader.V2_WIRE), body)
    if v2:
        return create_request(RequestCode.SEND_MESSAGE_V2, header.to_ext(SendMessageRequestHeader.V2_WIRE), body)
    return create_request(RequestCode.SEND_MESSAGE, header.to_ext(), body)


def send_message_header(group: str, msg: Message, mq: MessageQueue, sys_flag: int, *, batch: bool,
                        create_topic_key: str = AUTO_CREATE_TOPIC_KEY_TOPIC,
                        default_topic_queue_nums: int = 4) -> SendMessageRequestHeader:
    """SendMessageRequestHeader as sendKernelImpl fills it. A message sent back to a retry topic carries its
    reconsume counters in the header too (Java reads them after the properties string was already made)."""
    properties = msg.properties
    reconsume_times, max_reconsume_times = 0, None
    if msg.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        if (value := properties.get(PROPERTY_RECONSUME_TIME)) is not None:
            reconsume_times = int(value)
        if (value := properties.get(PROPERTY_MAX_RECONSUME_TIMES)) is not None:
            max_reconsume_times = int(value)
    return SendMessageRequestHeader(
        producer_group=group, topic=msg.topic, default_topic=create_topic_key,
        default_topic_queue_nums=default_topic_queue_nums, queue_id=mq.queue_id, sys_flag=int(sys_flag),
        born_timestamp=time.time_ns() // 1_000_000, flag=msg.flag, properties=encode_properties(properties),
        reconsume_times=reconsume_times, unit_mode=False, batch=batch, max_reconsume_times=max_reconsume_times,
        bname=mq.broker_name,
    )


_SEND_STATUS: dict[int, SendStatus] = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}


def parse_send_response(response: RemotingCommand, topic: str, broker_name: str, address: str | None,
                        uniq_ids: Sequence[str]) -> SendResult:
    """processSendResponse. ``uniq_ids`` are the UNIQ_KEYs sent (one, or each message of a batch)."""
    status = _SEND_STATUS.get(response.code)
    if status is None:
        raise broker_error(response.code, response.remark, address)
    header = SendMessageResponseHeader.from_ext(dict(response.ext_fields))
    msg_id = ",".join(uniq_ids) if header.batch_uniq_id is None else header.batch_uniq_id
    return SendResult(status, msg_id or None, header.msg_id, MessageQueue(topic, broker_name, header.queue_id),
                      header.queue_offset, header.transaction_id,
                      response.ext_fields.get(PROPERTY_MSG_REGION) or "DefaultRegion",
                      response.ext_fields.get(PROPERTY_TRACE_SWITCH) != "false")


def uniq_ids_of(messages: Iterable[Message]) -> list[str]:
    return [m.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "") for m in messages]


def consumer_send_msg_back_request(msg: MessageExt, group: str, delay_level: int,
                                   max_reconsume_times: int) -> RemotingCommand:
    header = ConsumerSendMsgBackRequestHeader(offset=msg.commit_log_offset, group=group, delay_level=delay_level,
                                              origin_msg_id=msg.msg_id, origin_topic=msg.topic,
                                              max_reconsume_times=max_reconsume_times, bname=msg.broker_name or None)
    return create_request(RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext())


# -- pulling -----------------------------------------------------------------------------------------------------------


def pull_message_request(group: str, mq: MessageQueue, offset: int, max_nums: int, *,
                         subscription: SubscriptionData | None = None, commit_offset: int | None = None,
                         suspend_timeout_ms: int = 0, max_msg_bytes: int | None = None) -> RemotingCommand:
    """PULL_MESSAGE with the PullSysFlag bits Java sets: COMMIT_OFFSET when an offset rides along, SUSPEND when
    the broker may hold the request (long polling), SUBSCRIPTION when the expression is sent."""
    flag = PullSysFlag(0)
    if commit_offset is not None and commit_offset > 0:
        flag |= PullSysFlag.COMMIT_OFFSET
    if suspend_timeout_ms > 0:
        flag |= PullSysFlag.SUSPEND
    if subscription is not None:
        flag |= PullSysFlag.SUBSCRIPTION
    header = PullMessageRequestHeader(
        consumer_group=group, topic=mq.topic, queue_id=mq.queue_id, queue_offset=offset, max_msg_nums=max_nums,
        sys_flag=int(flag), commit_offset=commit_offset or 0, suspend_timeout_millis=suspend_timeout_ms,
        sub_version=subscription.sub_version if subscription and subscription.expression_type != "TAG" else 0,
        subscription=subscription.sub_string if subscription else None,
        expression_type=subscription.expression_type if subscription else EXPRESSION_TAG,
        max_msg_bytes=max_msg_bytes, bname=_bname(mq),
    )
    return create_request(RequestCode.PULL_MESSAGE, header.to_ext())


_PULL_STATUS: dict[int, PullStatus] = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


def parse_pull_response(response: RemotingCommand, address: str | None) -> PullResult:
    """processPullResponse: the status and offsets; ``body`` keeps the records undecoded."""
    status = _PULL_STATUS.get(response.code)
    if status is None:
        raise broker_error(response.code, response.remark, address)
    header = PullMessageResponseHeader.from_ext(dict(response.ext_fields))
    body = response.body if status is PullStatus.FOUND else b""
    return PullResult(status, header.next_begin_offset, header.min_offset, header.max_offset, body,
                      suggest_which_broker_id=header.suggest_which_broker_id)


def decode_pull_result(result: PullResult, mq: MessageQueue, subscription: SubscriptionData | None = None) -> None:
    """PullAPIWrapper.processPullResult: decode the body, drop messages whose tag only collided with a wanted
    tag's hash, and stamp each with the queue and the MIN_OFFSET / MAX_OFFSET properties."""
    if result.status is not PullStatus.FOUND or not result.body:
        return
    messages = decode_messages(result.body, mq.broker_name)
    if subscription is not None and subscription.tags_set:
        messages = [m for m in messages if subscription.matches_tag(m.tags)]
    min_offset, max_offset = str(result.min_offset), str(result.max_offset)
    for msg in messages:
        msg.properties[PROPERTY_MIN_OFFSET] = min_offset
        msg.properties[PROPERTY_MAX_OFFSET] = max_offset
        msg.queue_id = mq.queue_id
    result.messages = messages


# -- offsets -----------------------------------------------------------------------------------------------------------


def max_offset_request(mq: MessageQueue, committed: bool | None = None) -> RemotingCommand:
    return create_request(RequestCode.GET_MAX_OFFSET, _queue_ext(mq, committed))


def min_offset_request(mq: MessageQueue) -> RemotingCommand:
    return create_request(RequestCode.GET_MIN_OFFSET, _queue_ext(mq))


def _queue_ext(mq: MessageQueue, committed: bool | None = None) -> dict[str, str]:
    return TopicQueueHeader(mq.topic, mq.queue_id, committed, bname=_bname(mq)).to_ext()


def _bname(mq: MessageQueue) -> str | None:
    """RpcRequestHeader.bname of a request about ``mq``: none for a queue known only by its broker's address
    (mqadmin's resetOffsetByTime -b -q), as Java's deprecated calls by address send none."""
    return mq.broker_name or None


def search_offset_request(mq: MessageQueue, timestamp_ms: int,
                          boundary_type: str | None = "LOWER") -> RemotingCommand:
    """SEARCH_OFFSET_BY_TIMESTAMP; ``boundary_type`` None leaves it out (the broker then takes LOWER), as the
    deprecated MQAdmin searchOffset(addr, topic, queueId, timestamp) does."""
    header = SearchOffsetRequestHeader(mq.topic, mq.queue_id, timestamp_ms, boundary_type, bname=_bname(mq))
    return create_request(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, header.to_ext())


def parse_offset_response(response: RemotingCommand, address: str | None) -> int:
    """GET_MAX_OFFSET / GET_MIN_OFFSET / SEARCH_OFFSET_BY_TIMESTAMP / QUERY_CONSUMER_OFFSET answers (QUERY_NOT_FOUND
    raises OffsetNotFound)."""
    return OffsetResponseHeader.from_ext(dict(expect_success(response, address).ext_fields)).offset


def query_consumer_offset_request(group: str, mq: MessageQueue) -> RemotingCommand:
    header = QueryConsumerOffsetRequestHeader(group, mq.topic, mq.queue_id, bname=_bname(mq))
    return create_request(RequestCode.QUERY_CONSUMER_OFFSET, header.to_ext())


def update_consumer_offset_request(group: str, mq: MessageQueue, offset: int) -> RemotingCommand:
    header = UpdateConsumerOffsetRequestHeader(group, mq.topic, mq.queue_id, offset, bname=_bname(mq))
    return create_request(RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext())


# -- topics ------------------------------------------------------------------------------------------------------------


def create_topic_request(config: TopicConfig) -> RemotingCommand:
    """UPDATE_AND_CREATE_TOPIC of ``config`` at one broker, which then registers the topic with its NameServers; TBW102
    is the key topic, as DefaultMQAdminExt.createTopicKey. The header carries every field MQClientAPIImpl.createTopic
    sets (attributes in AttributeParser's text, force false)."""
    header = headers.CreateTopicRequestHeader(
        topic=config.topic_name, default_topic=AUTO_CREATE_TOPIC_KEY_TOPIC, read_queue_nums=config.read_queue_nums,
        write_queue_nums=config.write_queue_nums, perm=config.perm, topic_filter_type=str(config.topic_filter_type),
        order=config.order, topic_sys_flag=config.topic_sys_flag, attributes=attributes_to_string(config.attributes),
        force=False)
    return create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())


# -- transactions ------------------------------------------------------------------------------------------------------


def end_transaction_request(group: str, *, topic: str | None, broker_name: str | None, msg_id: str,
                            commit_log_offset: int, queue_offset: int, transaction_id: str | None,
                            commit_or_rollback: int, from_check: bool = False,
                            remark: str | None = None) -> RemotingCommand:
    """END_TRANSACTION of a half message: ``commit_log_offset`` from its offsetMsgId, ``queue_offset`` its half queue
    offset (tranStateTableOffset), ``msg_id`` its UNIQ_KEY, ``commit_or_rollback`` a MessageSysFlag transaction
    type. A producer sends it oneway, with a remark when its local transaction failed, and ``from_check`` when it
    answers CHECK_TRANSACTION_STATE; the sink's END_TRANSACTION template is cut from it."""
    header = EndTransactionRequestHeader(
        producer_group=group, tran_state_table_offset=queue_offset, commit_log_offset=commit_log_offset,
        commit_or_rollback=commit_or_rollback, msg_id=msg_id, topic=topic, from_transaction_check=from_check,
        transaction_id=transaction_id, bname=broker_name)
    return create_request(RequestCode.END_TRANSACTION, header.to_ext(), remark=remark)


# -- clients and groups ------------------------------------------------------------------------------------------------


def heartbeat_request(client_id: str, producer_groups: Iterable[str],
                      consumers: Iterable[ConsumerData]) -> RemotingCommand:
    """HEART_BEAT with HeartbeatData as JSON (V1: the subscriptions always ride along)."""
    body = HeartbeatData(client_id, list(consumers), list(producer_groups)).to_json()
    return create_request(RequestCode.HEART_BEAT, body=encode_json(body).encode())


def unregister_client_request(client_id: str, producer_group: str | None = None,
                              consumer_group: str | None = None) -> RemotingCommand:
    header = headers.UnregisterClientRequestHeader(client_id, producer_group, consumer_group)
    return create_request(RequestCode.UNREGISTER_CLIENT, header.to_ext())


def consumer_list_request(group: str) -> RemotingCommand:
    return create_request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, headers.ConsumerGroupHeader(group).to_ext())


def parse_consumer_list_response(response: RemotingCommand, address: str | None) -> list[str]:
    """GetConsumerListByGroupResponseBody's ``consumerIdList``."""
    expect_success(response, address)
    if not response.body:
        raise broker_error(response.code, "GET_CONSUMER_LIST_BY_GROUP answered without a body", address)
    return [str(cid) for cid in decode_json(response.body.decode("utf-8")).get("consumerIdList") or ()]
